/**
 * Checkpoint rows keep each record whole, most deflated against a keyframe (an earlier record of
 * their lineage stored alone): every checkpoint reads back through a saver that has nothing
 * cached, from its row and its keyframe's, and rows of earlier versions — version maps stored as
 * the change from the parent, deflated with the ancestors' records — read as before.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { crc32, deflateRawSync, inflateRawSync } from "node:zlib";
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
 * deflated (1), deflated with its nearest ancestors' records as the dictionary (2, earlier
 * versions: their count, the dictionary's CRC-32, then the data; the parent's record last), or
 * deflated with its keyframe's record as the dictionary (3: how many generations back, the
 * keyframe's id with its length, its record's CRC-32, then the data).
 */
function records(rows: Row[]): Map<string, string> {
  const byId = new Map(rows.map((r) => [r.checkpoint_id, r]));
  const out = new Map<string, string>();
  const raw = (id: string): Buffer => {
    const r = byId.get(id)!;
    if (r.zip === 0 || r.zip === 1) return r.zip ? inflateRawSync(r.checkpoint) : r.checkpoint;
    if (r.zip === 3) {
      const length = r.checkpoint.readUInt8(1);
      const keyframe = byId.get(r.checkpoint.toString("utf8", 2, 2 + length))!;
      expect([0, 1]).toContain(keyframe.zip);
      const dictionary = raw(keyframe.checkpoint_id);
      expect(crc32(dictionary)).toBe(r.checkpoint.readUInt32LE(2 + length));
      return inflateRawSync(r.checkpoint.subarray(6 + length), { dictionary });
    }
    expect(r.zip).toBe(2);
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

/** The change from `before` to `after` of a version map: the entries that are new or differ. */
function changed(before: Record<string, unknown>, after: Record<string, unknown>) {
  return Object.fromEntries(Object.entries(after).filter(([k, v]) => before[k] !== v));
}

/**
 * Rewrites the rows of a linear thread as the saver of earlier versions stored them: every 9th
 * record whole (deflated alone), the others their version maps as the change from the parent's
 * (`base` 1, `cv`, `vs`), deflated with up to 3 ancestors' records (never past the whole one) as
 * the dictionary. Returns how many rows became changes.
 */
function toDeltaRows(db: Database.Database): number {
  const rows = db.prepare("SELECT * FROM lgi_checkpoints ORDER BY checkpoint_id").all() as Row[];
  const texts = records(rows);
  const whole = new Map(
    rows.map((r) => [r.checkpoint_id, JSON.parse(texts.get(r.checkpoint_id)!)]),
  );
  const stored = new Map<string, { raw: Buffer; chain: number }>();
  const rewrite = db.prepare(
    "UPDATE lgi_checkpoints SET checkpoint = ?, zip = ? WHERE ns_id = ? AND checkpoint_id = ?",
  );
  let deltas = 0;
  for (const r of rows) {
    const record = whole.get(r.checkpoint_id);
    const parent = r.parent_checkpoint_id ? whole.get(r.parent_checkpoint_id) : undefined;
    const chain = parent ? stored.get(r.parent_checkpoint_id!)!.chain + 1 : 0;
    if (!parent || chain > 8) {
      const raw = Buffer.from(JSON.stringify(record));
      stored.set(r.checkpoint_id, { raw, chain: 0 });
      rewrite.run(deflateRawSync(raw), 1, r.ns_id, r.checkpoint_id);
      continue;
    }
    const { channel_versions: cv, versions_seen: seen, iv, ...rest } = record;
    const vs = Object.fromEntries(
      Object.entries(seen as Record<string, Record<string, unknown>>)
        .map(([node, s]) => [node, changed(parent.versions_seen[node] ?? {}, s)] as const)
        .filter(([node, c]) => Object.keys(c).length || !parent.versions_seen[node]),
    );
    const added = Object.fromEntries(
      Object.entries((iv ?? {}) as Record<string, unknown>).filter(
        ([k, v]) => JSON.stringify(parent.iv?.[k]) !== JSON.stringify(v),
      ),
    );
    const delta = {
      ...rest,
      base: 1,
      cv: changed(parent.channel_versions, cv),
      vs,
      ...(Object.keys(added).length ? { iv: added } : {}),
    };
    const raw = Buffer.from(JSON.stringify(delta));
    const ancestors: Buffer[] = [];
    for (let id = r.parent_checkpoint_id; id && ancestors.length < Math.min(3, chain);) {
      ancestors.unshift(stored.get(id)!.raw);
      id = rows.find((x) => x.checkpoint_id === id)!.parent_checkpoint_id;
    }
    const dictionary = Buffer.concat(ancestors);
    const head = Buffer.alloc(5);
    head.writeUInt8(ancestors.length, 0);
    head.writeUInt32LE(crc32(dictionary), 1);
    stored.set(r.checkpoint_id, { raw, chain });
    rewrite.run(
      Buffer.concat([head, deflateRawSync(raw, { dictionary })]),
      2,
      r.ns_id,
      r.checkpoint_id,
    );
    deltas++;
  }
  return deltas;
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

it("stores each record whole against a keyframe, and reads every checkpoint back whole", async () => {
  const { path, saver, cfg, seen } = await countedThread();
  saver.db.close();

  const fresh = IncrementalSqliteSaver.fromConnString(path);
  const rows = fresh.db.prepare("SELECT * FROM lgi_checkpoints").all() as Row[];
  const stored = [...records(rows).values()].map((text) => JSON.parse(text));
  // Most records are deflated against a keyframe (a row stored alone at most 16 generations
  // back); the metadata is in the record (the column holds '').
  const onKeyframe = rows.filter((r) => r.zip === 3);
  expect(onKeyframe.length).toBeGreaterThan(rows.length / 2);
  expect(rows.length - onKeyframe.length).toBeGreaterThanOrEqual(Math.floor(rows.length / 17));
  for (const r of onKeyframe) expect(r.checkpoint.readUInt8(0)).toBeLessThanOrEqual(16);
  expect(rows.every((r) => r.metadata === "")).toBe(true);
  expect(stored.map((c) => c.m)).toEqual(expect.arrayContaining(seen.map((t) => t.metadata)));
  // Whole version maps in every record; the id is the row's key.
  expect(stored.every((c) => c.base === undefined && c.channel_versions && c.versions_seen)).toBe(
    true,
  );
  expect(stored.every((c) => c.id === undefined)).toBe(true);

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

  // Rows of earlier versions: version maps as the change from the parent's, deflated with the
  // ancestors' records; they read the same.
  const db = new Database(path);
  const deltas = toDeltaRows(db);
  db.close();
  expect(deltas).toBeGreaterThan(seen.length / 2);
  const deltaSaver = IncrementalSqliteSaver.fromConnString(path);
  const fromDeltas = [];
  for await (const t of deltaSaver.list(cfg)) fromDeltas.push(t);
  expect(fromDeltas.map((t) => t.checkpoint)).toEqual(seen.map((t) => t.checkpoint));
  expect(fromDeltas.map((t) => t.metadata)).toEqual(seen.map((t) => t.metadata));
  expect((await deltaSaver.getTuple(cfg))?.checkpoint).toEqual(seen[0]!.checkpoint);
  // A thread continued on them: its new rows are stored against keyframes of their own.
  await countingGraph(deltaSaver).invoke({ n: 0 }, cfg);
  const continued = [];
  for await (const t of deltaSaver.list(cfg)) continued.push(t);
  expect(continued.slice(-seen.length).map((t) => t.checkpoint)).toEqual(
    seen.map((t) => t.checkpoint),
  );
  deltaSaver.db.close();
  const reread = IncrementalSqliteSaver.fromConnString(path);
  const again2 = [];
  for await (const t of reread.list(cfg)) again2.push(t);
  expect(again2.map((t) => t.checkpoint)).toEqual(continued.map((t) => t.checkpoint));
  reread.db.close();

  // Rows of a version before that name their base by id, are deflated on their own and keep
  // their metadata as JSON text: they read the same, and filter the same.
  const db2 = new Database(path);
  const all = (db2.prepare("SELECT * FROM lgi_checkpoints").all() as Row[]).filter((r) =>
    seen.some((t) => t.checkpoint.id === r.checkpoint_id),
  );
  const texts = records(db2.prepare("SELECT * FROM lgi_checkpoints").all() as Row[]);
  const rewrite = db2.prepare(
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
  db2.close();
  expect(rewritten).toBe(deltas);
  const older = IncrementalSqliteSaver.fromConnString(path);
  const fromOlder = [];
  for await (const t of older.list(cfg)) fromOlder.push(t);
  expect(fromOlder.slice(-seen.length).map((t) => t.checkpoint)).toEqual(
    seen.map((t) => t.checkpoint),
  );
  expect(fromOlder.slice(-seen.length).map((t) => t.metadata)).toEqual(seen.map((t) => t.metadata));
  const olderOne = [];
  for await (const t of older.list(cfg, { filter: { step: 7, source: "loop" } })) olderOne.push(t);
  expect(olderOne.map((t) => t.checkpoint.id)).toContain(one[0]!.checkpoint.id);
  older.db.close();
});

it.each([
  ["a keyframe", false],
  ["a record of earlier versions' rows", true],
])(
  "a checkpoint stored again leaves the records deflated against it readable (%s)",
  async (_name, deltaRows) => {
    const { path, saver, cfg, seen } = await countedThread();
    saver.db.close();
    if (deltaRows) {
      const db = new Database(path);
      toDeltaRows(db);
      db.close();
    }
    const again = IncrementalSqliteSaver.fromConnString(path);
    // A checkpoint others are deflated against (as their keyframe, or as the oldest of their
    // ancestors), put again with other metadata.
    const rows = again.db
      .prepare("SELECT * FROM lgi_checkpoints ORDER BY checkpoint_id")
      .all() as Row[];
    const dependsOn = (c: Row, id: string) =>
      c.zip === 3
        ? c.checkpoint.toString("utf8", 2, 2 + c.checkpoint.readUInt8(1)) === id
        : c.zip === 2 && c.parent_checkpoint_id === id;
    const target = rows.find(
      (r) => rows.filter((c) => dependsOn(c, r.checkpoint_id)).length >= (deltaRows ? 1 : 3),
    )!;
    expect(target).toBeDefined();
    const tuple = seen.find((t) => t.checkpoint.id === target.checkpoint_id)!;
    await again.put(
      tuple.parentConfig ?? { configurable: { thread_id: "t", checkpoint_ns: "" } },
      tuple.checkpoint,
      { ...tuple.metadata!, note: "again" } as any,
      tuple.checkpoint.channel_versions,
    );
    again.db.close();

    const fresh = IncrementalSqliteSaver.fromConnString(path);
    const listed = [];
    for await (const t of fresh.list(cfg)) listed.push(t);
    expect(listed.map((t) => t.checkpoint)).toEqual(seen.map((t) => t.checkpoint));
    expect(listed.find((t) => t.checkpoint.id === target.checkpoint_id)?.metadata).toMatchObject({
      note: "again",
    });
    fresh.db.close();
  },
);
