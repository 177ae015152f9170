/**
 * The call journal stores a call's outcome once: the copy a replay fork looks up (the namespace
 * without task ids) refers to the exact row. Rows written before, which hold the outcome in both
 * copies, are still served.
 */
import { expect, it } from "vitest";
import {
  createCallJournal,
  type CallKey,
  type JournalRow,
  type JournalRowKey,
  type JournalRowStore,
} from "../../src/core/journal.ts";

/** Rows in a Map (the adapters' own tests cover SQLite and Postgres storage). */
function memoryRows(): JournalRowStore & { rows: Map<string, JournalRow> } {
  const id = (k: JournalRowKey) =>
    JSON.stringify([k.threadId, k.checkpointNs, k.taskEpoch, k.step, k.callIndex]);
  const rows = new Map<string, JournalRow>();
  return {
    rows,
    getRow: (k) => rows.get(id(k)),
    putRows: (list) => {
      for (const r of list) rows.set(id(r), r);
    },
    listRows: (threadId) => [...rows.values()].filter((r) => r.threadId === threadId),
    deleteThread: (threadId) => {
      for (const [k, r] of rows) if (r.threadId === threadId) rows.delete(k);
    },
  };
}

const key = (checkpointNs: string): CallKey => ({
  threadId: "t",
  checkpointNs,
  taskEpochs: [0],
  step: 1,
  callIndex: 0,
  tool: "search",
  argsJson: '{"q":"paris"}',
});

it("keeps the outcome in the exact row only; a replay fork is served it through the copy", async () => {
  const rows = memoryRows();
  const journal = createCallJournal(rows);
  const outcome = { ok: true as const, value: { hits: ["Paris", "Paris, Texas"] } };
  await journal.put(key("act:aaa|act:bbb"), outcome);
  const stored = [...rows.rows.values()];
  expect(stored).toHaveLength(2);
  const copy = stored.find((r) => r.checkpointNs.startsWith("~"))!;
  expect(copy.checkpointNs).toBe("~act|act");
  expect(copy.outcomeJson).not.toContain("Paris");
  // A resume (same task ids) and a replay fork (new task ids) are both served the outcome.
  expect(await journal.get(key("act:aaa|act:bbb"))).toEqual(outcome);
  expect(await journal.get(key("act:ccc|act:ddd"))).toBeUndefined(); // a plain run: exact only
  expect(await journal.forReplay().get(key("act:ccc|act:ddd"))).toEqual(outcome);
  // Other arguments at that position are not served.
  expect(
    await journal.forReplay().get({ ...key("act:ccc|act:ddd"), argsJson: '{"q":"rome"}' }),
  ).toBeUndefined();
  expect((await journal.entries("t")).map((e) => e.outcome)).toEqual([outcome]);
});

it("serves replay copies written by earlier versions, which hold the outcome themselves", async () => {
  const rows = memoryRows();
  const outcome = { ok: false as const, error: "no page" };
  rows.putRows([
    {
      threadId: "t",
      checkpointNs: "~act|act",
      taskEpoch: "",
      step: 1,
      callIndex: 0,
      tool: "search",
      argsJson: '{"q":"paris"}',
      outcomeJson: JSON.stringify(outcome),
      recordedAt: new Date(0).toISOString(),
    },
  ]);
  const journal = createCallJournal(rows, { matchAcrossForks: true });
  expect(await journal.get(key("act:eee|act:fff"))).toEqual(outcome);
});
