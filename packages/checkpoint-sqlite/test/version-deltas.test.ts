/**
 * Checkpoint rows keep their version maps as the change from their parent (a whole copy again
 * after a few in a row): every checkpoint still reads back with its whole maps, through a saver
 * that has nothing cached, and rows that hold whole maps (earlier versions) read as before.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { crc32, inflateRawSync } from "node:zlib";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import Database from "better-sqlite3";
import { expect, it } from "vitest";
import { IncrementalSqliteSaver } from "../src/index.ts";

interface Row {
  ns_id: number;
  checkpoint_id: string;
  parent_checkpoint_id: string | null;
  checkpoint: Buffer;
  zip: number;
  metadata: string;
}

/**
 * Every record's JSON text, by checkpoint id, decoded as the format says: plain (`zip` 0),
 * deflated (1), or deflated with its nearest ancestors' records as the dictionary (2: their count,
 * the dictionary's CRC-32, then the data; the parent's record last in the dictionary).
 */
function records(rows: Row[]): Map<string, string> {
  const byId = new Map(rows.map((r) => [r.checkpoint_id, r]));
  const out = new Map<string, string>();
  const raw = (id: string): Buffer => {
    const r = byId.get(id)!;
    if (r.zip !== 2) return r.zip ? inflateRawSync(r.checkpoint) : r.checkpoint;
    const ancestors: Buffer[] = [];
    let parent = r.parent_checkpoint_id;
    for (let i = 0; i < r.checkpoint.readUInt8(0); i++) {
      ancestors.unshift(raw(parent!));
      parent = byId.get(parent!)!.parent_checkpoint_id;
    }
    const dictionary = Buffer.concat(ancestors);
    expect(crc32(dictionary)).toBe(r.checkpoint.readUInt32LE(1));
    return inflateRawSync(r.checkpoint.subarray(5), { dictionary });
  };
  for (const r of rows) out.set(r.checkpoint_id, String(raw(r.checkpoint_id)));
  return out;
}

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

/** A thread the counting graph ran to its end on a new file, and its checkpoints as listed. */
async function countedThread() {
  const path = join(mkdtempSync(join(tmpdir(), "codehop-lgi-versions-")), "c.db");
  const saver = IncrementalSqliteSaver.fromConnString(path);
  const cfg = { configurable: { thread_id: "t" }, recursionLimit: 200 };
  await countingGraph(saver).invoke({}, cfg);
  const seen = [];
  for await (const t of saver.list(cfg)) seen.push(t);
  return { path, saver, cfg, seen };
}

it("stores version maps as changes, and reads every checkpoint back whole", async () => {
  const { path, saver, cfg, seen } = await countedThread();
  saver.db.close();

  const fresh = IncrementalSqliteSaver.fromConnString(path);
  const rows = fresh.db.prepare("SELECT * FROM lgi_checkpoints").all() as Row[];
  const stored = [...records(rows).values()].map((text) => JSON.parse(text));
  // A delta record is deflated with the records before it as its dictionary; the metadata is in
  // the record (the column holds '').
  expect(rows.filter((r) => r.zip === 2).length).toBeGreaterThan(rows.length / 2);
  expect(rows.every((r) => r.metadata === "")).toBe(true);
  expect(stored.map((c) => c.m)).toEqual(expect.arrayContaining(seen.map((t) => t.metadata)));
  // `base` 1: the change from the row's parent (the parent's id is in the row already).
  const deltas = stored.filter((c) => c.base === 1);
  // Most rows are changes; whole copies come back at least every 9th row.
  expect(deltas.length).toBeGreaterThan(stored.length / 2);
  expect(stored.length - deltas.length).toBeGreaterThanOrEqual(Math.floor(stored.length / 9));
  expect(stored.every((c) => c.id === undefined)).toBe(true); // the id is the row's key

  const again = [];
  for await (const t of fresh.list(cfg)) again.push(t);
  expect(again.map((t) => t.checkpoint)).toEqual(seen.map((t) => t.checkpoint));
  expect(again.map((t) => t.metadata)).toEqual(seen.map((t) => t.metadata));
  // Filters on metadata in the record, with a limit applied to the rows that match.
  const steps = [];
  for await (const t of fresh.list(cfg, { filter: { source: "loop" }, limit: 3 }))
    steps.push(t.metadata?.step);
  expect(steps).toEqual(
    seen
      .filter((t) => t.metadata?.source === "loop")
      .slice(0, 3)
      .map((t) => t.metadata?.step),
  );
  const one = [];
  for await (const t of fresh.list(cfg, { filter: { step: 7, source: "loop" } })) one.push(t);
  expect(one.map((t) => t.checkpoint.id)).toEqual(
    seen.filter((t) => t.metadata?.step === 7).map((t) => t.checkpoint.id),
  );
  // The latest state through a graph on the fresh saver: the values of whole maps.
  const state = await countingGraph(fresh).getState(cfg);
  expect(state.values).toEqual({ n: 30, note: "at 30" });
  fresh.db.close();

  // Rows of an earlier version name their base by id, are deflated on their own and keep their
  // metadata as JSON text: they read the same, and filter the same.
  const db = new Database(path);
  const all = db.prepare("SELECT * FROM lgi_checkpoints").all() as Row[];
  const texts = records(all);
  const rewrite = db.prepare(
    "UPDATE lgi_checkpoints SET checkpoint = ?, zip = 0, metadata = ? WHERE ns_id = ? AND checkpoint_id = ?",
  );
  let rewritten = 0;
  for (const r of all) {
    const { m, ...record } = JSON.parse(texts.get(r.checkpoint_id)!);
    if (record.base === 1) {
      record.base = r.parent_checkpoint_id;
      rewritten++;
    }
    rewrite.run(Buffer.from(JSON.stringify(record)), JSON.stringify(m), r.ns_id, r.checkpoint_id);
  }
  db.close();
  expect(rewritten).toBe(deltas.length);
  const older = IncrementalSqliteSaver.fromConnString(path);
  const fromOlder = [];
  for await (const t of older.list(cfg)) fromOlder.push(t);
  expect(fromOlder.map((t) => t.checkpoint)).toEqual(seen.map((t) => t.checkpoint));
  expect(fromOlder.map((t) => t.metadata)).toEqual(seen.map((t) => t.metadata));
  const olderOne = [];
  for await (const t of older.list(cfg, { filter: { step: 7, source: "loop" } })) olderOne.push(t);
  expect(olderOne.map((t) => t.checkpoint.id)).toEqual(one.map((t) => t.checkpoint.id));
  older.db.close();
});

it("a checkpoint stored again leaves the records deflated against it readable", async () => {
  const { path, saver, cfg, seen } = await countedThread();
  // The oldest checkpoint the next three are deflated against, put again with other metadata.
  const rows = saver.db
    .prepare("SELECT * FROM lgi_checkpoints ORDER BY checkpoint_id")
    .all() as Row[];
  const target = rows.find((r) =>
    rows.some((c) => c.parent_checkpoint_id === r.checkpoint_id && c.zip === 2),
  )!;
  const tuple = seen.find((t) => t.checkpoint.id === target.checkpoint_id)!;
  await saver.put(
    tuple.parentConfig ?? { configurable: { thread_id: "t", checkpoint_ns: "" } },
    tuple.checkpoint,
    { ...tuple.metadata!, note: "again" } as any,
    tuple.checkpoint.channel_versions,
  );
  saver.db.close();

  const fresh = IncrementalSqliteSaver.fromConnString(path);
  const again = [];
  for await (const t of fresh.list(cfg)) again.push(t);
  expect(again.map((t) => t.checkpoint)).toEqual(seen.map((t) => t.checkpoint));
  expect(again.find((t) => t.checkpoint.id === target.checkpoint_id)?.metadata).toMatchObject({
    note: "again",
  });
  fresh.db.close();
});
