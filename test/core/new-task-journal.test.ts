import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BaseMessage } from "@langchain/core/messages";
import Database from "better-sqlite3";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { taskEpochTag } from "../../src/core/journal.ts";
import { ScriptedChatModel } from "../../src/testing/scripted-chat-model.ts";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import { createCodeAgent } from "../../src/framework/code-agent.ts";
import {
  openPersistence,
  type SqlitePersistence as Persistence,
} from "../../src/persistence/index.ts";
import { SqliteCallJournal } from "../../src/persistence/sqlite-journal.ts";
import { createSandbox } from "../../src/sandbox/index.ts";
import { defineTool } from "../../src/tools/define-tool.ts";

// Two tasks on one thread of a two-level agent (manager -> lookup agent -> read tool), with SQLite
// checkpoints and the SQLite call journal: the second task restarts its step numbers at 1, so its
// calls sit at the same (namespace, step, call index) as the first task's. They must run for real,
// and both tasks' recorded calls must stay available (a replay of task 1 is served task 1's calls).
const sandbox = createSandbox();
afterAll(() => sandbox.close());
const opened: Persistence[] = [];
afterEach(() => {
  for (const p of opened.splice(0)) p.close();
});

const action = (code: string) => `Thought: go\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;
const userText = (m: BaseMessage[]) => String(m[1].content);

/**
 * Manager asks the lookup agent about each item named in its task ("task: price+stock"), one call
 * after the other in one action. The lookup agent's model endpoint is down for the items `down`
 * names.
 */
function build(
  options: { home?: string; down?: (item: string) => boolean; reads?: string[] } = {},
) {
  const home = options.home ?? mkdtempSync(join(tmpdir(), "codehop-new-task-"));
  const persistence = openPersistence(home);
  opened.push(persistence);
  const reads = options.reads ?? [];
  const read = defineTool({
    name: "read",
    description: "Reads the current value of an item.",
    parameters: z.object({ item: z.string() }),
    returns: "string",
    invoke: async ({ item }, ctx) => {
      reads.push(item);
      ctx.report?.({ sources: [{ item, read: reads.length }] });
      return `${item} #${reads.length}`;
    },
  });
  const lookupModel = new ScriptedChatModel([
    (m) => {
      const item = /item (\w+)/.exec(userText(m))![1];
      if (options.down?.(item)) throw new Error("connect ECONNREFUSED 127.0.0.1:8000");
      return action(`final_answer(await read(${JSON.stringify(item)}))`);
    },
  ]);
  const lookup = createCodeAgent({
    name: "lookup",
    description: "looks an item up",
    tools: [read],
    sandbox,
    model: lookupModel,
  });
  const managerModel = new ScriptedChatModel([
    (m) => {
      const items = /task: ([\w+]+)/.exec(userText(m))![1].split("+");
      const calls = items.map((item, i) => `const a${i} = await lookup_agent("item ${item}");`);
      return action(
        `${calls.join("\n")}\nfinal_answer([${items.map((_, i) => `a${i}`)}].join(","))`,
      );
    },
  ]);
  const manager = createCodeAgent({
    name: "manager",
    description: "answers",
    sandbox,
    model: managerModel,
    tools: [
      lookup.asTool({
        name: "lookup_agent",
        description: "Looks an item up.",
        parameters: z.object({ task: z.string() }),
        toInput: ({ task }) => ({ task }),
        wrapTask: false,
      }),
    ],
  });
  const graph = manager.builder.compile({ checkpointer: persistence.checkpointer });
  const config = (threadId: string, extra: Record<string, unknown> = {}) => ({
    recursionLimit: manager.recursionLimit,
    configurable: { thread_id: threadId, journal: persistence.journal, ...extra },
  });
  return { home, persistence, graph, config, reads, lookupModel, managerModel };
}

/** Ids of the checkpoints where each task of the thread is about to run its first action, in task order. */
async function beforeFirstActions(
  graph: ReturnType<typeof build>["graph"],
  config: ReturnType<ReturnType<typeof build>["config"]>,
): Promise<string[]> {
  const found: string[] = [];
  for await (const snap of graph.getStateHistory(config)) {
    if (snap.next.includes("act") && snap.values.stepCount === 0)
      found.push(snap.config.configurable?.checkpoint_id as string);
  }
  return found.reverse(); // history is newest first
}

describe("a new task on a finished thread and the call journal", () => {
  it("runs the same first sub-agent call again for the second task (not served task 1's result)", async () => {
    const { graph, config, reads, lookupModel, persistence } = build();
    const first = await graph.invoke({ task: "task: price" }, config("same-args"));
    expect(first).toMatchObject({ answer: "price #1", status: "final_answer" });
    expect(first.sources).toEqual([{ item: "price", read: 1 }]);

    const second = await graph.invoke({ task: "task: price" }, config("same-args"));
    // The sub-agent and its tool ran again: a fresh value, fresh sources and usage.
    expect(reads).toEqual(["price", "price"]);
    expect(lookupModel.calls).toHaveLength(2);
    expect(second).toMatchObject({ answer: "price #2", status: "final_answer", stepCount: 1 });
    expect(second.sources).toEqual([{ item: "price", read: 2 }]);
    expect(second.usage.lookup.calls).toBe(1);
    expect(second.usage.manager.calls).toBe(1);
    expect(second.steps[0].toolCalls.map((c: { fromJournal: boolean }) => c.fromJournal)).toEqual([
      false,
    ]);
    // Replaying task 1 (same position, same arguments as task 2's call) is served task 1's result.
    const [task1] = await beforeFirstActions(graph, config("same-args"));
    const replayed = await graph.invoke(
      null,
      config("same-args", { checkpoint_id: task1, journal: persistence.journal.forReplay() }),
    );
    expect(replayed).toMatchObject({ answer: "price #1", task: "task: price" });
    expect(replayed.sources).toEqual([{ item: "price", read: 1 }]);
    expect(reads).toHaveLength(2);

    // Both tasks' calls are recorded, at both levels, under their task epochs.
    const calls = (await persistence.journal.entries("same-args")).map((e) => [
      e.tool,
      e.taskEpochs,
      (e.outcome as { value: unknown }).value,
    ]);
    expect(calls).toEqual([
      ["read", [], "price #1"],
      ["lookup_agent", [], "price #1"],
      ["read", [1], "price #2"],
      ["lookup_agent", [1], "price #2"],
    ]);
  });

  it("starts the second task's sub-agent fresh, in its own namespace", async () => {
    const { graph, config, lookupModel, persistence } = build();
    await graph.invoke({ task: "task: price" }, config("fresh-child"));
    const second = await graph.invoke({ task: "task: stock" }, config("fresh-child"));
    expect(second.answer).toBe("stock #2");
    // The child's prompt holds only its own task: system + task, no trace of the first run.
    expect(lookupModel.calls[1].messages).toHaveLength(2);
    expect(userText(lookupModel.calls[1].messages)).toContain("item stock");
    const namespaces = new Set<string>();
    for await (const t of persistence.checkpointer.list({
      configurable: { thread_id: "fresh-child" },
    }))
      if (t.config.configurable?.checkpoint_ns) namespaces.add(t.config.configurable.checkpoint_ns);
    expect(namespaces.size).toBe(2);
    // Each child run is a first task of its namespace.
    const state = await graph.getState(config("fresh-child"), { subgraphs: false });
    expect(state.values.taskEpoch ?? "no epoch").toBe(1);
  });

  it("keeps task 1's recorded call when task 2 makes a different one, and a replay of task 1 is served it", async () => {
    const { graph, config, reads, lookupModel, persistence } = build();
    await graph.invoke({ task: "task: price" }, config("diff-args"));
    const second = await graph.invoke({ task: "task: stock" }, config("diff-args"));
    expect(second.answer).toBe("stock #2");
    expect(reads).toEqual(["price", "stock"]);
    const rootCalls = (await persistence.journal.entries("diff-args"))
      .filter((e) => e.tool === "lookup_agent")
      .map((e) => e.argsJson);
    expect(rootCalls).toEqual(['{"task":"item price"}', '{"task":"item stock"}']);

    // Time travel: replay task 1 from the checkpoint before its action.
    const [before, before2] = await beforeFirstActions(graph, config("diff-args"));
    expect(before2).toBeDefined();
    const modelCalls = lookupModel.calls.length;
    const replayed = await graph.invoke(
      null,
      config("diff-args", { checkpoint_id: before, journal: persistence.journal.forReplay() }),
    );
    expect(replayed).toMatchObject({ answer: "price #1", task: "task: price" });
    expect(reads).toEqual(["price", "stock"]);
    expect(lookupModel.calls).toHaveLength(modelCalls);
    expect(replayed.steps[0].toolCalls[0].fromJournal).toBe(true);

    // And a replay of task 2 is served task 2's call.
    const replayed2 = await graph.invoke(
      null,
      config("diff-args", { checkpoint_id: before2, journal: persistence.journal.forReplay() }),
    );
    expect(replayed2).toMatchObject({ answer: "stock #2", task: "task: stock" });
    expect(reads).toEqual(["price", "stock"]);
  });
});

describe("a crash during the second task", () => {
  it("resumes the second task with its own finished calls served, not the first task's", async () => {
    let down = true;
    const { graph, config, reads, lookupModel } = build({
      down: (item) => down && item === "stock",
    });
    await graph.invoke({ task: "task: price" }, config("crash-2"));
    const err = await graph
      .invoke({ task: "task: price+stock" }, config("crash-2"))
      .catch((e) => e);
    expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.MODEL_ENDPOINT_FAILED);
    // Task 2 read "price" for real (task 1's record at the same position was not served).
    expect(reads).toEqual(["price", "price"]);
    down = false;
    const modelCalls = lookupModel.calls.length;
    const out = await graph.invoke(null, config("crash-2"));
    expect(out).toMatchObject({ answer: "price #2,stock #3", taskEpoch: 1, stepCount: 1 });
    expect(reads).toEqual(["price", "price", "stock"]);
    // Only the "stock" sub-agent ran on resume; the finished call came from task 2's record.
    expect(lookupModel.calls).toHaveLength(modelCalls + 1);
    expect(out.steps[0].toolCalls.map((c: { fromJournal: boolean }) => c.fromJournal)).toEqual([
      true,
      false,
    ]);
  });
});

describe("task epochs in nested journal keys", () => {
  it("a replay of task 1 whose sub-agent call was never recorded serves the sub-agent's own task-1 calls", async () => {
    const { graph, config, reads, lookupModel, persistence } = build();
    await graph.invoke({ task: "task: price" }, config("nested"));
    await graph.invoke({ task: "task: price" }, config("nested"));
    expect(reads).toEqual(["price", "price"]);
    // As if the process had died right after the sub-agent finished, before the manager recorded
    // the call: the sub-agent runs again on replay, and its read() is served by position.
    persistence.db.prepare("DELETE FROM codehop_call_journal WHERE tool = 'lookup_agent'").run();
    const [task1, task2] = await beforeFirstActions(graph, config("nested"));
    const modelCalls = lookupModel.calls.length;
    const replay = (checkpoint: string) =>
      graph.invoke(
        null,
        config("nested", { checkpoint_id: checkpoint, journal: persistence.journal.forReplay() }),
      );
    expect((await replay(task1)).answer).toBe("price #1");
    expect((await replay(task2)).answer).toBe("price #2");
    expect(lookupModel.calls).toHaveLength(modelCalls + 2);
    expect(reads).toHaveLength(2);
  });
});

/** The journal table as the code before task epochs created it, holding the first-task rows. */
function downgradeJournal(db: Persistence["db"]): void {
  db.exec(`
CREATE TABLE old_journal (
  thread_id TEXT NOT NULL,
  checkpoint_ns TEXT NOT NULL,
  step INTEGER NOT NULL,
  call_index INTEGER NOT NULL,
  tool TEXT NOT NULL,
  args_json TEXT NOT NULL,
  outcome_json TEXT NOT NULL,
  recorded_at TEXT NOT NULL,
  PRIMARY KEY (thread_id, checkpoint_ns, step, call_index)
);
INSERT INTO old_journal SELECT thread_id, checkpoint_ns, step, call_index, tool, args_json,
  outcome_json, recorded_at FROM codehop_call_journal WHERE task_epoch = '';
DROP TABLE codehop_call_journal;
ALTER TABLE old_journal RENAME TO codehop_call_journal;`);
}

describe("a journal written before task epochs", () => {
  it("opens, upgrades in place and serves its calls to a resumed run", async () => {
    let down = true;
    const first = build({ down: (item) => down && item === "stock" });
    const err = await first.graph
      .invoke({ task: "task: price+stock" }, first.config("old-db"))
      .catch((e) => e);
    expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.MODEL_ENDPOINT_FAILED);
    expect(first.reads).toEqual(["price"]);
    downgradeJournal(first.persistence.db);
    first.persistence.close();

    // Reopened by the current code: the rows move to the new table under the first task's epoch.
    down = false;
    const resumed = build({ home: first.home, reads: first.reads });
    const columns = resumed.persistence.db
      .prepare("PRAGMA table_info(codehop_call_journal)")
      .all()
      .map((c) => (c as { name: string }).name);
    expect(columns).toContain("task_epoch");
    expect(
      (await resumed.persistence.journal.entries("old-db")).map((e) => [e.tool, e.taskEpochs]),
    ).toEqual([
      ["read", []],
      ["lookup_agent", []],
    ]);
    const out = await resumed.graph.invoke(null, resumed.config("old-db"));
    // The finished call was served from the upgraded journal: "price" was read once.
    expect(out.answer).toBe("price #1,stock #2");
    expect(first.reads).toEqual(["price", "stock"]);
    expect(out.steps[0].toolCalls.map((c: { fromJournal: boolean }) => c.fromJournal)).toEqual([
      true,
      false,
    ]);
    // A second open finds the table current and leaves the rows alone.
    const again = openPersistence(first.home);
    opened.push(again);
    expect(await again.journal.entries("old-db")).toHaveLength(4);
  });

  it("fails with DB_INVALID naming the file when the old table cannot be upgraded", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-new-task-"));
    const p = openPersistence(home);
    downgradeJournal(p.db);
    p.close();
    const readOnly = new Database(join(home, "checkpoints.db"), { readonly: true });
    try {
      const err = (() => {
        try {
          new SqliteCallJournal(readOnly);
        } catch (e) {
          return e;
        }
      })();
      expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.DB_INVALID);
      expect((err as Error).message).toContain(join(home, "checkpoints.db"));
    } finally {
      readOnly.close();
    }
    // Untouched: a writable open upgrades it.
    const again = openPersistence(home);
    opened.push(again);
    expect(await again.journal.entries("none")).toEqual([]);
  });

  it("keeps the first task's row when a later task records the same position", async () => {
    const p = openPersistence(mkdtempSync(join(tmpdir(), "codehop-new-task-")));
    opened.push(p);
    const key = {
      threadId: "t",
      checkpointNs: "act:1f|act:2e",
      step: 1,
      callIndex: 0,
      tool: "read",
      argsJson: '{"item":"price"}',
    };
    await p.journal.put(key, { ok: true, value: "task 1" });
    await p.journal.put({ ...key, taskEpochs: [1, 0] }, { ok: true, value: "task 2" });
    // No epochs and all-zero epochs are the first task; trailing zeros don't count.
    expect(await p.journal.get({ ...key, taskEpochs: [0, 0] })).toEqual({
      ok: true,
      value: "task 1",
    });
    expect(await p.journal.get({ ...key, taskEpochs: [1] })).toEqual({ ok: true, value: "task 2" });
    expect(await p.journal.get({ ...key, taskEpochs: [0, 1] })).toBeUndefined();
    // The replay form (task ids stripped) keeps both as well.
    const forked = { ...key, checkpointNs: "act:9a|act:8b" };
    expect(await p.journal.forReplay().get(forked)).toEqual({ ok: true, value: "task 1" });
    expect(await p.journal.forReplay().get({ ...forked, taskEpochs: [1] })).toEqual({
      ok: true,
      value: "task 2",
    });
    expect(taskEpochTag([1, 0, 2, 0, 0])).toBe("1.0.2");
    expect(taskEpochTag(undefined)).toBe("");
  });
});
