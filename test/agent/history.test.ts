import { describe, expect, it } from "vitest";
import { resetTo, resettable } from "../../src/agent/new-task.ts";
import {
  type HistoryEntry,
  condenseHistory,
  historyReducer,
  historyToMessages,
  PLAN_FOLLOW_UP,
} from "../../src/agent/history.ts";

const act = (step: number): HistoryEntry => ({ kind: "action", step, content: `action ${step}` });
const obs = (step: number, isError = false): HistoryEntry => ({
  kind: "observation",
  step,
  content: `obs ${step}`,
  isError,
});
const plan = (step: number): HistoryEntry => ({ kind: "plan", step, content: `plan ${step}` });

function fold(policy: "condensed" | "full", entries: HistoryEntry[]): HistoryEntry[] {
  const reduce = historyReducer(policy);
  // One update per entry, as the nodes write them.
  return entries.reduce<HistoryEntry[]>((acc, e) => reduce(acc, e), []);
}

describe("condensed history reducer", () => {
  it("keeps every observation but only the last action, in chronological order", () => {
    const h = fold("condensed", [act(1), obs(1), act(2), obs(2), act(3), obs(3)]);
    expect(h.map((e) => e.content)).toEqual(["obs 1", "obs 2", "action 3", "obs 3"]);
  });

  it("keeps an error observation only while it is the latest step", () => {
    const withError = fold("condensed", [act(1), obs(1), act(2), obs(2, true)]);
    expect(withError.map((e) => e.content)).toEqual(["obs 1", "action 2", "obs 2"]);
    const resolved = fold("condensed", [act(1), obs(1), act(2), obs(2, true), act(3), obs(3)]);
    expect(resolved.map((e) => e.content)).toEqual(["obs 1", "action 3", "obs 3"]);
  });

  it("keeps only the latest plan, where it was made", () => {
    const h = fold("condensed", [plan(1), act(1), obs(1), act(2), obs(2), plan(3), act(3)]);
    expect(h.map((e) => e.content)).toEqual(["obs 1", "obs 2", "plan 3", "action 3"]);
  });

  it("is idempotent (re-condensing changes nothing)", () => {
    const h = fold("condensed", [plan(1), act(1), obs(1, true), act(2), obs(2)]);
    expect(condenseHistory(h)).toEqual(h);
  });

  it("accepts array updates and ignores undefined", () => {
    const reduce = historyReducer("condensed");
    expect(reduce([], [act(1), obs(1)])).toHaveLength(2);
    expect(reduce([act(1)], undefined)).toEqual([act(1)]);
  });
});

describe("full history reducer", () => {
  it("keeps every entry", () => {
    const entries = [plan(1), act(1), obs(1, true), act(2), obs(2)];
    expect(fold("full", entries)).toEqual(entries);
  });
});

describe("historyToMessages", () => {
  it("sends observations as user messages and the prompt prefix is stable step to step", () => {
    const before = historyToMessages(
      "SYS",
      "Task: t",
      fold("condensed", [act(1), obs(1), act(2), obs(2)]),
    );
    const after = historyToMessages(
      "SYS",
      "Task: t",
      fold("condensed", [act(1), obs(1), act(2), obs(2), act(3), obs(3)]),
    );
    expect(before.map((m) => m.getType())).toEqual(["system", "human", "human", "ai", "human"]);
    // Everything before the last action of the earlier prompt is a prefix of the later prompt.
    const prefix = before.slice(0, 3).map((m) => m.content);
    expect(after.slice(0, 3).map((m) => m.content)).toEqual(prefix);
  });

  it("follows a plan with a user turn, so roles alternate and the prompt ends with the user", () => {
    const msgs = historyToMessages("SYS", "Task", [plan(1), act(1), obs(1)]);
    expect(msgs.map((m) => m.getType())).toEqual(["system", "human", "ai", "human", "ai", "human"]);
    expect(msgs.map((m) => m.content)).toEqual([
      "SYS",
      "Task",
      "plan 1",
      PLAN_FOLLOW_UP,
      "action 1",
      "obs 1",
    ]);
    // Right after a planning step in the middle of a run: the plan is not the last message.
    const h = fold("condensed", [act(1), obs(1), act(2), obs(2), plan(3)]);
    const atPlan = historyToMessages("SYS", "Task", h);
    expect(atPlan.map((m) => m.getType())).toEqual([
      "system",
      "human",
      "human",
      "ai",
      "human",
      "ai",
      "human",
    ]);
    expect(atPlan.at(-1)!.content).toBe(PLAN_FOLLOW_UP);
    // The next prompt keeps everything up to the dropped action, then plan, follow-up, action.
    const next = historyToMessages("SYS", "Task", fold("condensed", [...h, act(3), obs(3)]));
    expect(next.slice(-5).map((m) => m.content)).toEqual([
      "obs 2",
      "plan 3",
      PLAN_FOLLOW_UP,
      "action 3",
      "obs 3",
    ]);
  });
});

describe("resettable reducers", () => {
  it("replace the value on a reset update and reduce normally otherwise", () => {
    const reduce = resettable(historyReducer("full"));
    const h = reduce([act(1), obs(1)], act(2));
    expect(h).toHaveLength(3);
    expect(reduce(h, resetTo([plan(1)]))).toEqual([plan(1)]);
  });
});
