/**
 * Checkpoint rows keep their version maps as the change from their parent (a whole copy again
 * after a few in a row): every checkpoint still reads back with its whole maps, through a saver
 * that has nothing cached, and rows that hold whole maps (earlier versions) read as before.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inflateRawSync } from "node:zlib";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import Database from "better-sqlite3";
import { expect, it } from "vitest";
import { IncrementalSqliteSaver } from "../../src/checkpoint-sqlite/index.ts";

function countingGraph(checkpointer: IncrementalSqliteSaver) {
  const State = Annotation.Root({
    n: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
    note: Annotation<string>({ reducer: (_a, b) => b, default: () => "" }),
  });
  return new StateGraph(State)
    .addNode("count", (s) => ({ n: s.n + 1 }))
    .addNode("label", (s) => ({ note: `at ${s.n}` }))
    .addEdge(START, "count")
    .addEdge("count", "label")
    .addConditionalEdges("label", (s) => (s.n >= 30 ? END : "count"))
    .compile({ checkpointer });
}

it("stores version maps as changes, and reads every checkpoint back whole", async () => {
  const path = join(mkdtempSync(join(tmpdir(), "codehop-lgi-versions-")), "c.db");
  const saver = IncrementalSqliteSaver.fromConnString(path);
  const cfg = { configurable: { thread_id: "t" }, recursionLimit: 200 };
  await countingGraph(saver).invoke({}, cfg);
  const seen = [];
  for await (const t of saver.list(cfg)) seen.push(t);
  saver.db.close();

  const fresh = IncrementalSqliteSaver.fromConnString(path);
  const rows = fresh.db.prepare("SELECT checkpoint, zip FROM lgi_checkpoints").all() as Array<{
    checkpoint: Buffer;
    zip: number;
  }>;
  const stored = rows.map((r) =>
    JSON.parse(String(r.zip ? inflateRawSync(r.checkpoint) : r.checkpoint)),
  );
  // `base` 1: the change from the row's parent (the parent's id is in the row already).
  const deltas = stored.filter((c) => c.base === 1);
  // Most rows are changes; whole copies come back at least every 9th row.
  expect(deltas.length).toBeGreaterThan(stored.length / 2);
  expect(stored.length - deltas.length).toBeGreaterThanOrEqual(Math.floor(stored.length / 9));
  expect(stored.every((c) => c.id === undefined)).toBe(true); // the id is the row's key

  const again = [];
  for await (const t of fresh.list(cfg)) again.push(t);
  expect(again.map((t) => t.checkpoint)).toEqual(seen.map((t) => t.checkpoint));
  // The latest state through a graph on the fresh saver: the values of whole maps.
  const state = await countingGraph(fresh).getState(cfg);
  expect(state.values).toEqual({ n: 30, note: "at 30" });
  fresh.db.close();

  // Rows of an earlier version name their base by id: they read the same.
  const db = new Database(path);
  const all = db
    .prepare(
      "SELECT ns_id, checkpoint_id, parent_checkpoint_id, checkpoint, zip FROM lgi_checkpoints",
    )
    .all() as Array<{
    ns_id: number;
    checkpoint_id: string;
    parent_checkpoint_id: string | null;
    checkpoint: Buffer;
    zip: number;
  }>;
  const rewrite = db.prepare(
    "UPDATE lgi_checkpoints SET checkpoint = ?, zip = 0 WHERE ns_id = ? AND checkpoint_id = ?",
  );
  let rewritten = 0;
  for (const r of all) {
    const record = JSON.parse(String(r.zip ? inflateRawSync(r.checkpoint) : r.checkpoint));
    if (record.base !== 1) continue;
    record.base = r.parent_checkpoint_id;
    rewrite.run(Buffer.from(JSON.stringify(record)), r.ns_id, r.checkpoint_id);
    rewritten++;
  }
  db.close();
  expect(rewritten).toBe(deltas.length);
  const older = IncrementalSqliteSaver.fromConnString(path);
  const fromOlder = [];
  for await (const t of older.list(cfg)) fromOlder.push(t);
  expect(fromOlder.map((t) => t.checkpoint)).toEqual(seen.map((t) => t.checkpoint));
  older.db.close();
});
