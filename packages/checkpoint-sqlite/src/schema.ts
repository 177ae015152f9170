/**
 * The saver's tables: their layout (row kinds and formats), their creation, the conversions of
 * earlier formats, and the statements every other part runs.
 */
import { deflateRawSync } from "node:zlib";
import { TASKS } from "@langchain/langgraph-checkpoint";
import type Database from "better-sqlite3";
import { packWrites, type Codec, type StoredWrite } from "./codec.ts";
import { shown } from "./corrupt.ts";
import {
  LEGACY_CHECKPOINTS,
  LEGACY_WRITES,
  T_BLOBS,
  T_CHECKPOINTS,
  T_NAMESPACES,
  T_WRITES,
} from "./tables.ts";

/** How a blob row encodes its channel value. */
export const KIND_FULL = 0;
/** Items appended to the value at `base_version`. */
export const KIND_APPEND = 1;
/** The channel is empty at this version (rows of earlier versions: an empty channel now gets no row). */
export const KIND_EMPTY = 2;
/** The value is a task write of the parent checkpoint (`value`: JSON [checkpoint_id, [[task_id, idx, 0]]]). */
export const KIND_WRITE = 3;
/**
 * Items appended to `base_version` (none: to an empty list), which are task writes of the parent
 * (refs as KIND_WRITE; spread 1 = a written list contributes its items).
 */
export const KIND_APPEND_WRITES = 4;

/**
 * `zip` of a checkpoint row deflated with the records of its nearest ancestors as its dictionary
 * (a delta record repeats much of its parent's, and of the step before: the same node's record):
 * one byte (how many ancestors, parent last in the dictionary), the dictionary's CRC-32, the data.
 */
export const ZIP_RECORD_ANCESTORS = 2;
/**
 * `zip` of a checkpoint row holding its whole record deflated with one earlier record of its
 * lineage, its keyframe (a row stored alone, zip 0 or 1), as the dictionary: one byte (how many
 * generations back the keyframe is), one byte (the length of its checkpoint id), that id (UTF-8),
 * the keyframe record's CRC-32, the data. A read needs this row and its keyframe's only.
 */
export const ZIP_RECORD_KEYFRAME = 3;
/** `zip` of a writes row deflated with earlier rows as its dictionary, named by key (rows of earlier versions). */
export const ZIP_DICTIONARY = 2;
/**
 * `zip` of a writes row deflated with earlier rows of its thread as its dictionary, named by rowid:
 * a header of one byte (row count), each row's rowid (6 bytes), the dictionary's CRC-32 (4 bytes).
 */
export const ZIP_ROWID_DICTIONARY = 3;
/** The `metadata` column of a row whose metadata is in its record (key `m`). */
export const METADATA_IN_RECORD = "";

export {
  LEGACY_CHECKPOINTS,
  LEGACY_WRITES,
  T_BLOBS,
  T_CHECKPOINTS,
  T_NAMESPACES,
  T_WRITES,
} from "./tables.ts";
/** Suffix the first format's tables get while they are copied into the current ones. */
const FIRST_FORMAT = "_first_format";

/** The saver's tables (created if missing). */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS ${T_NAMESPACES} (
  ns_id INTEGER PRIMARY KEY,
  thread_id TEXT NOT NULL,
  checkpoint_ns TEXT NOT NULL,
  UNIQUE (thread_id, checkpoint_ns)
);
CREATE TABLE IF NOT EXISTS ${T_CHECKPOINTS} (
  ns_id INTEGER NOT NULL,
  checkpoint_id TEXT NOT NULL,
  parent_checkpoint_id TEXT,
  type TEXT NOT NULL,
  checkpoint BLOB NOT NULL,
  zip INTEGER NOT NULL,
  metadata TEXT NOT NULL,
  PRIMARY KEY (ns_id, checkpoint_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ${T_BLOBS} (
  ns_id INTEGER NOT NULL,
  channel TEXT NOT NULL,
  version TEXT NOT NULL,
  kind INTEGER NOT NULL,
  base_version TEXT,
  chain INTEGER NOT NULL DEFAULT 0,
  items INTEGER NOT NULL DEFAULT 0,
  snapshot_items INTEGER NOT NULL DEFAULT 0,
  type TEXT NOT NULL,
  zip INTEGER NOT NULL,
  value BLOB,
  PRIMARY KEY (ns_id, channel, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ${T_WRITES} (
  row_id INTEGER PRIMARY KEY,
  ns_id INTEGER NOT NULL,
  checkpoint_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  task_path TEXT NOT NULL DEFAULT '',
  zip INTEGER NOT NULL,
  writes BLOB NOT NULL,
  UNIQUE (ns_id, checkpoint_id, task_id)
);`;

export interface BlobRow {
  kind: number;
  base_version: string | null;
  chain: number;
  items: number;
  snapshot_items: number;
  type: string;
  zip: number;
  value: Buffer | null;
}

export interface CheckpointRow {
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  parent_checkpoint_id: string | null;
  checkpoint: Buffer;
  zip: number;
  metadata: string;
  type: string | null;
  ns_id?: number;
  legacy?: boolean;
}

/** A row of the writes table: one task's writes. */
export interface WritesRow {
  row_id?: number;
  checkpoint_id?: string;
  task_id: string;
  task_path: string;
  zip: number;
  writes: Buffer;
}

/** The statements of the saver (see {@link openTables}). */
export type Statements = ReturnType<typeof prepare>;

/**
 * Creates the tables when missing and converts those of earlier formats (one look at the schema:
 * a database in the current format needs no conversion nor DDL, which a fresh saver's first read
 * pays for), then returns the statements, each prepared on first use.
 */
export function openTables(db: Database.Database, codec: Codec): Statements {
  const tables = new Map(
    (
      db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table'").all() as Array<{
        name: string;
        sql: string;
      }>
    ).map((t) => [t.name, t.sql]),
  );
  const current =
    tables.has(T_NAMESPACES) &&
    tables.has(T_BLOBS) &&
    !!tables.get(T_CHECKPOINTS) &&
    !/\bthread_id\b/.test(tables.get(T_CHECKPOINTS)!) &&
    /\brow_id\b/.test(tables.get(T_WRITES) ?? "");
  if (!current) {
    migrateFirstFormat(db, codec);
    addWritesRowIds(db);
    db.exec(SCHEMA);
  }
  return prepare(
    db,
    current
      ? tables.has(LEGACY_CHECKPOINTS) && tables.has(LEGACY_WRITES)
      : hasTable(db, LEGACY_CHECKPOINTS) && hasTable(db, LEGACY_WRITES),
  );
}

/**
 * Converts the tables of this saver's first format (codehop 159df5a, 2026-11-24: thread and
 * namespace strings in every row, one row per write, each write deflated on its own) to the
 * current one, in place and in one transaction: the same checkpoint and blob rows under integer
 * namespace ids, and each task's writes packed into one row. Nothing else differs (blob kinds,
 * value encoding and checkpoint rows are the same), so every checkpoint reads as before.
 */
function migrateFirstFormat(db: Database.Database, codec: Codec): void {
  const isFirst = () =>
    (db.prepare(`PRAGMA table_info(${T_CHECKPOINTS})`).all() as { name: string }[]).some(
      (c) => c.name === "thread_id",
    );
  if (!isFirst()) return;
  db.transaction(() => {
    if (!isFirst()) return; // another process converted it meanwhile
    const old = (t: string) => `${t}${FIRST_FORMAT}`;
    for (const t of [T_CHECKPOINTS, T_BLOBS, T_WRITES])
      if (hasTable(db, t)) db.exec(`ALTER TABLE ${t} RENAME TO ${old(t)}`);
    for (const t of [T_BLOBS, T_WRITES])
      if (!hasTable(db, old(t)))
        db.exec(`CREATE TABLE ${old(t)} (thread_id TEXT, checkpoint_ns TEXT)`);
    db.exec(SCHEMA);
    db.exec(`
INSERT OR IGNORE INTO ${T_NAMESPACES} (thread_id, checkpoint_ns)
  SELECT thread_id, checkpoint_ns FROM ${old(T_CHECKPOINTS)}
  UNION SELECT thread_id, checkpoint_ns FROM ${old(T_BLOBS)}
  UNION SELECT thread_id, checkpoint_ns FROM ${old(T_WRITES)};
INSERT INTO ${T_CHECKPOINTS}
  (ns_id, checkpoint_id, parent_checkpoint_id, type, checkpoint, zip, metadata)
  SELECT n.ns_id, c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint, c.zip, c.metadata
  FROM ${old(T_CHECKPOINTS)} c JOIN ${T_NAMESPACES} n USING (thread_id, checkpoint_ns);`);
    if (hasColumn(db, old(T_BLOBS), "kind"))
      db.exec(`
INSERT INTO ${T_BLOBS}
  (ns_id, channel, version, kind, base_version, chain, items, snapshot_items, type, zip, value)
  SELECT n.ns_id, b.channel, b.version, b.kind, b.base_version, b.chain, b.items, b.snapshot_items,
         b.type, b.zip, b.value
  FROM ${old(T_BLOBS)} b JOIN ${T_NAMESPACES} n USING (thread_id, checkpoint_ns);`);
    if (hasColumn(db, old(T_WRITES), "idx")) packFirstFormatWrites(db, old(T_WRITES), codec);
    for (const t of [T_CHECKPOINTS, T_BLOBS, T_WRITES]) db.exec(`DROP TABLE ${old(t)}`);
  }).immediate();
}

/**
 * Gives a writes table of earlier versions its explicit row id column (`row_id INTEGER PRIMARY
 * KEY`, in place, in one transaction): rows name their dictionary rows by it, and VACUUM may
 * renumber the rowids of a table without one.
 */
function addWritesRowIds(db: Database.Database): void {
  const needed = () => hasTable(db, T_WRITES) && !hasColumn(db, T_WRITES, "row_id");
  if (!needed()) return;
  db.transaction(() => {
    if (!needed()) return; // another process converted it meanwhile
    const old = `${T_WRITES}_before_row_ids`;
    const cols = "ns_id, checkpoint_id, task_id, task_path, zip, writes";
    db.exec(`ALTER TABLE ${T_WRITES} RENAME TO ${old}`);
    db.exec(SCHEMA);
    db.exec(`INSERT INTO ${T_WRITES} (row_id, ${cols}) SELECT rowid, ${cols} FROM ${old}`);
    db.exec(`DROP TABLE ${old}`);
  }).immediate();
}

/** The first format's write rows (one per write) as one packed row per task. */
function packFirstFormatWrites(db: Database.Database, table: string, codec: Codec): void {
  const rows = db
    .prepare(
      `SELECT n.ns_id, w.checkpoint_id, w.task_id, w.task_path, w.idx, w.channel, w.type, w.zip, w.value
         FROM ${table} w JOIN ${T_NAMESPACES} n USING (thread_id, checkpoint_ns)
         ORDER BY n.ns_id, w.checkpoint_id, w.task_id, w.idx`,
    )
    .all() as Array<{
    ns_id: number;
    checkpoint_id: string;
    task_id: string;
    task_path: string;
    idx: number;
    channel: string;
    type: string;
    zip: number;
    value: Buffer | null;
  }>; // all read first: better-sqlite3 cannot write while a statement iterates
  const insert = db.prepare(
    `INSERT INTO ${T_WRITES} (ns_id, checkpoint_id, task_id, task_path, zip, writes) VALUES (?, ?, ?, ?, ?, ?)`,
  );
  let task = null as {
    key: string;
    args: [number, string, string, string];
    writes: StoredWrite[];
  } | null;
  const flush = () => {
    if (!task) return;
    const packed = packWrites(task.writes);
    const zipped = codec.deflatable(packed.length) ? deflateRawSync(packed) : undefined;
    const zip = zipped !== undefined && zipped.length < packed.length;
    insert.run(...task.args, zip ? 1 : 0, zip ? zipped : packed);
  };
  for (const r of rows) {
    const key = `${r.ns_id}\u0000${r.checkpoint_id}\u0000${r.task_id}`;
    if (task?.key !== key) {
      flush();
      task = { key, args: [r.ns_id, r.checkpoint_id, r.task_id, r.task_path], writes: [] };
    }
    const data =
      r.value === null
        ? Buffer.alloc(0)
        : r.zip
          ? codec.inflate(r.value, {
              table: T_WRITES,
              row: () =>
                `ns_id ${r.ns_id}, checkpoint_id ${shown(r.checkpoint_id)}, task_id ${shown(r.task_id)}, idx ${r.idx} (first format)`,
            })
          : r.value;
    task.writes.push({ idx: r.idx, channel: r.channel, type: r.type, data });
  }
  flush();
}

function hasColumn(db: Database.Database, table: string, column: string): boolean {
  return (db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).some(
    (c) => c.name === column,
  );
}

function hasTable(db: Database.Database, name: string): boolean {
  return !!db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name);
}

/** A statement prepared on first use (a fresh saver's first read needs only a few). */
function lazy(db: Database.Database, sql: string) {
  let statement: Database.Statement | undefined;
  const get = () => (statement ??= db.prepare(sql));
  return {
    get: (...args: unknown[]) => get().get(...args),
    all: (...args: unknown[]) => get().all(...args),
    run: (...args: unknown[]) => get().run(...args),
  };
}

function prepare(db: Database.Database, legacy: boolean) {
  const cols = `c.ns_id, n.thread_id, n.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint, c.zip, c.metadata`;
  const from = `${T_CHECKPOINTS} c JOIN ${T_NAMESPACES} n ON n.ns_id = c.ns_id`;
  const statement = (sql: string) => lazy(db, sql);
  return {
    legacy,
    select: `SELECT ${cols} FROM ${from}`,
    getNs: statement(`SELECT ns_id FROM ${T_NAMESPACES} WHERE thread_id = ? AND checkpoint_ns = ?`),
    addNs: statement(
      `INSERT OR IGNORE INTO ${T_NAMESPACES} (thread_id, checkpoint_ns) VALUES (?, ?)`,
    ),
    getCheckpoint: statement(
      `SELECT ${cols} FROM ${from} WHERE c.ns_id = ? AND c.checkpoint_id = ?`,
    ),
    latestCheckpoint: statement(
      `SELECT ${cols} FROM ${from} WHERE c.ns_id = ? ORDER BY c.checkpoint_id DESC LIMIT 1`,
    ),
    putCheckpoint: statement(
      `INSERT OR REPLACE INTO ${T_CHECKPOINTS}
         (ns_id, checkpoint_id, parent_checkpoint_id, type, checkpoint, zip, metadata)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ),
    // The chain of appends from a version down to its first other row. UNION (not UNION ALL):
    // a chain that loops (corrupt rows) ends at the first row met again instead of never.
    blobChain: statement(
      `WITH RECURSIVE chain (version, kind, base_version) AS (
           SELECT version, kind, base_version
           FROM ${T_BLOBS} WHERE ns_id = @ns AND channel = @channel AND version = @version
           UNION
           SELECT b.version, b.kind, b.base_version
           FROM chain c JOIN ${T_BLOBS} b
             ON b.ns_id = @ns AND b.channel = @channel AND b.version = c.base_version
           WHERE c.kind IN (${KIND_APPEND}, ${KIND_APPEND_WRITES})
         )
         SELECT b.version, b.kind, b.base_version, b.chain, b.items, b.snapshot_items, b.type, b.zip, b.value
         FROM chain c JOIN ${T_BLOBS} b
           ON b.ns_id = @ns AND b.channel = @channel AND b.version = c.version`,
    ),
    writesOf: statement(
      `SELECT row_id, checkpoint_id, task_id, task_path, zip, writes FROM ${T_WRITES}
         WHERE ns_id = ? AND checkpoint_id IN (SELECT value FROM json_each(?))
         ORDER BY checkpoint_id, task_path, task_id`,
    ),
    hasCheckpoint: statement(
      `SELECT 1 FROM ${T_CHECKPOINTS} WHERE ns_id = ? AND checkpoint_id = ?`,
    ),
    setCheckpointZip: statement(
      `UPDATE ${T_CHECKPOINTS} SET zip = ?, checkpoint = ? WHERE ns_id = ? AND checkpoint_id = ?`,
    ),
    getBlob: statement(
      `SELECT kind, base_version, chain, items, snapshot_items, type, zip, value FROM ${T_BLOBS}
         WHERE ns_id = ? AND channel = ? AND version = ?`,
    ),
    putBlob: statement(
      `INSERT OR REPLACE INTO ${T_BLOBS}
         (ns_id, channel, version, kind, base_version, chain, items, snapshot_items, type, zip, value)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    getWrites: statement(
      `SELECT row_id, checkpoint_id, task_id, task_path, zip, writes FROM ${T_WRITES}
         WHERE ns_id = ? AND checkpoint_id = ? ORDER BY task_path, task_id`,
    ),
    getTaskWrites: statement(
      `SELECT row_id, checkpoint_id, task_id, task_path, zip, writes FROM ${T_WRITES}
         WHERE ns_id = ? AND checkpoint_id = ? AND task_id = ?`,
    ),
    // An upsert keeps the row's rowid (by which later rows may name it as their dictionary).
    putTaskWrites: statement(
      `INSERT INTO ${T_WRITES} (ns_id, checkpoint_id, task_id, task_path, zip, writes)
         VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (ns_id, checkpoint_id, task_id) DO UPDATE SET
           task_path = excluded.task_path, zip = excluded.zip, writes = excluded.writes
         RETURNING row_id AS rowid`,
    ),
    getTaskWritesRow: statement(
      `SELECT row_id AS rowid, row_id, checkpoint_id, task_id, zip, writes FROM ${T_WRITES}
         WHERE ns_id = ? AND checkpoint_id = ? AND task_id = ?`,
    ),
    getWritesByRowid: statement(
      `SELECT row_id, checkpoint_id, task_id, task_path, zip, writes FROM ${T_WRITES} WHERE row_id = ?`,
    ),
    setWritesZip: statement(`UPDATE ${T_WRITES} SET zip = ?, writes = ? WHERE row_id = ?`),
    legacyCheckpoint: legacy
      ? statement(
          `SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata
             FROM ${LEGACY_CHECKPOINTS} WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?`,
        )
      : undefined,
    legacyLatest: legacy
      ? statement(
          `SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata
             FROM ${LEGACY_CHECKPOINTS} WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1`,
        )
      : undefined,
    legacyWrites: legacy
      ? statement(
          `SELECT task_id, idx, channel, type, value FROM ${LEGACY_WRITES}
             WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? ORDER BY task_id, idx`,
        )
      : undefined,
    legacySends: legacy
      ? statement(
          `SELECT task_id, idx, type, value FROM ${LEGACY_WRITES}
             WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? AND channel = '${TASKS}' ORDER BY idx`,
        )
      : undefined,
  };
}
