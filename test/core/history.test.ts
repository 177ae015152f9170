import { describe, expect, it } from "vitest";
import {
  type HistoryEntry,
  applyHistoryPolicy,
  condenseHistory,
  historyEntries,
  historyToMessages,
  PLAN_FOLLOW_UP,
  shownAction,
} from "../../src/core/history.ts";
import type { StepRecord } from "../../src/core/state.ts";

const act = (step: number): HistoryEntry => ({
  kind: "action",
  step,
  content: `action ${step}`,
  code: `c${step}()`,
});
const obs = (step: number, isError = false): HistoryEntry => ({
  kind: "observation",
  step,
  content: `obs ${step}`,
  isError,
});
const plan = (step: number): HistoryEntry => ({ kind: "plan", step, content: `plan ${step}` });
/** The last-action note as the condensed view writes it. */
const note = (step: number) =>
  `Your last code (step ${step}) gave the observation above:\n\`\`\`js\nc${step}()\n\`\`\``;

function fold(policy: "condensed" | "full", entries: HistoryEntry[]): HistoryEntry[] {
  // The view of the whole record, as computed at prompt time.
  return applyHistoryPolicy(policy, entries);
}

describe("condensed view", () => {
  it("keeps every observation in order, then a note with the last action's code", () => {
    const h = fold("condensed", [act(1), obs(1), act(2), obs(2), act(3), obs(3)]);
    expect(h.map((e) => e.content)).toEqual(["obs 1", "obs 2", "obs 3", note(3)]);
    expect(h.at(-1)).toMatchObject({ kind: "last_action", step: 3 });
  });

  it("recalls a reply without code as such", () => {
    const h = fold("condensed", [{ ...act(1), code: null }, obs(1, true)]);
    expect(h.at(-1)!.content).toBe(
      "Your last reply (step 1) had no code; the observation above says why:\naction 1",
    );
  });

  it("keeps an error observation only while it is the latest step", () => {
    const withError = fold("condensed", [act(1), obs(1), act(2), obs(2, true)]);
    expect(withError.map((e) => e.content)).toEqual(["obs 1", "obs 2", note(2)]);
    const resolved = fold("condensed", [act(1), obs(1), act(2), obs(2, true), act(3), obs(3)]);
    expect(resolved.map((e) => e.content)).toEqual(["obs 1", "obs 3", note(3)]);
  });

  it("keeps only the latest plan, where it was made (after the note of the action before it)", () => {
    const h = fold("condensed", [plan(1), act(1), obs(1), act(2), obs(2), plan(3)]);
    expect(h.map((e) => e.content)).toEqual(["obs 1", "obs 2", note(2), "plan 3"]);
  });

  it("is idempotent (re-condensing changes nothing)", () => {
    const h = fold("condensed", [plan(1), act(1), obs(1, true), act(2), obs(2)]);
    expect(condenseHistory(h)).toEqual(h);
  });

  it("leaves the record alone: the view is a new list", () => {
    const all = [act(1), obs(1), act(2), obs(2)];
    const view = fold("condensed", all);
    expect(view).toHaveLength(3);
    expect(all).toHaveLength(4);
  });
});

describe("full view", () => {
  it("keeps every entry", () => {
    const entries = [plan(1), act(1), obs(1, true), act(2), obs(2)];
    expect(fold("full", entries)).toEqual(entries);
  });
});

describe("historyToMessages", () => {
  it("sends observations and the note as user messages; only the note changes from step to step", () => {
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
    expect(before.map((m) => m.getType())).toEqual(["system", "human", "human", "human", "human"]);
    // Append-mostly: everything before the earlier prompt's note is a prefix of the later prompt.
    const prefix = before.slice(0, -1).map((m) => m.content);
    expect(after.slice(0, before.length - 1).map((m) => m.content)).toEqual(prefix);
    expect(after.slice(before.length - 1).map((m) => m.content)).toEqual(["obs 3", note(3)]);
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
    const record = [act(1), obs(1), act(2), obs(2), plan(3)];
    const atPlan = historyToMessages("SYS", "Task", fold("condensed", record));
    expect(atPlan.map((m) => m.getType())).toEqual([
      "system",
      "human",
      "human",
      "human",
      "human",
      "ai",
      "human",
    ]);
    expect(atPlan.at(-1)!.content).toBe(PLAN_FOLLOW_UP);
    // The next prompt keeps everything up to the earlier note, then plan, follow-up, the new
    // observation and its note.
    const next = historyToMessages("SYS", "Task", fold("condensed", [...record, act(3), obs(3)]));
    expect(next.slice(-5).map((m) => m.content)).toEqual([
      "obs 2",
      "plan 3",
      PLAN_FOLLOW_UP,
      "obs 3",
      note(3),
    ]);
  });
});

describe("the view computed from the trajectory record", () => {
  const step = (o: Partial<StepRecord>): StepRecord => ({
    step: 1,
    kind: "action",
    modelOutput: "",
    thought: "",
    code: null,
    observation: "",
    error: null,
    toolCalls: [],
    isFinalAnswer: false,
    durationMs: 0,
    ...o,
  });

  it("turns plans, actions and observations into entries; forced final answers are not shown", () => {
    const entries = historyEntries([
      step({ kind: "planning", modelOutput: "## Plan\n1. look", step: 1 }),
      step({ modelOutput: "Thought: a\nCode:\n```js\nx()\n```", code: "x()", observation: "ok" }),
      step({
        step: 2,
        modelOutput: "Thought: b\nCode:\n```js\ny(\n```",
        code: "y(",
        observation: "Error: SyntaxError",
        error: { name: "SyntaxError", message: "m", line: 1 },
      }),
      step({ step: 2, kind: "final_answer", modelOutput: "Final answer: 4" }),
    ]);
    expect(entries).toEqual([
      { kind: "plan", step: 1, content: "## Plan\n1. look" },
      {
        kind: "action",
        step: 1,
        content: "Thought: a\nCode:\n```js\nx()\n```<end_action>",
        code: "x()",
      },
      { kind: "observation", step: 1, content: "Observation:\nok", isError: false },
      {
        kind: "action",
        step: 2,
        content: "Thought: b\nCode:\n```js\ny(\n```<end_action>",
        code: "y(",
      },
      { kind: "observation", step: 2, content: "Observation:\nError: SyntaxError", isError: true },
    ]);
  });

  it("shows an action without think blocks, closed with <end_action> once, or says it was empty", () => {
    expect(shownAction("<think>long</think>Thought: t\nCode:\n```js\n1\n```", "1")).toBe(
      "Thought: t\nCode:\n```js\n1\n```<end_action>",
    );
    expect(shownAction("Code:\n```js\n1\n```<end_action>", "1")).toBe(
      "Code:\n```js\n1\n```<end_action>",
    );
    expect(shownAction("no code here", null)).toBe("no code here");
    expect(shownAction("  ", null)).toBe("(empty reply)");
  });
});
