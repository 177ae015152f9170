import { spawn } from "node:child_process";
import { beforeAll, describe, expect, it } from "vitest";
import {
  DEMO_ANSWERS,
  DEMO_QUESTIONS,
  DEMO_SUBTASKS,
  towersRules,
} from "../../src/apps/qa/demo-trajectories.ts";
import { ask, history, replay, resume, trace } from "../../src/apps/qa/app.ts";
import type { SqlitePersistence as Persistence } from "../../src/persistence/index.ts";
import type { CheckpointSummary } from "../../src/runs/inspect.ts";
import { trajectoryResponder } from "../../src/testing/scripted-openai-server.ts";
import { useDemoWorld } from "./fixtures.ts";

const world = useDemoWorld("codehop-replay-", {
  responder: () => trajectoryResponder(towersRules()),
  persistence: true,
});
const config = () => world.config();
let persistence: Persistence;
let original: CheckpointSummary[];

beforeAll(async () => {
  persistence = world.persistence;
  const result = await ask(DEMO_QUESTIONS.towers, { threadId: "t", config: config(), persistence });
  expect(result.answer).toBe(DEMO_ANSWERS.towers);
  original = await history("t", { persistence });
});

const requests = () =>
  Object.fromEntries(
    ["manager:towers", "wiki:eiffel", "wiki:empire", "page:empire"].map((r) => [
      r,
      world.server.requestsFor(r).length,
    ]),
  );
/** Checkpoint where the manager is about to run action `step`. */
const beforeAct = (rows: CheckpointSummary[], step: number) =>
  rows.find((r) => r.next.includes("act") && r.actions === step - 1)!;

describe("history and replay (time travel)", () => {
  it("lists every manager step as a root checkpoint, newest first", () => {
    expect(original[0].next).toEqual([]);
    expect(original[0].summary).toContain("answer: 41 years");
    expect(beforeAct(original, 1).summary).toContain("about to run step 1");
    expect(beforeAct(original, 2).summary).toContain("about to run step 2");
    // Parent links form one chain back to the input checkpoint.
    const ids = new Set(original.map((r) => r.checkpoint_id));
    for (const r of original)
      if (r.parent_checkpoint_id) expect(ids.has(r.parent_checkpoint_id)).toBe(true);
  });

  it("also lists the nested agents' checkpoints on request", async () => {
    const all = await history("t", { persistence, allNamespaces: true });
    const nested = all.filter((r) => r.namespace !== "");
    expect(new Set(nested.map((r) => r.agent))).toEqual(
      new Set(["wikipedia_search", "page_search"]),
    );
    // Two wikipedia_search runs (one per sub-agent call) and one page_search run, each ending with its answer.
    const namespaces = new Set(nested.map((r) => r.namespace));
    expect(namespaces.size).toBe(3);
    expect(
      nested
        .filter((r) => r.summary.startsWith("answer: "))
        .map((r) => r.agent)
        .sort(),
    ).toEqual(["page_search", "wikipedia_search", "wikipedia_search"]);
    expect(all.filter((r) => r.namespace === "")).toEqual(original.map((r) => ({ ...r })));
  });

  it("replays from a mid-run checkpoint as a fork; the original history stays intact", async () => {
    const from = original.find((r) => r.next.includes("plan") && r.actions === 1)!;
    const before = requests();
    const result = await replay("t", from.checkpoint_id, { config: config(), persistence });
    expect(result.answer).toBe(DEMO_ANSWERS.towers);
    // Only the manager's second step was re-planned; no sub-agent ran again.
    expect(requests()).toEqual({ ...before, "manager:towers": before["manager:towers"] + 1 });

    const after = await history("t", { persistence });
    const afterIds = new Set(after.map((r) => r.checkpoint_id));
    for (const r of original) expect(afterIds.has(r.checkpoint_id)).toBe(true);
    // Two children of the replayed checkpoint: the original continuation and the new branch.
    const children = after.filter((r) => r.parent_checkpoint_id === from.checkpoint_id);
    expect(children).toHaveLength(2);
    expect(after[0].checkpoint_id).not.toBe(original[0].checkpoint_id);
    expect(result.checkpoint_id).toBe(after[0].checkpoint_id);
  });

  it("replays the sub-agent calls from the journal, deterministically", async () => {
    const from = beforeAct(original, 1);
    const before = requests();
    const result = await replay("t", from.checkpoint_id, { config: config(), persistence });
    expect(result.answer).toBe(DEMO_ANSWERS.towers);
    // Step 1's two sub-agent calls were served from the journal; step 2 was re-planned once.
    expect(requests()).toEqual({ ...before, "manager:towers": before["manager:towers"] + 1 });
  });

  it("forks with an edited state (updateState) without touching the original branch", async () => {
    const from = beforeAct(original, 2);
    const [row] = await history("t", {
      persistence,
      checkpointId: from.checkpoint_id,
      withValues: true,
    });
    const pending = (row.values as any).pending;
    const result = await replay("t", from.checkpoint_id, {
      config: config(),
      persistence,
      update: { pending: { ...pending, code: 'final_answer("edited: " + (1930 - 1889))' } },
      asNode: "plan",
    });
    expect(result.answer).toBe("edited: 41");
    // The original final checkpoint still holds the original answer.
    const [orig] = await history("t", {
      persistence,
      checkpointId: original[0].checkpoint_id,
      withValues: true,
    });
    expect((orig.values as any).answer).toBe(DEMO_ANSWERS.towers);
    const fork = (await history("t", { persistence }))[0];
    expect(fork.summary).toBe("answer: edited: 41");
  });

  it("rebuilds the current branch's full tree from the checkpoints (trace / codehop show)", async () => {
    const tree = await trace("t", { persistence });
    const root = tree.root!;
    expect(root.answer).toBe("edited: 41"); // the newest branch
    expect(root.steps.map((s) => s.step)).toEqual([1, 2]);
    const [eiffel, empire] = root.steps[0].children;
    expect([eiffel.name, eiffel.task, eiffel.answer]).toEqual([
      "wikipedia_search",
      DEMO_SUBTASKS.eiffel,
      expect.stringContaining("1889"),
    ]);
    expect(empire.answer).toContain("1930");
    // search_info ran the page agent inside the Empire State Building search, at its step 2.
    const page = empire.steps.find((s) => s.step === 2)!.children[0];
    expect(page.name).toBe("page_search");
    expect(page.steps).toHaveLength(2);
    expect(tree.render("…", 120, { expand: true }).join("\n")).toContain(
      "✓ page_search: Retrieve information",
    );
  });

  it("names unknown state keys and nodes of an edit instead of crashing", async () => {
    const from = beforeAct(original, 2);
    await expect(
      replay("t", from.checkpoint_id, { config: config(), persistence, update: { nosuchkey: 1 } }),
    ).rejects.toMatchObject({
      code: "CODEHOP_CONFIG_INVALID",
      message: expect.stringContaining("Unknown state key(s) nosuchkey"),
    });
    await expect(
      replay("t", from.checkpoint_id, {
        config: config(),
        persistence,
        update: { answer: "x" },
        asNode: "nonode",
      }),
    ).rejects.toMatchObject({
      code: "CODEHOP_CONFIG_INVALID",
      message: expect.stringContaining('Node "nonode" does not exist'),
    });
    expect((await persistence.threads.get("t"))?.status).toBe("done");
  });

  it("checks an edit against its channel's type before forking: a bad value writes nothing", async () => {
    const from = beforeAct(original, 2);
    const before = (await history("t", { persistence })).length;
    for (const [update, named] of [
      [{ stepCount: "abc" }, '"stepCount"'],
      [{ question: 42 }, '"question"'],
      [{ pending: { code: 1 } }, '"pending"'],
      [{ status: "finished" }, '"status"'],
    ] as const) {
      await expect(
        replay("t", from.checkpoint_id, { config: config(), persistence, update }),
      ).rejects.toMatchObject({
        code: "CODEHOP_CONFIG_INVALID",
        message: expect.stringMatching(new RegExp(`${named}.*Nothing was written`, "s")),
      });
    }
    expect((await history("t", { persistence })).length).toBe(before);
    expect((await persistence.threads.get("t"))?.status).toBe("done");
  });

  it("rejects an unknown checkpoint and an unknown thread with their codes", async () => {
    await expect(
      replay("t", "no-such-checkpoint", { config: config(), persistence }),
    ).rejects.toMatchObject({
      code: "CODEHOP_CHECKPOINT_NOT_FOUND",
    });
    await expect(history("no-such-thread", { persistence })).rejects.toMatchObject({
      code: "CODEHOP_THREAD_NOT_FOUND",
    });
  });
});

describe("thread ids", () => {
  it("refuses to resume or replay a thread another live process is running", async () => {
    const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 30000)"]);
    await new Promise((r) => child.once("spawn", r));
    persistence.db
      .prepare(
        "UPDATE codehop_threads SET status = 'running', pid = ?, pid_start = NULL WHERE thread_id = 't'",
      )
      .run(child.pid);
    try {
      await expect(resume("t", { config: config(), persistence })).rejects.toMatchObject({
        code: "CODEHOP_CONFIG_INVALID",
        message: expect.stringContaining(`is being run by process ${child.pid}`),
      });
    } finally {
      child.kill("SIGKILL");
      persistence.db
        .prepare("UPDATE codehop_threads SET status = 'done' WHERE thread_id = 't'")
        .run();
    }
  });

  it("refuses to start a second question on a thread that already holds a run", async () => {
    await expect(
      ask("Another question?", { threadId: "t", config: config(), persistence }),
    ).rejects.toMatchObject({
      code: "CODEHOP_CONFIG_INVALID",
      message: expect.stringContaining("codehop resume t"),
    });
  });
});
