/**
 * IncrementalSqliteSaver: a LangGraph checkpointer for SQLite whose storage grows linearly with the
 * steps of a thread. See README.md in this folder. This folder imports nothing of codehop: only
 * LangGraph's checkpoint package, better-sqlite3 and Node's own modules.
 */
import { randomInt } from "node:crypto";
import { crc32, deflateRawSync, inflateRawSync } from "node:zlib";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
  TASKS,
  WRITES_IDX_MAP,
  JsonPlusSerializer,
  copyCheckpoint,
  getCheckpointId,
  maxChannelVersion,
} from "@langchain/langgraph-checkpoint";
import Database from "better-sqlite3";

/** Options of {@link IncrementalSqliteSaver}. */
export interface IncrementalSqliteSaverOptions {
  /** Serializer (default: LangGraph's JsonPlusSerializer). */
  serde?: SerializerProtocol;
  /** Values (blobs, writes, checkpoints) at least this large are stored deflated. Default 128 bytes. */
  compressAbove?: number;
  /** A list appended this many times in a row is stored whole once more (bounds reads). Default 16. */
  minChainBeforeSnapshot?: number;
  /** Decoded channel values kept in memory for appends and reads. Default 512. */
  cacheSize?: number;
}

/**
 * Stored bytes as the serializer reads them: JSON as a string (Buffer's UTF-8 decoding is several
 * times faster than the TextDecoder the serializer would use on bytes), other types as bytes.
 */
function serialized(type: string, raw: Buffer): string | Uint8Array {
  return type === "json"
    ? raw.toString("utf8")
    : new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength);
}

/** JSON punctuation for {@link IncrementalSqliteSaver}'s batched decode: `[`, `,`, `]`. */
const OPEN = Buffer.of(0x5b);
const COMMA = Buffer.of(0x2c);
const CLOSE = Buffer.of(0x5d);
const EMPTY = Buffer.alloc(0);

/** How a blob row encodes its channel value. */
const KIND_FULL = 0;
/** Items appended to the value at `base_version`. */
const KIND_APPEND = 1;
/** The channel is empty at this version (rows of earlier versions: an empty channel now gets no row). */
const KIND_EMPTY = 2;
/** The value is a task write of the parent checkpoint (`value`: JSON [checkpoint_id, [[task_id, idx, 0]]]). */
const KIND_WRITE = 3;
/**
 * Items appended to `base_version` (none: to an empty list), which are task writes of the parent
 * (refs as KIND_WRITE; spread 1 = a written list contributes its items).
 */
const KIND_APPEND_WRITES = 4;

const T_NAMESPACES = "lgi_namespaces";
const T_CHECKPOINTS = "lgi_checkpoints";
const T_BLOBS = "lgi_blobs";
const T_WRITES = "lgi_writes";
/** The official SqliteSaver's tables (read in place, deleted with their thread). */
const LEGACY_CHECKPOINTS = "checkpoints";
const LEGACY_WRITES = "writes";
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

interface BlobRow {
  kind: number;
  base_version: string | null;
  chain: number;
  items: number;
  snapshot_items: number;
  type: string;
  zip: number;
  value: Buffer | null;
}

interface CheckpointRow {
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

/** One stored write of a task: its index, channel and serialized value. */
interface StoredWrite {
  idx: number;
  channel: string;
  type: string;
  data: Buffer;
}

/**
 * A task's writes in one row: count, then per write its index, channel, type and bytes (lengths as
 * unsigned 32-bit ints). One row per task instead of per write keeps the keys out of the table
 * (LangGraph writes a handful of channels per task) and lets deflate work across the values.
 */
function packWrites(writes: readonly StoredWrite[]): Buffer {
  const parts: Buffer[] = [];
  const head = Buffer.alloc(4);
  head.writeUInt32LE(writes.length);
  parts.push(head);
  for (const w of writes) {
    const channel = Buffer.from(w.channel, "utf8");
    const type = Buffer.from(w.type, "utf8");
    const meta = Buffer.alloc(16);
    meta.writeInt32LE(w.idx, 0);
    meta.writeUInt32LE(channel.length, 4);
    meta.writeUInt32LE(type.length, 8);
    meta.writeUInt32LE(w.data.length, 12);
    parts.push(meta, channel, type, w.data);
  }
  return Buffer.concat(parts);
}

function unpackWrites(buf: Buffer): StoredWrite[] {
  const out: StoredWrite[] = [];
  const count = buf.readUInt32LE(0);
  let at = 4;
  for (let i = 0; i < count; i++) {
    const idx = buf.readInt32LE(at);
    const channelLength = buf.readUInt32LE(at + 4);
    const typeLength = buf.readUInt32LE(at + 8);
    const dataLength = buf.readUInt32LE(at + 12);
    at += 16;
    const channel = buf.toString("utf8", at, at + channelLength);
    at += channelLength;
    const type = buf.toString("utf8", at, at + typeLength);
    at += typeLength;
    out.push({ idx, channel, type, data: buf.subarray(at, at + dataLength) });
    at += dataLength;
  }
  return out;
}

/** A task write as stored by putWrites, kept in memory to spot channel values that are writes. */
interface CachedWrite {
  taskPath: string;
  taskId: string;
  idx: number;
  channel: string;
  value: unknown;
}

/** A row of the writes table: one task's writes. */
interface WritesRow {
  task_id: string;
  task_path: string;
  zip: number;
  writes: Buffer;
}

/** A reference to a stored write: task id, index, and 1 when its value (a list) is spread. */
type WriteRef = [taskId: string, idx: number, spread: 0 | 1];

/**
 * A small channel value kept in the checkpoint record instead of a blob row of its own (a row costs
 * ~40 bytes of keys and columns; the record is deflated with its neighbours): `[version, 0, JSON
 * text]`, or `[version, 1, checkpoint id, task id, index]` for the value one task of that checkpoint
 * wrote.
 */
type InlineValue = [string, 0, string] | [string, 1, string, string, number];

/**
 * An inline value as a record stores it (key `iv`, by channel): without its version (the record's
 * version of the channel) and, for a write of the record's parent, without the checkpoint id.
 */
type StoredInline = [0, string] | [1, string, number] | [1, string, number, string];

function toStoredInline(entry: InlineValue, parentId: string | undefined): StoredInline {
  if (entry[1] === 0) return [0, entry[2]];
  return entry[2] === parentId ? [1, entry[3], entry[4]] : [1, entry[3], entry[4], entry[2]];
}

/** The inline values of a stored record, given its versions of the channels and its parent. */
function fromStoredInline(
  iv: Record<string, StoredInline> | undefined,
  versions: ChannelVersions,
  parentId: string | null,
): Record<string, InlineValue> {
  const out: Record<string, InlineValue> = {};
  for (const [channel, e] of Object.entries(iv ?? {})) {
    const version = String(versions[channel]);
    if (e[0] === 0) out[channel] = [version, 0, e[1]];
    else {
      const checkpoint = e[3] ?? parentId;
      if (typeof checkpoint !== "string")
        throw new Error(
          `IncrementalSqliteSaver: an inline write of "${channel}" has no checkpoint`,
        );
      out[channel] = [version, 1, checkpoint, e[1], e[2]];
    }
  }
  return out;
}

/**
 * JSON values stored in fewer bytes than this (deflated or not) are kept in the checkpoint record
 * (see InlineValue), as text of at most INLINE_RAW_MAX bytes (the record is deflated as a whole).
 */
const INLINE_BELOW = 128;
const INLINE_RAW_MAX = 1024;

/**
 * Channel versions and versions seen of a checkpoint, whole, and how many deltas led to them;
 * `inline`: the values kept in records along the way (an entry counts only while its version is
 * the channel's version).
 */
interface Versions {
  channel_versions: ChannelVersions;
  versions_seen: Record<string, ChannelVersions>;
  chain: number;
  inline: Record<string, InlineValue>;
}

/**
 * A checkpoint row stores its version maps as the change from its parent (`base`: the parent's
 * id; `cv`: channels with a new version; `vs`: per node, the versions it saw that changed) at most
 * this many times in a row, then whole again (bounds a read to this many rows).
 */
const MAX_VERSIONS_CHAIN = 8;
/** `base` of a record whose version maps are stored as the change from its parent (the row's). */
const BASE_IS_PARENT = 1;

/** Whether every key of `before` is in `after` (maps that only grew or changed). */
function keepsKeys(before: object, after: object): boolean {
  for (const k of Object.keys(before)) if (!Object.hasOwn(after, k)) return false;
  return true;
}

/** Queued puts and putWrites are written at once when this many wait (see `enqueue`). */
const MAX_QUEUED_ROWS = 32;
/** ... or when the oldest has waited this long (ms). */
const MAX_QUEUED_MS = 100;

/**
 * `zip` of a checkpoint row deflated with the records of its nearest ancestors as its dictionary
 * (a delta record repeats much of its parent's, and of the step before: the same node's record):
 * one byte (how many ancestors, parent last in the dictionary), the dictionary's CRC-32, the data.
 */
const ZIP_RECORD_ANCESTORS = 2;
/** At most this many ancestors (never past the whole record that starts a delta chain). */
const RECORD_ANCESTORS = 3;
/** The `metadata` column of a row whose metadata is in its record (key `m`). */
const METADATA_IN_RECORD = "";

/** A checkpoint row's record bytes and its parent's id. */
interface RawRecord {
  raw: Buffer;
  parentId: string | null;
}

/** A checkpoint row's record, decoded: raw bytes, parsed, its parent id, and whether it is whole. */
interface RecordEntry {
  raw: Buffer;
  stored: Record<string, any>;
  parentId: string | null;
  whole: boolean;
}

/** `zip` of a writes row deflated with earlier rows as its dictionary, named by key (rows of earlier versions). */
const ZIP_DICTIONARY = 2;
/**
 * `zip` of a writes row deflated with earlier rows of its thread as its dictionary, named by rowid:
 * a header of one byte (row count), each row's rowid (6 bytes), the dictionary's CRC-32 (4 bytes).
 */
const ZIP_ROWID_DICTIONARY = 3;
/** Plain rows of a thread kept in memory as dictionary candidates for the rows after them. */
const DICTIONARY_ROWS = 3;
/** Deflate's window: a dictionary longer than this contributes only its end. */
const DICTIONARY_BYTES = 32 * 1024;
/** A row is stored with a dictionary only when that makes it at most this share of plain deflate. */
const DICTIONARY_GAIN = 0.8;

/** A writes row stored plain (or deflated without a dictionary): usable as a dictionary. */
interface PlainWritesRow {
  nsId: number;
  checkpointId: string;
  taskId: string;
  rowid: number;
  raw: Buffer;
}

/**
 * Header of a writes row of format {@link ZIP_DICTIONARY}: the rows whose raw bytes, concatenated
 * (the last DICTIONARY_BYTES), are the dictionary, and their CRC-32 (a dictionary row that changed
 * since is a clear error, never a silent misread).
 */
interface DictionaryHeader {
  rows: Array<[checkpointId: string, taskId: string]>;
  crc: number;
}

/** The header of a {@link ZIP_ROWID_DICTIONARY} row: its dictionary rows, CRC and data offset. */
function rowidHeader(data: Buffer): { rowids: number[]; crc: number; at: number } {
  const n = data.readUInt8(0);
  const rowids: number[] = [];
  for (let i = 0; i < n; i++) rowids.push(data.readUIntLE(1 + 6 * i, 6));
  return { rowids, crc: data.readUInt32LE(1 + 6 * n), at: 5 + 6 * n };
}

function dictionaryOf(raws: readonly Buffer[]): Buffer {
  const all = Buffer.concat(raws);
  return all.length > DICTIONARY_BYTES ? all.subarray(all.length - DICTIONARY_BYTES) : all;
}

/**
 * Whether a metadata value equals a filter value as `json_extract(a) IS json_extract(b)` compares
 * them in SQL (how rows with metadata text are filtered): objects and lists as their JSON text,
 * booleans as 0/1, a missing value as NULL.
 */
function sameAsSql(a: unknown, b: unknown): boolean {
  const sql = (v: unknown) =>
    v === undefined || v === null
      ? null
      : typeof v === "boolean"
        ? Number(v)
        : typeof v === "object"
          ? JSON.stringify(v)
          : v;
  return sql(a) === sql(b);
}

/** A small least-recently-used map. */
class Lru<K, V> {
  private readonly map = new Map<K, V>();
  constructor(private readonly capacity: number) {}
  get(key: K): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }
  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value as K);
  }
  deleteWhere(test: (key: K) => boolean): void {
    for (const key of [...this.map.keys()]) if (test(key)) this.map.delete(key);
  }
}

const blobKey = (nsId: number, channel: string, version: string) =>
  `${nsId}\u0000${channel}\u0000${version}`;

/** The same order as LangGraph's writesSortKey: task path, task id, index. */
function compareWrites(a: CachedWrite, b: CachedWrite): number {
  if (a.taskPath !== b.taskPath) return a.taskPath < b.taskPath ? -1 : 1;
  if (a.taskId !== b.taskId) return a.taskId < b.taskId ? -1 : 1;
  return a.idx - b.idx;
}

/**
 * A LangGraph checkpointer for SQLite that writes a channel's value only when its version changes
 * (the `newVersions` of `put`), stores a list that only grew as the items it gained (with a full
 * copy from time to time, geometrically spaced, so reads stay short and storage stays linear),
 * stores a value that is exactly what a task wrote as a reference to that write (LangGraph stores
 * every task's writes anyway), and deflates large values. Channel versions are numbers with a random
 * fraction, so two forks of a thread never store different values under the same version.
 *
 * Opens databases written by the official `SqliteSaver` (@langchain/langgraph-checkpoint-sqlite):
 * their `checkpoints` / `writes` tables are read in place, a thread continued from one of their
 * checkpoints is written in the new tables, and `deleteThread` removes both.
 *
 * Values are treated as immutable, as LangGraph's reducers treat them: a list is recognised as
 * grown when its first items are the very objects of the version it grew from (or, after a restart,
 * serialize the same), and a value as a write when it is the very object the task wrote.
 */
export class IncrementalSqliteSaver extends BaseCheckpointSaver {
  readonly db: Database.Database;
  private readonly compressAbove: number;
  private readonly minChain: number;
  private readonly values: Lru<string, unknown>;
  /** Task writes stored by this process, by namespace id and checkpoint id (the parent of the next put). */
  private readonly writes: Lru<string, CachedWrite[]>;
  /** Latest checkpoint put per namespace id: its id and channel versions (saves a read per put). */
  private readonly lastPut = new Map<number, { id: string; versions: Versions }>();
  /** Decoded checkpoint records, by namespace id and checkpoint id (the ancestors a record needs). */
  private readonly records = new Lru<string, RecordEntry>(256);
  /** Decoded record bytes of ancestors read as dictionaries, by namespace id and checkpoint id. */
  private readonly recordBytes = new Lru<string, RawRecord>(256);
  /** Resolved version maps of delta-encoded checkpoints, by namespace id and checkpoint id. */
  private readonly versionMaps = new Lru<string, Versions>(256);
  /**
   * The channel values of the latest checkpoint put per namespace id, by channel: version and
   * value. Reading the latest state (every invoke, every resume) is served from here even after a
   * long list() has cycled the value cache.
   */
  private readonly latestValues = new Lru<number, Map<string, { version: string; value: unknown }>>(
    64,
  );
  private readonly nsIds = new Map<string, number>();
  private statements?: ReturnType<IncrementalSqliteSaver["prepare"]>;
  /**
   * Rows of puts and putWrites not written yet, in call order, and the promises waiting for them:
   * written together in one transaction on the next turn of the event loop (or before any read),
   * so a step's checkpoints and writes cost one commit, and the writing happens while the graph
   * waits for something else (a model, a tool) instead of before its next node.
   */
  private pending: Array<() => void> = [];
  private waiting: Array<{ resolve: () => void; reject: (err: unknown) => void }> = [];
  private flushScheduled = false;
  /** When the oldest queued row was queued (performance.now()), for {@link MAX_QUEUED_MS}. */
  private queuedSince = 0;
  /** Blob rows not written yet, by blob key (read by appends to them). */
  private readonly pendingBlobs = new Map<string, BlobRow>();
  /** Task writes not written yet, by namespace id, checkpoint id and task id. */
  private readonly pendingTaskWrites = new Map<string, StoredWrite[]>();
  /** The latest plain writes rows of each thread written by this process (dictionary candidates). */
  private readonly plainRows = new Lru<string, PlainWritesRow[]>(64);
  /** Raw bytes of writes rows read as dictionaries, by namespace, checkpoint and task id (or `#rowid`). */
  private readonly rawRows = new Lru<string, Buffer>(64);
  /** Dictionaries of format-3 writes rows and their CRC-32, by the rowids that make them. */
  private readonly dictionaries = new Lru<string, { dictionary: Buffer; crc: number }>(16);

  /**
   * @param db an open better-sqlite3 database (shared with other tables is fine), or a file path
   */
  constructor(db: Database.Database | string, options: IncrementalSqliteSaverOptions = {}) {
    super(options.serde);
    this.db = typeof db === "string" ? new Database(db) : db;
    this.compressAbove = options.compressAbove ?? 128;
    this.minChain = options.minChainBeforeSnapshot ?? 16;
    this.values = new Lru(options.cacheSize ?? 512);
    this.writes = new Lru(64);
  }

  /** A saver on a database file (WAL, synchronous=NORMAL, busy timeout 5 s). */
  static fromConnString(path: string, options: IncrementalSqliteSaverOptions = {}) {
    const db = new Database(path);
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = NORMAL");
    db.pragma("busy_timeout = 5000");
    return new IncrementalSqliteSaver(db, options);
  }

  /**
   * Creates the tables (idempotent; runs on first use). A thread's namespace is a small integer in
   * every other table, so the long thread and namespace strings are stored once.
   */
  setup(): void {
    if (this.statements) return;
    // One look at the schema: a database in the current format needs no conversion nor DDL (a
    // fresh saver's first read pays for this).
    const tables = new Map(
      (
        this.db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table'").all() as Array<{
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
      this.migrateFirstFormat();
      this.addWritesRowIds();
      this.db.exec(SCHEMA);
    }
    this.statements = this.prepare(
      current
        ? tables.has(LEGACY_CHECKPOINTS) && tables.has(LEGACY_WRITES)
        : this.hasTable(LEGACY_CHECKPOINTS) && this.hasTable(LEGACY_WRITES),
    );
  }

  /** A statement prepared on first use (a fresh saver's first read needs only a few). */
  private lazy(sql: string) {
    let statement: Database.Statement | undefined;
    const get = () => (statement ??= this.db.prepare(sql));
    return {
      get: (...args: unknown[]) => get().get(...args),
      all: (...args: unknown[]) => get().all(...args),
      run: (...args: unknown[]) => get().run(...args),
    };
  }

  /**
   * Converts the tables of this saver's first format (codehop 159df5a, 2026-11-24: thread and
   * namespace strings in every row, one row per write, each write deflated on its own) to the
   * current one, in place and in one transaction: the same checkpoint and blob rows under integer
   * namespace ids, and each task's writes packed into one row. Nothing else differs (blob kinds,
   * value encoding and checkpoint rows are the same), so every checkpoint reads as before.
   */
  private migrateFirstFormat(): void {
    const isFirst = () =>
      (this.db.prepare(`PRAGMA table_info(${T_CHECKPOINTS})`).all() as { name: string }[]).some(
        (c) => c.name === "thread_id",
      );
    if (!isFirst()) return;
    this.db
      .transaction(() => {
        if (!isFirst()) return; // another process converted it meanwhile
        const old = (t: string) => `${t}${FIRST_FORMAT}`;
        for (const t of [T_CHECKPOINTS, T_BLOBS, T_WRITES])
          if (this.hasTable(t)) this.db.exec(`ALTER TABLE ${t} RENAME TO ${old(t)}`);
        for (const t of [T_BLOBS, T_WRITES])
          if (!this.hasTable(old(t)))
            this.db.exec(`CREATE TABLE ${old(t)} (thread_id TEXT, checkpoint_ns TEXT)`);
        this.db.exec(SCHEMA);
        this.db.exec(`
INSERT OR IGNORE INTO ${T_NAMESPACES} (thread_id, checkpoint_ns)
  SELECT thread_id, checkpoint_ns FROM ${old(T_CHECKPOINTS)}
  UNION SELECT thread_id, checkpoint_ns FROM ${old(T_BLOBS)}
  UNION SELECT thread_id, checkpoint_ns FROM ${old(T_WRITES)};
INSERT INTO ${T_CHECKPOINTS}
  (ns_id, checkpoint_id, parent_checkpoint_id, type, checkpoint, zip, metadata)
  SELECT n.ns_id, c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint, c.zip, c.metadata
  FROM ${old(T_CHECKPOINTS)} c JOIN ${T_NAMESPACES} n USING (thread_id, checkpoint_ns);`);
        if (this.hasColumn(old(T_BLOBS), "kind"))
          this.db.exec(`
INSERT INTO ${T_BLOBS}
  (ns_id, channel, version, kind, base_version, chain, items, snapshot_items, type, zip, value)
  SELECT n.ns_id, b.channel, b.version, b.kind, b.base_version, b.chain, b.items, b.snapshot_items,
         b.type, b.zip, b.value
  FROM ${old(T_BLOBS)} b JOIN ${T_NAMESPACES} n USING (thread_id, checkpoint_ns);`);
        if (this.hasColumn(old(T_WRITES), "idx")) this.packFirstFormatWrites(old(T_WRITES));
        for (const t of [T_CHECKPOINTS, T_BLOBS, T_WRITES]) this.db.exec(`DROP TABLE ${old(t)}`);
      })
      .immediate();
  }

  /**
   * Gives a writes table of earlier versions its explicit row id column (`row_id INTEGER PRIMARY
   * KEY`, in place, in one transaction): rows name their dictionary rows by it, and VACUUM may
   * renumber the rowids of a table without one.
   */
  private addWritesRowIds(): void {
    const needed = () => this.hasTable(T_WRITES) && !this.hasColumn(T_WRITES, "row_id");
    if (!needed()) return;
    this.db
      .transaction(() => {
        if (!needed()) return; // another process converted it meanwhile
        const old = `${T_WRITES}_before_row_ids`;
        const cols = "ns_id, checkpoint_id, task_id, task_path, zip, writes";
        this.db.exec(`ALTER TABLE ${T_WRITES} RENAME TO ${old}`);
        this.db.exec(SCHEMA);
        this.db.exec(`INSERT INTO ${T_WRITES} (row_id, ${cols}) SELECT rowid, ${cols} FROM ${old}`);
        this.db.exec(`DROP TABLE ${old}`);
      })
      .immediate();
  }

  /** The first format's write rows (one per write) as one packed row per task. */
  private packFirstFormatWrites(table: string): void {
    const rows = this.db
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
    const insert = this.db.prepare(
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
      const zipped = packed.length >= this.compressAbove ? deflateRawSync(packed) : undefined;
      const zip = zipped !== undefined && zipped.length < packed.length;
      insert.run(...task.args, zip ? 1 : 0, zip ? zipped : packed);
    };
    for (const r of rows) {
      const key = `${r.ns_id}\u0000${r.checkpoint_id}\u0000${r.task_id}`;
      if (task?.key !== key) {
        flush();
        task = { key, args: [r.ns_id, r.checkpoint_id, r.task_id, r.task_path], writes: [] };
      }
      const data = r.value === null ? Buffer.alloc(0) : r.zip ? inflateRawSync(r.value) : r.value;
      task.writes.push({ idx: r.idx, channel: r.channel, type: r.type, data });
    }
    flush();
  }

  private hasColumn(table: string, column: string): boolean {
    return (this.db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).some(
      (c) => c.name === column,
    );
  }

  private hasTable(name: string): boolean {
    return !!this.db
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?")
      .get(name);
  }

  private prepare(legacy: boolean) {
    const cols = `c.ns_id, n.thread_id, n.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint, c.zip, c.metadata`;
    const from = `${T_CHECKPOINTS} c JOIN ${T_NAMESPACES} n ON n.ns_id = c.ns_id`;
    return {
      legacy,
      select: `SELECT ${cols} FROM ${from}`,
      getNs: this.lazy(
        `SELECT ns_id FROM ${T_NAMESPACES} WHERE thread_id = ? AND checkpoint_ns = ?`,
      ),
      addNs: this.lazy(
        `INSERT OR IGNORE INTO ${T_NAMESPACES} (thread_id, checkpoint_ns) VALUES (?, ?)`,
      ),
      getCheckpoint: this.lazy(
        `SELECT ${cols} FROM ${from} WHERE c.ns_id = ? AND c.checkpoint_id = ?`,
      ),
      latestCheckpoint: this.lazy(
        `SELECT ${cols} FROM ${from} WHERE c.ns_id = ? ORDER BY c.checkpoint_id DESC LIMIT 1`,
      ),
      putCheckpoint: this.lazy(
        `INSERT OR REPLACE INTO ${T_CHECKPOINTS}
         (ns_id, checkpoint_id, parent_checkpoint_id, type, checkpoint, zip, metadata)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ),
      blobChain: this.lazy(
        `WITH RECURSIVE chain (version, kind, base_version, chain, items, snapshot_items, type, zip, value) AS (
           SELECT version, kind, base_version, chain, items, snapshot_items, type, zip, value
           FROM ${T_BLOBS} WHERE ns_id = @ns AND channel = @channel AND version = @version
           UNION ALL
           SELECT b.version, b.kind, b.base_version, b.chain, b.items, b.snapshot_items, b.type, b.zip, b.value
           FROM chain c JOIN ${T_BLOBS} b
             ON b.ns_id = @ns AND b.channel = @channel AND b.version = c.base_version
           WHERE c.kind IN (${KIND_APPEND}, ${KIND_APPEND_WRITES})
         ) SELECT * FROM chain`,
      ),
      writesOf: this.lazy(
        `SELECT checkpoint_id, task_id, task_path, zip, writes FROM ${T_WRITES}
         WHERE ns_id = ? AND checkpoint_id IN (SELECT value FROM json_each(?))`,
      ),
      hasCheckpoint: this.lazy(
        `SELECT 1 FROM ${T_CHECKPOINTS} WHERE ns_id = ? AND checkpoint_id = ?`,
      ),
      setCheckpointZip: this.lazy(
        `UPDATE ${T_CHECKPOINTS} SET zip = ?, checkpoint = ? WHERE ns_id = ? AND checkpoint_id = ?`,
      ),
      getBlob: this.lazy(
        `SELECT kind, base_version, chain, items, snapshot_items, type, zip, value FROM ${T_BLOBS}
         WHERE ns_id = ? AND channel = ? AND version = ?`,
      ),
      putBlob: this.lazy(
        `INSERT OR REPLACE INTO ${T_BLOBS}
         (ns_id, channel, version, kind, base_version, chain, items, snapshot_items, type, zip, value)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      getWrites: this.lazy(
        `SELECT task_id, task_path, zip, writes FROM ${T_WRITES}
         WHERE ns_id = ? AND checkpoint_id = ? ORDER BY task_path, task_id`,
      ),
      getTaskWrites: this.lazy(
        `SELECT task_id, task_path, zip, writes FROM ${T_WRITES}
         WHERE ns_id = ? AND checkpoint_id = ? AND task_id = ?`,
      ),
      // An upsert keeps the row's rowid (by which later rows may name it as their dictionary).
      putTaskWrites: this.lazy(
        `INSERT INTO ${T_WRITES} (ns_id, checkpoint_id, task_id, task_path, zip, writes)
         VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (ns_id, checkpoint_id, task_id) DO UPDATE SET
           task_path = excluded.task_path, zip = excluded.zip, writes = excluded.writes
         RETURNING row_id AS rowid`,
      ),
      getTaskWritesRow: this.lazy(
        `SELECT row_id AS rowid, zip, writes FROM ${T_WRITES} WHERE ns_id = ? AND checkpoint_id = ? AND task_id = ?`,
      ),
      getWritesByRowid: this.lazy(
        `SELECT task_id, task_path, zip, writes FROM ${T_WRITES} WHERE row_id = ?`,
      ),
      setWritesZip: this.lazy(`UPDATE ${T_WRITES} SET zip = ?, writes = ? WHERE row_id = ?`),
      legacyCheckpoint: legacy
        ? this.lazy(
            `SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata
             FROM ${LEGACY_CHECKPOINTS} WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?`,
          )
        : undefined,
      legacyLatest: legacy
        ? this.lazy(
            `SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata
             FROM ${LEGACY_CHECKPOINTS} WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1`,
          )
        : undefined,
      legacyWrites: legacy
        ? this.lazy(
            `SELECT task_id, channel, type, value FROM ${LEGACY_WRITES}
             WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? ORDER BY task_id, idx`,
          )
        : undefined,
      legacySends: legacy
        ? this.lazy(
            `SELECT type, value FROM ${LEGACY_WRITES}
             WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? AND channel = '${TASKS}' ORDER BY idx`,
          )
        : undefined,
    };
  }

  private get s() {
    this.setup();
    return this.statements!;
  }

  /** Queues rows to write; the promise resolves once they are committed. */
  private enqueue(write: () => void): Promise<void> {
    if (!this.pending.length) this.queuedSince = performance.now();
    this.pending.push(write);
    const done = new Promise<void>((resolve, reject) => this.waiting.push({ resolve, reject }));
    // A graph whose nodes never wait on I/O runs in microtasks only, so the next turn may come
    // only when the run ends: bound what a crash can lose (and the queue) meanwhile.
    if (
      this.pending.length >= MAX_QUEUED_ROWS ||
      performance.now() - this.queuedSince >= MAX_QUEUED_MS
    ) {
      this.flush();
      return done;
    }
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
    return done;
  }

  /**
   * Writes every queued put and putWrites now, in one IMMEDIATE transaction (reads call it first,
   * so they always see what was put). Callers closing the database themselves call it before.
   */
  flush(): void {
    this.flushScheduled = false;
    if (!this.pending.length) return;
    const writes = this.pending;
    const waiting = this.waiting;
    this.pending = [];
    this.waiting = [];
    try {
      // IMMEDIATE: the write lock is taken at BEGIN, where the busy timeout applies (a deferred
      // transaction that read first would fail at once when another process commits before it).
      this.db
        .transaction(() => {
          for (const write of writes) write();
        })
        .immediate();
    } catch (err) {
      // The rolled-back rows were offered as dictionaries while the batch was packed: a later row
      // deflated against one of them could never be read. Forget every candidate.
      this.plainRows.deleteWhere(() => true);
      this.forgetRawRows(() => true); // (rowids of rolled-back rows are given out again)
      this.records.deleteWhere(() => true); // (a rolled-back put's record is not the row's)
      this.recordBytes.deleteWhere(() => true);
      for (const w of waiting) w.reject(err);
      return;
    } finally {
      this.pendingBlobs.clear();
      this.pendingTaskWrites.clear();
    }
    for (const w of waiting) w.resolve();
  }

  /** The id of a thread's namespace (created on first write; undefined when reading one never written). */
  private nsId(thread: string, ns: string, create: boolean): number | undefined {
    const key = `${thread}\u0000${ns}`;
    const cached = this.nsIds.get(key);
    if (cached !== undefined) return cached;
    let row = this.s.getNs.get(thread, ns) as { ns_id: number } | undefined;
    if (!row && create) {
      this.s.addNs.run(thread, ns);
      row = this.s.getNs.get(thread, ns) as { ns_id: number } | undefined;
    }
    if (row) this.nsIds.set(key, row.ns_id);
    return row?.ns_id;
  }

  // ------------------------------------------------------------------------------------------
  // Encoding

  private async encode(value: unknown): Promise<{ type: string; zip: number; data: Buffer }> {
    const [type, bytes] = await this.serde.dumpsTyped(value);
    const raw = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (raw.length >= this.compressAbove) {
      const packed = deflateRawSync(raw);
      if (packed.length < raw.length) return { type, zip: 1, data: packed };
    }
    return { type, zip: 0, data: Buffer.from(raw) };
  }

  /**
   * A checkpoint record as stored: a delta record deflated with its nearest ancestors' records as
   * dictionary when that is smaller, else as {@link encode} stores values.
   */
  private async encodeRecord(
    nsId: number,
    record: Record<string, unknown>,
    parentId: string | undefined,
  ): Promise<{ type: string; zip: number; data: Buffer; raw: Buffer }> {
    const [type, bytes] = await this.serde.dumpsTyped(record);
    const raw = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let zip = 0;
    let data = raw;
    if (raw.length >= this.compressAbove) {
      const packed = deflateRawSync(raw);
      if (packed.length < raw.length) [zip, data] = [1, packed];
    }
    if ("base" in record && parentId) {
      const raws = (await this.ancestors(nsId, parentId, RECORD_ANCESTORS)).map((a) => a.raw);
      if (raws.length) {
        const dictionary = Buffer.concat([...raws].reverse());
        const packed = deflateRawSync(raw, { dictionary });
        if (5 + packed.length < data.length) {
          const head = Buffer.alloc(5);
          head.writeUInt8(raws.length, 0);
          head.writeUInt32LE(crc32(dictionary), 1);
          [zip, data] = [ZIP_RECORD_ANCESTORS, Buffer.concat([head, packed])];
        }
      }
    }
    return { type, zip, data: zip === 0 ? Buffer.from(raw) : data, raw: Buffer.from(raw) };
  }

  private async decode(type: string, zip: number, data: Buffer | null): Promise<unknown> {
    if (data === null) return undefined;
    const raw = zip ? inflateRawSync(data) : data;
    return this.serde.loadsTyped(type, serialized(type, raw));
  }

  /**
   * Channel versions: the next integer plus a random fraction, so versions stay numbers that
   * increase (as LangGraph compares them) and two forks of one checkpoint never pick the same one.
   */
  override getNextVersion(current: number | string | undefined): number {
    const base =
      typeof current === "number" ? Math.floor(current) : current ? Math.floor(Number(current)) : 0;
    if (!Number.isFinite(base)) throw new Error(`Cannot continue channel version "${current}"`);
    // Six random decimals: short in every checkpoint's version maps, and two forks pick the same
    // version of a channel with a chance of one in a million.
    return base + 1 + randomInt(1, 1_000_000) / 1_000_000;
  }

  // ------------------------------------------------------------------------------------------
  // Channel values

  /** A task's stored writes (sorted by index), or undefined when it has none. */
  private taskWrites(
    nsId: number,
    checkpointId: string,
    taskId: string,
  ): StoredWrite[] | undefined {
    const queued = this.pendingTaskWrites.get(`${nsId}\u0000${checkpointId}\u0000${taskId}`);
    if (queued) return queued;
    const row = this.s.getTaskWrites.get(nsId, checkpointId, taskId) as WritesRow | undefined;
    return row ? this.unpackRow(nsId, row) : undefined;
  }

  private unpackRow(nsId: number, row: WritesRow): StoredWrite[] {
    return unpackWrites(this.rawOf(nsId, row)).sort((a, b) => a.idx - b.idx);
  }

  /** A writes row's packed bytes: as stored, inflated, or inflated with its dictionary rows. */
  private rawOf(nsId: number, row: WritesRow): Buffer {
    if (row.zip === 0) return row.writes;
    if (row.zip === ZIP_ROWID_DICTIONARY) {
      const { rowids, crc, at } = rowidHeader(row.writes);
      // (Rows of a stretch of steps share their dictionary rows: built and checked once.)
      const key = rowids.join(",");
      const build = () => {
        const dictionary = dictionaryOf(rowids.map((rowid) => this.rawOfRowid(nsId, rowid)));
        const built = { dictionary, crc: crc32(dictionary) };
        this.dictionaries.set(key, built);
        return built;
      };
      let known = this.dictionaries.get(key) ?? build();
      if (known.crc !== crc) {
        // Rows this saver cached may have been rewritten or renumbered by another connection to
        // the file (a deleted thread's row ids reused): read them again before giving up.
        this.forgetRawRows((k) => rowids.some((rowid) => k === `#${rowid}`));
        known = build();
      }
      if (known.crc !== crc)
        throw new Error(`IncrementalSqliteSaver: writes stored against a row that changed since`);
      return inflateRawSync(row.writes.subarray(at), { dictionary: known.dictionary });
    }
    if (row.zip !== ZIP_DICTIONARY) return inflateRawSync(row.writes);
    const headerLength = row.writes.readUInt32LE(0);
    const header = JSON.parse(row.writes.toString("utf8", 4, 4 + headerLength)) as DictionaryHeader;
    const raws = header.rows.map(([checkpointId, taskId]) => {
      const key = `${nsId}\u0000${checkpointId}\u0000${taskId}`;
      const cached = this.rawRows.get(key);
      if (cached) return cached;
      const base = this.s.getTaskWrites.get(nsId, checkpointId, taskId) as WritesRow | undefined;
      if (!base || base.zip === ZIP_DICTIONARY || base.zip === ZIP_ROWID_DICTIONARY)
        throw new Error(`IncrementalSqliteSaver: writes stored against a missing row`);
      const raw = this.rawOf(nsId, base);
      this.rawRows.set(key, raw);
      return raw;
    });
    const dictionary = dictionaryOf(raws);
    if (crc32(dictionary) !== header.crc)
      throw new Error(`IncrementalSqliteSaver: writes stored against a row that changed since`);
    return inflateRawSync(row.writes.subarray(4 + headerLength), { dictionary });
  }

  /** Forgets the raw bytes of the writes rows `which` selects (and every dictionary built). */
  private forgetRawRows(which: (key: string) => boolean): void {
    this.rawRows.deleteWhere(which);
    this.dictionaries.deleteWhere(() => true);
  }

  /** The raw bytes of the writes row `rowid` (a dictionary row: stored without a dictionary). */
  private rawOfRowid(nsId: number, rowid: number): Buffer {
    const key = `#${rowid}`;
    const cached = this.rawRows.get(key);
    if (cached) return cached;
    const base = this.s.getWritesByRowid.get(rowid) as WritesRow | undefined;
    if (!base || base.zip === ZIP_DICTIONARY || base.zip === ZIP_ROWID_DICTIONARY)
      throw new Error(`IncrementalSqliteSaver: writes stored against a missing row`);
    const raw = this.rawOf(nsId, base);
    this.rawRows.set(key, raw);
    return raw;
  }

  /**
   * A task's packed writes as stored: deflated with the thread's latest plain rows of earlier
   * checkpoints (any namespace: a sub-agent's rows repeat what its caller wrote) as dictionary when
   * that is clearly smaller (a step's record repeats much of what the steps before it wrote: the
   * model's reply, the action's output), else deflated (or plain). Only plain rows serve as
   * dictionaries, so a read needs at most the rows named in the header. `candidate` is true when
   * the row is stored without a dictionary (the caller offers it once it has its rowid).
   */
  private packForStorage(
    thread: string,
    nsId: number,
    checkpointId: string,
    taskId: string,
    packed: Buffer,
  ): { zip: number; data: Buffer; candidate: boolean } {
    let zip = 0;
    let data = packed;
    // (A row written again replaces what this process knew of it.)
    const plain = (this.plainRows.get(thread) ?? []).filter(
      (r) => !(r.nsId === nsId && r.checkpointId === checkpointId && r.taskId === taskId),
    );
    this.plainRows.set(thread, plain);
    if (packed.length >= this.compressAbove) {
      const zipped = deflateRawSync(packed);
      if (zipped.length < packed.length) [zip, data] = [1, zipped];
      const candidates = plain.filter((r) => !(r.nsId === nsId && r.checkpointId === checkpointId));
      if (candidates.length) {
        const dictionary = dictionaryOf(candidates.map((r) => r.raw));
        const header = Buffer.alloc(5 + 6 * candidates.length);
        header.writeUInt8(candidates.length, 0);
        candidates.forEach((r, i) => header.writeUIntLE(r.rowid, 1 + 6 * i, 6));
        header.writeUInt32LE(crc32(dictionary), 1 + 6 * candidates.length);
        const withDictionary = deflateRawSync(packed, { dictionary });
        if (header.length + withDictionary.length < DICTIONARY_GAIN * data.length)
          return {
            zip: ZIP_ROWID_DICTIONARY,
            data: Buffer.concat([header, withDictionary]),
            candidate: false,
          };
      }
    }
    return { zip, data, candidate: true };
  }

  /** Offers a row just stored without a dictionary as a dictionary for the thread's next rows. */
  private offerDictionary(thread: string, row: PlainWritesRow): void {
    const plain = this.plainRows.get(thread) ?? [];
    plain.push(row);
    this.plainRows.set(thread, plain.slice(-DICTIONARY_ROWS));
  }

  /**
   * Before the writes row of a task is stored again with other bytes: the rows of its thread that
   * were deflated with it as (part of) their dictionary are stored again without one, so none
   * becomes unreadable (a task's row changes when it adds writes after its first ones).
   */
  private releaseDependents(
    thread: string,
    nsId: number,
    checkpointId: string,
    taskId: string,
    packed: Buffer,
  ): void {
    const old = this.s.getTaskWritesRow.get(nsId, checkpointId, taskId) as
      (WritesRow & { rowid: number }) | undefined;
    if (!old || old.zip === ZIP_DICTIONARY || old.zip === ZIP_ROWID_DICTIONARY) return;
    if (this.rawOf(nsId, old).equals(packed)) return;
    const dependents = this.db
      .prepare(
        `SELECT w.row_id AS rowid, w.ns_id, w.task_id, w.task_path, w.zip, w.writes FROM ${T_WRITES} w
         JOIN ${T_NAMESPACES} n ON n.ns_id = w.ns_id
         WHERE n.thread_id = ? AND w.zip IN (${ZIP_DICTIONARY}, ${ZIP_ROWID_DICTIONARY})`,
      )
      .all(thread) as Array<WritesRow & { rowid: number; ns_id: number }>;
    for (const d of dependents) {
      const uses =
        d.zip === ZIP_ROWID_DICTIONARY
          ? rowidHeader(d.writes).rowids.includes(old.rowid)
          : d.ns_id === nsId &&
            (
              JSON.parse(
                d.writes.toString("utf8", 4, 4 + d.writes.readUInt32LE(0)),
              ) as DictionaryHeader
            ).rows.some(([c, t]) => c === checkpointId && t === taskId);
      if (!uses) continue;
      const raw = this.rawOf(d.ns_id, d);
      const zipped = deflateRawSync(raw);
      const smaller = zipped.length < raw.length;
      this.s.setWritesZip.run(smaller ? 1 : 0, smaller ? zipped : raw, d.rowid);
    }
    this.forgetRawRows(
      (k) => k === `#${old.rowid}` || k === `${nsId}\u0000${checkpointId}\u0000${taskId}`,
    );
  }

  /** The values of stored writes, in order (a spread ref contributes the items of its list). */
  private async resolveWrites(nsId: number, refs: { checkpoint: string; refs: WriteRef[] }) {
    const out: unknown[] = [];
    for (const { w, spread } of this.findWrites(nsId, refs)) {
      const value = await this.decode(w.type, 0, w.data);
      if (spread) out.push(...(value as unknown[]));
      else out.push(value);
    }
    return out;
  }

  /** The value of an inline entry of a checkpoint record. */
  private async readInline(nsId: number, entry: InlineValue): Promise<unknown> {
    if (entry[1] === 0) return this.decode("json", 0, Buffer.from(entry[2], "utf8"));
    return (
      await this.resolveWrites(nsId, { checkpoint: entry[2], refs: [[entry[3], entry[4], 0]] })
    )[0];
  }

  /**
   * The inline entry for a blob row about to be written, when it is small enough: a JSON value that
   * is not a list (a list may be the base later versions append to, which must be a row), or a
   * reference to the single write that made such a value.
   */
  private inlineOf(blob: unknown[], value: unknown): InlineValue | undefined {
    if (Array.isArray(value)) return undefined;
    const [, , version, kind, , , , , type, zip, data] = blob as [
      number,
      string,
      string,
      number,
      unknown,
      number,
      number,
      number,
      string,
      number,
      Buffer,
    ];
    if (kind === KIND_FULL && type === "json" && data.length < INLINE_BELOW) {
      const raw = zip ? inflateRawSync(data) : data;
      if (raw.length <= INLINE_RAW_MAX) return [version, 0, raw.toString("utf8")];
    }
    if (kind === KIND_WRITE) {
      const { checkpoint, refs } = JSON.parse(data.toString("utf8")) as {
        checkpoint: string;
        refs: WriteRef[];
      };
      return [version, 1, checkpoint, refs[0]![0], refs[0]![1]];
    }
    return undefined;
  }

  /** The value of a channel at a version (`found` false when no blob exists). */
  private async readBlob(
    nsId: number,
    channel: string,
    version: string,
  ): Promise<{ found: boolean; value?: unknown; row?: BlobRow }> {
    const key = blobKey(nsId, channel, version);
    const row =
      this.pendingBlobs.get(key) ??
      (this.s.getBlob.get(nsId, channel, version) as BlobRow | undefined);
    if (!row) return { found: false };
    if (row.kind === KIND_EMPTY) return { found: true, row };
    const cached = this.values.get(key);
    if (cached !== undefined) return { found: true, value: cached, row };
    let value: unknown;
    if (row.kind === KIND_FULL) value = await this.decode(row.type, row.zip, row.value);
    else if (row.kind === KIND_WRITE) {
      value = (await this.resolveWrites(nsId, JSON.parse(String(row.value))))[0];
    } else return { found: true, value: await this.readAppended(nsId, channel, version, row), row };
    this.values.set(key, value);
    return { found: true, value, row };
  }

  /**
   * The value of a list channel at a version stored as items appended to an earlier one: the chain
   * of appends down to a value that is cached or stored whole is fetched in one query (and the
   * writes its links refer to in another), then the items are added oldest first; every version
   * on the way is cached (list() reads them next).
   */
  private async readAppended(
    nsId: number,
    channel: string,
    version: string,
    first: BlobRow,
  ): Promise<unknown[]> {
    const links: Array<{ version: string; row: BlobRow }> = [{ version, row: first }];
    let fetched: Map<string, BlobRow> | undefined;
    let base: unknown[] | undefined;
    for (;;) {
      const { row } = links.at(-1)!;
      const baseVersion = row.base_version;
      if (baseVersion === null) {
        base = [];
        break;
      }
      const cached = this.values.get(blobKey(nsId, channel, baseVersion));
      if (Array.isArray(cached)) {
        base = cached;
        break;
      }
      let next =
        this.pendingBlobs.get(blobKey(nsId, channel, baseVersion)) ?? fetched?.get(baseVersion);
      if (!next) {
        fetched = this.chainRows(nsId, channel, baseVersion);
        next = fetched.get(baseVersion);
      }
      if (next && (next.kind === KIND_APPEND || next.kind === KIND_APPEND_WRITES)) {
        links.push({ version: baseVersion, row: next });
        continue;
      }
      const whole = next ? await this.readBlob(nsId, channel, baseVersion) : undefined;
      if (!whole?.found || !Array.isArray(whole.value))
        throw new Error(
          `IncrementalSqliteSaver: channel "${channel}" version ${links.at(-1)!.version} grows a version that is missing`,
        );
      base = whole.value;
      break;
    }
    links.reverse();
    const refs = links.map(({ row }) =>
      row.kind === KIND_APPEND_WRITES
        ? (JSON.parse(String(row.value)) as { checkpoint: string; refs: WriteRef[] })
        : undefined,
    );
    const prefetched = this.prefetchWrites(
      nsId,
      refs.flatMap((r) => (r ? [r.checkpoint] : [])),
    );
    // The writes every link refers to, decoded together (one parse for the whole chain).
    const found = links.map((_, i) =>
      refs[i] ? this.findWrites(nsId, refs[i]!, prefetched) : undefined,
    );
    const decoded = await this.decodeWrites(found.flatMap((f) => (f ? f.map((x) => x.w) : [])));
    let at = 0;
    let value = base;
    for (const [i, { version: v, row }] of links.entries()) {
      let tail: unknown[];
      if (row.kind === KIND_APPEND)
        tail = (await this.decode(row.type, row.zip, row.value)) as unknown[];
      else {
        tail = [];
        for (const { spread } of found[i]!) {
          const one = decoded[at++];
          if (spread) tail.push(...(one as unknown[]));
          else tail.push(one);
        }
      }
      value = value.concat(tail);
      this.values.set(blobKey(nsId, channel, v), value);
    }
    return value;
  }

  /** The stored writes `refs` name, in order, with their spread flags. */
  private findWrites(
    nsId: number,
    refs: { checkpoint: string; refs: WriteRef[] },
    prefetched?: Map<string, StoredWrite[]>,
  ): Array<{ w: StoredWrite; spread: 0 | 1 }> {
    return refs.refs.map(([taskId, idx, spread]) => {
      const w = (
        prefetched?.get(`${nsId}\u0000${refs.checkpoint}\u0000${taskId}`) ??
        this.taskWrites(nsId, refs.checkpoint, taskId)
      )?.find((x) => x.idx === idx);
      if (!w)
        throw new Error(`IncrementalSqliteSaver: a stored value refers to a write that is missing`);
      return { w, spread };
    });
  }

  /**
   * The values of stored writes. With LangGraph's JSON serializer, writes of type "json" are
   * parsed as one JSON array (one call instead of one per write: the same values).
   */
  private async decodeWrites(writes: StoredWrite[]): Promise<unknown[]> {
    if (
      writes.length > 1 &&
      this.serde instanceof JsonPlusSerializer &&
      writes.every((w) => w.type === "json" && w.data.length > 0)
    ) {
      const parts: Buffer[] = [OPEN];
      for (const [i, w] of writes.entries()) parts.push(i ? COMMA : EMPTY, w.data);
      parts.push(CLOSE);
      const all = Buffer.concat(parts);
      return (await this.serde.loadsTyped("json", serialized("json", all))) as unknown[];
    }
    return Promise.all(writes.map((w) => this.decode(w.type, 0, w.data)));
  }

  /** The blob rows of a chain of appends from `version` down to (and with) its first other row. */
  private chainRows(nsId: number, channel: string, version: string): Map<string, BlobRow> {
    const rows = this.s.blobChain.all({ ns: nsId, channel, version }) as Array<
      BlobRow & { version: string }
    >;
    return new Map(rows.map((r) => [r.version, r]));
  }

  /** The stored writes of the tasks of these checkpoints, in one query, by task key. */
  private prefetchWrites(nsId: number, checkpointIds: string[]): Map<string, StoredWrite[]> {
    const out = new Map<string, StoredWrite[]>();
    if (checkpointIds.length < 2) return out;
    const rows = this.s.writesOf.all(nsId, JSON.stringify([...new Set(checkpointIds)])) as Array<
      WritesRow & { checkpoint_id: string }
    >;
    for (const row of rows) {
      const key = `${nsId}\u0000${row.checkpoint_id}\u0000${row.task_id}`;
      if (!this.pendingTaskWrites.has(key)) out.set(key, this.unpackRow(nsId, row));
    }
    return out;
  }

  /**
   * References to the parent's task writes whose values, in LangGraph's writes order, are exactly
   * `items` (the same objects; a written list counts as its items), or undefined.
   */
  private writeRefs(
    writes: CachedWrite[] | undefined,
    channel: string,
    items: readonly unknown[],
    single: boolean,
  ): WriteRef[] | undefined {
    const mine = (writes ?? []).filter((w) => w.channel === channel).sort(compareWrites);
    if (!mine.length) return undefined;
    if (single) {
      const last = mine.at(-1)!;
      return last.value === items[0] ? [[last.taskId, last.idx, 0]] : undefined;
    }
    const refs: WriteRef[] = [];
    let at = 0;
    for (const w of mine) {
      if (Array.isArray(w.value)) {
        for (const v of w.value) if (items[at++] !== v) return undefined;
        refs.push([w.taskId, w.idx, 1]);
      } else {
        if (items[at++] !== w.value) return undefined;
        refs.push([w.taskId, w.idx, 0]);
      }
    }
    return at === items.length ? refs : undefined;
  }

  /**
   * The blob row to store `value` of `channel` at `version`, given the version it had in the parent
   * checkpoint and the writes the parent's tasks made: a reference to a write when the value is what
   * one task wrote; the new items only (or references to the writes that added them) when the value
   * is that version's list with items added; else the whole value.
   */
  private async blobFor(
    nsId: number,
    channel: string,
    version: string,
    value: unknown,
    baseVersion: string | undefined,
    parent: { id: string; writes?: CachedWrite[] } | undefined,
  ): Promise<unknown[]> {
    const key = blobKey(nsId, channel, version);
    const refsJson = (refs: WriteRef[]) =>
      Buffer.from(JSON.stringify({ checkpoint: parent!.id, refs }), "utf8");
    if (Array.isArray(value) && baseVersion !== undefined && baseVersion !== version) {
      const base = await this.readBlob(nsId, channel, baseVersion).catch(() => undefined);
      const prev = base?.value;
      if (base?.row && Array.isArray(prev) && prev.length > 0 && prev.length <= value.length) {
        if (await this.isPrefix(prev, value)) {
          const row = base.row;
          const appended = row.kind === KIND_APPEND || row.kind === KIND_APPEND_WRITES;
          const chain = appended ? row.chain + 1 : 1;
          const snapshotItems = appended ? row.snapshot_items : prev.length;
          const sinceSnapshot = value.length - snapshotItems;
          // A full copy again once the chain is long and has added half as many items as the last
          // copy held: copies at sizes growing 1.5x each time keep storage linear (at most 3x the
          // items) and a chain at most a third of the list (a fresh read decodes one row a link).
          if (!(chain >= this.minChain && 2 * sinceSnapshot >= snapshotItems)) {
            const tail = value.slice(prev.length);
            this.values.set(key, value);
            const meta = [baseVersion, chain, value.length, snapshotItems];
            const refs = parent && this.writeRefs(parent.writes, channel, tail, false);
            if (refs && JSON.stringify(tail).length > 128)
              return [
                nsId,
                channel,
                version,
                KIND_APPEND_WRITES,
                ...meta,
                "refs",
                0,
                refsJson(refs),
              ];
            const e = await this.encode(tail);
            return [nsId, channel, version, KIND_APPEND, ...meta, e.type, e.zip, e.data];
          }
        }
      }
    }
    this.values.set(key, value);
    const items = Array.isArray(value) ? value.length : 0;
    const e = await this.encode(value);
    // A reference costs ~100 bytes: worth it only for a larger value. A list that was empty (or
    // absent) before is the writes that made it; another value may be the one write made.
    if (parent && e.data.length > 128) {
      const fresh = baseVersion === undefined || items === 0;
      const list =
        Array.isArray(value) && fresh && this.writeRefs(parent.writes, channel, value, false);
      if (list)
        return [
          nsId,
          channel,
          version,
          KIND_APPEND_WRITES,
          null,
          0,
          items,
          items,
          "refs",
          0,
          refsJson(list),
        ];
      const single = this.writeRefs(parent.writes, channel, [value], true);
      if (single)
        return [
          nsId,
          channel,
          version,
          KIND_WRITE,
          null,
          0,
          items,
          items,
          "refs",
          0,
          refsJson(single),
        ];
    }
    return [nsId, channel, version, KIND_FULL, null, 0, items, items, e.type, e.zip, e.data];
  }

  /** Whether `prev` is the start of `next`: the same objects, else items that serialize the same. */
  private async isPrefix(prev: unknown[], next: unknown[]): Promise<boolean> {
    let same = true;
    for (let i = 0; i < prev.length; i++) {
      if (prev[i] !== next[i]) {
        same = false;
        break;
      }
    }
    if (same) return true;
    const bytes = async (v: unknown) => Buffer.from((await this.serde.dumpsTyped(v))[1]);
    for (let i = 0; i < prev.length; i++) {
      if (!(await bytes(prev[i])).equals(await bytes(next[i]))) return false;
    }
    return true;
  }

  // ------------------------------------------------------------------------------------------
  // Reading

  /** The record of a stored checkpoint row of this saver's tables, decoded (cached). */
  private async recordOf(nsId: number, row: CheckpointRow): Promise<RecordEntry> {
    const key = `${nsId}\u0000${row.checkpoint_id}`;
    const cached = this.records.get(key);
    if (cached) return cached;
    const raw = this.rawRecordOf(nsId, row, false);
    const stored = (await this.serde.loadsTyped(
      row.type ?? "json",
      serialized(row.type ?? "json", raw),
    )) as Record<string, any>;
    const entry = {
      raw,
      stored,
      parentId: row.parent_checkpoint_id,
      whole: stored.base === undefined,
    };
    this.records.set(key, entry);
    return entry;
  }

  /**
   * A checkpoint row's record bytes: as stored, inflated, or inflated with its ancestors' records
   * (from the cache, or with `fromRows` from their rows only).
   */
  private rawRecordOf(
    nsId: number,
    row: CheckpointRow,
    fromRows: boolean,
    seen: { get(id: string): RawRecord | undefined; set(id: string, r: RawRecord): void } = fromRows
      ? new Map<string, RawRecord>()
      : this.rawRecords(nsId),
  ): Buffer {
    if (row.zip !== ZIP_RECORD_ANCESTORS)
      return row.zip ? inflateRawSync(row.checkpoint) : row.checkpoint;
    const count = row.checkpoint.readUInt8(0);
    const raws: Buffer[] = [];
    let id = row.parent_checkpoint_id;
    while (id && raws.length < count) {
      // (Ancestors share ancestors: each is decoded once per read.)
      const known = seen.get(id) ?? (fromRows ? undefined : this.records.get(`${nsId}\u0000${id}`));
      if (known) {
        raws.unshift(known.raw);
        id = known.parentId;
        continue;
      }
      const parent = this.s.getCheckpoint.get(nsId, id) as CheckpointRow | undefined;
      if (!parent) break;
      const raw = this.rawRecordOf(nsId, parent, fromRows, seen);
      seen.set(id, { raw, parentId: parent.parent_checkpoint_id });
      raws.unshift(raw);
      id = parent.parent_checkpoint_id;
    }
    if (raws.length !== count)
      throw new Error(
        `IncrementalSqliteSaver: checkpoint ${row.checkpoint_id} is stored against a missing checkpoint`,
      );
    const dictionary = Buffer.concat(raws);
    if (crc32(dictionary) !== row.checkpoint.readUInt32LE(1))
      throw new Error(
        `IncrementalSqliteSaver: checkpoint ${row.checkpoint_id} is stored against a checkpoint that changed since`,
      );
    return inflateRawSync(row.checkpoint.subarray(5), { dictionary });
  }

  /**
   * Before checkpoint `id` is stored again (its record may change): the records deflated with it
   * in their dictionary (its descendants up to {@link RECORD_ANCESTORS} generations) are stored
   * again without one, so none becomes unreadable.
   */
  private releaseRecordDependents(nsId: number, id: string): void {
    let frontier = [id];
    for (let depth = 0; depth < RECORD_ANCESTORS && frontier.length; depth++) {
      const children = this.db
        .prepare(
          `SELECT c.*, c.ns_id AS ns_id FROM ${T_CHECKPOINTS} c
           WHERE c.ns_id = ? AND c.parent_checkpoint_id IN (SELECT value FROM json_each(?))`,
        )
        .all(nsId, JSON.stringify(frontier)) as CheckpointRow[];
      for (const child of children) {
        if (child.zip !== ZIP_RECORD_ANCESTORS) continue;
        const raw = this.rawRecordOf(nsId, child, true);
        const zipped = deflateRawSync(raw);
        const smaller = zipped.length < raw.length;
        this.s.setCheckpointZip.run(
          smaller ? 1 : 0,
          smaller ? zipped : raw,
          nsId,
          child.checkpoint_id,
        );
      }
      frontier = children.map((c) => c.checkpoint_id);
    }
  }

  /** The cache of decoded record bytes of a namespace, by checkpoint id. */
  private rawRecords(nsId: number) {
    return {
      get: (id: string) => this.recordBytes.get(`${nsId}\u0000${id}`),
      set: (id: string, r: RawRecord) => this.recordBytes.set(`${nsId}\u0000${id}`, r),
    };
  }

  /** The record of checkpoint `id` of a namespace (undefined when there is no such row). */
  private async recordById(nsId: number, id: string): Promise<RecordEntry | undefined> {
    const cached = this.records.get(`${nsId}\u0000${id}`);
    if (cached) return cached;
    this.flush();
    const row = this.s.getCheckpoint.get(nsId, id) as CheckpointRow | undefined;
    return row ? this.recordOf(nsId, row) : undefined;
  }

  /**
   * Up to `count` records from `parentId` back (nearest first), never past the whole record that
   * starts a delta chain (so a record's dictionary never reaches outside its chain).
   */
  private async ancestors(nsId: number, parentId: string | null, count: number) {
    const out: RecordEntry[] = [];
    let id = parentId;
    while (id && out.length < count) {
      const entry = await this.recordById(nsId, id);
      if (!entry) break;
      out.push(entry);
      if (entry.whole) break;
      id = entry.parentId;
    }
    return out;
  }

  /**
   * The whole version maps of a stored checkpoint record: its own, or (delta-encoded, `base` set)
   * its base checkpoint's with its changes applied.
   */
  private async versionsFrom(
    nsId: number,
    id: string,
    stored: Record<string, any>,
    parentId: string | null,
  ): Promise<Versions> {
    // `base`: 1 for the parent (records written since), or the base checkpoint's id (earlier ones).
    const baseId = stored.base === BASE_IS_PARENT ? parentId : stored.base;
    if (typeof baseId !== "string")
      return {
        channel_versions: stored.channel_versions ?? {},
        versions_seen: stored.versions_seen ?? {},
        chain: 0,
        inline: fromStoredInline(stored.iv, stored.channel_versions ?? {}, parentId),
      };
    const key = `${nsId}\u0000${id}`;
    const cached = this.versionMaps.get(key);
    if (cached) return cached;
    const baseRecord = await this.recordById(nsId, baseId);
    if (!baseRecord)
      throw new Error(`IncrementalSqliteSaver: checkpoint ${id} refers to a missing checkpoint`);
    const base = await this.versionsFrom(nsId, baseId, baseRecord.stored, baseRecord.parentId);
    const seen: Record<string, ChannelVersions> = { ...base.versions_seen };
    for (const [node, changed] of Object.entries(
      (stored.vs ?? {}) as Record<string, ChannelVersions>,
    ))
      seen[node] = { ...seen[node], ...changed };
    const versions: Versions = {
      channel_versions: { ...base.channel_versions, ...stored.cv },
      versions_seen: seen,
      chain: base.chain + 1,
      inline: { ...base.inline, ...fromStoredInline(stored.iv, stored.cv ?? {}, parentId) },
    };
    this.versionMaps.set(key, versions);
    return versions;
  }

  /**
   * What a checkpoint row stores besides its values: the checkpoint without its id (the row's key)
   * and, when its parent's maps are known and it only added to them, its version maps as the
   * change from the parent (see {@link MAX_VERSIONS_CHAIN}).
   */
  private storedRecord(
    checkpoint: Omit<Checkpoint, "channel_values">,
    parentId: string | undefined,
    parent: Versions | undefined,
    inline: { added: Record<string, InlineValue>; current: Record<string, InlineValue> },
  ): Record<string, unknown> {
    const { id: _id, channel_versions, versions_seen, ...rest } = checkpoint;
    // A whole record holds every inline value still current; a delta only the ones it adds.
    const iv = (entries: Record<string, InlineValue>) => {
      const keys = Object.keys(entries);
      if (!keys.length) return {};
      return {
        iv: Object.fromEntries(keys.map((k) => [k, toStoredInline(entries[k]!, parentId)])),
      };
    };
    const whole = () => ({ ...rest, channel_versions, versions_seen, ...iv(inline.current) });
    if (
      parentId === undefined ||
      parent === undefined ||
      parent.chain >= MAX_VERSIONS_CHAIN ||
      !keepsKeys(parent.channel_versions, channel_versions) ||
      !keepsKeys(parent.versions_seen, versions_seen)
    )
      return whole();
    const cv: ChannelVersions = {};
    for (const [channel, version] of Object.entries(channel_versions))
      if (parent.channel_versions[channel] !== version) cv[channel] = version;
    const vs: Record<string, ChannelVersions> = {};
    for (const [node, seen] of Object.entries(versions_seen)) {
      const before = parent.versions_seen[node] ?? {};
      if (!keepsKeys(before, seen)) return whole();
      const changed: ChannelVersions = {};
      for (const [channel, version] of Object.entries(seen))
        if (before[channel] !== version) changed[channel] = version;
      if (Object.keys(changed).length || !Object.hasOwn(parent.versions_seen, node))
        vs[node] = changed;
    }
    return {
      ...rest,
      base: BASE_IS_PARENT,
      cv,
      vs,
      ...iv(inline.added),
    };
  }

  private async tupleFromRow(row: CheckpointRow): Promise<CheckpointTuple> {
    const ns = row.checkpoint_ns;
    let checkpoint: Checkpoint;
    let metadata: CheckpointMetadata;
    let pendingWrites: CheckpointPendingWrite[];
    if (row.legacy) {
      checkpoint = (await this.serde.loadsTyped(row.type ?? "json", row.checkpoint)) as Checkpoint;
      metadata = (await this.serde.loadsTyped(
        row.type ?? "json",
        row.metadata,
      )) as CheckpointMetadata;
      const writes = this.s.legacyWrites!.all(row.thread_id, ns, row.checkpoint_id) as Array<{
        task_id: string;
        channel: string;
        type: string | null;
        value: Buffer | null;
      }>;
      pendingWrites = await Promise.all(
        writes.map(
          async (w) =>
            [
              w.task_id,
              w.channel,
              await this.serde.loadsTyped(w.type ?? "json", w.value ?? ""),
            ] as CheckpointPendingWrite,
        ),
      );
    } else {
      const nsId = row.ns_id!;
      const {
        base: _base,
        cv: _cv,
        vs: _vs,
        iv: _iv,
        m: inRecord,
        ...stored
      } = (await this.recordOf(nsId, row)).stored;
      const versions = await this.versionsFrom(
        nsId,
        row.checkpoint_id,
        { base: _base, cv: _cv, vs: _vs, iv: _iv, ...stored },
        row.parent_checkpoint_id,
      );
      stored.id = row.checkpoint_id;
      // Copies: LangGraph changes a loaded checkpoint's maps in place, and these are cached.
      stored.channel_versions = { ...versions.channel_versions };
      stored.versions_seen = structuredClone(versions.versions_seen);
      const channelValues: Record<string, unknown> = {};
      const latest = this.latestValues.get(nsId);
      for (const [channel, version] of Object.entries(stored.channel_versions ?? {})) {
        const known = latest?.get(channel);
        if (known && known.version === String(version)) {
          channelValues[channel] = known.value;
          continue;
        }
        const inline = versions.inline[channel];
        if (inline && inline[0] === String(version)) {
          channelValues[channel] = await this.readInline(nsId, inline);
          continue;
        }
        const blob = await this.readBlob(nsId, channel, String(version));
        if (blob.found && blob.row?.kind !== KIND_EMPTY) channelValues[channel] = blob.value;
      }
      checkpoint = { ...stored, channel_values: channelValues } as Checkpoint;
      metadata =
        row.metadata === METADATA_IN_RECORD
          ? (structuredClone(inRecord) as CheckpointMetadata)
          : ((await this.serde.loadsTyped("json", row.metadata)) as CheckpointMetadata);
      pendingWrites = [];
      for (const w of this.s.getWrites.all(nsId, row.checkpoint_id) as WritesRow[])
        for (const one of this.unpackRow(nsId, w))
          pendingWrites.push([w.task_id, one.channel, await this.decode(one.type, 0, one.data)]);
    }
    if (checkpoint.v < 4 && row.parent_checkpoint_id)
      await this.migratePendingSends(checkpoint, row, row.parent_checkpoint_id);
    return {
      config: {
        configurable: {
          thread_id: row.thread_id,
          checkpoint_ns: ns,
          checkpoint_id: row.checkpoint_id,
        },
      },
      checkpoint,
      metadata,
      ...(row.parent_checkpoint_id
        ? {
            parentConfig: {
              configurable: {
                thread_id: row.thread_id,
                checkpoint_ns: ns,
                checkpoint_id: row.parent_checkpoint_id,
              },
            },
          }
        : {}),
      pendingWrites,
    };
  }

  /** Checkpoints of format v < 4 kept their pending sends in the parent's writes. */
  private async migratePendingSends(
    checkpoint: Checkpoint,
    row: CheckpointRow,
    parentId: string,
  ): Promise<void> {
    const fromNew: unknown[] = [];
    if (row.ns_id !== undefined)
      for (const w of this.s.getWrites.all(row.ns_id, parentId) as WritesRow[])
        for (const one of this.unpackRow(row.ns_id, w))
          if (one.channel === TASKS) fromNew.push(await this.decode(one.type, 0, one.data));
    const sends = fromNew.length
      ? fromNew
      : await Promise.all(
          (
            (this.s.legacySends?.all(row.thread_id, row.checkpoint_ns, parentId) ?? []) as Array<{
              type: string | null;
              value: Buffer | null;
            }>
          ).map((w) => this.serde.loadsTyped(w.type ?? "json", w.value ?? "")),
        );
    checkpoint.channel_values ??= {};
    checkpoint.channel_values[TASKS] = sends;
    checkpoint.channel_versions[TASKS] =
      Object.keys(checkpoint.channel_versions).length > 0
        ? maxChannelVersion(...Object.values(checkpoint.channel_versions))
        : this.getNextVersion(undefined);
  }

  private findRow(thread: string, ns: string, id: string | undefined): CheckpointRow | undefined {
    this.flush();
    const s = this.s;
    const nsId = this.nsId(thread, ns, false);
    if (id) {
      const row =
        nsId === undefined
          ? undefined
          : (s.getCheckpoint.get(nsId, id) as CheckpointRow | undefined);
      if (row) return row;
      const old = s.legacyCheckpoint?.get(thread, ns, id) as CheckpointRow | undefined;
      return old ? { ...old, legacy: true } : undefined;
    }
    const row =
      nsId === undefined ? undefined : (s.latestCheckpoint.get(nsId) as CheckpointRow | undefined);
    const old = s.legacyLatest?.get(thread, ns) as CheckpointRow | undefined;
    if (old && (!row || old.checkpoint_id > row.checkpoint_id)) return { ...old, legacy: true };
    return row;
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const thread = config.configurable?.thread_id as string | undefined;
    if (!thread) return undefined;
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? "";
    const row = this.findRow(thread, ns, getCheckpointId(config) || undefined);
    return row ? this.tupleFromRow(row) : undefined;
  }

  async *list(
    config: RunnableConfig,
    options: CheckpointListOptions = {},
  ): AsyncGenerator<CheckpointTuple> {
    this.flush();
    const { before, limit, filter } = options;
    const wheres: string[] = [];
    const args: unknown[] = [];
    const thread = config.configurable?.thread_id;
    const ns = config.configurable?.checkpoint_ns;
    const id = getCheckpointId(config);
    if (thread) {
      wheres.push("thread_id = ?");
      args.push(thread);
    }
    if (ns !== undefined && ns !== null) {
      wheres.push("checkpoint_ns = ?");
      args.push(ns);
    }
    if (id) {
      wheres.push("checkpoint_id = ?");
      args.push(id);
    }
    if (before?.configurable?.checkpoint_id !== undefined) {
      wheres.push("checkpoint_id < ?");
      args.push(before.configurable.checkpoint_id);
    }
    const filters = Object.entries(filter ?? {}).filter(([, v]) => v !== undefined);
    const legacyWheres = [...wheres];
    const legacyArgs = [...args];
    for (const [key, value] of filters) {
      // Both sides through json_extract: strings, numbers and objects compare as SQLite values.
      // Rows with the metadata in their record are filtered after reading it (below).
      const test = "json_extract(CAST(metadata AS TEXT), ?) IS json_extract(?, '$')";
      wheres.push(`(metadata = '${METADATA_IN_RECORD}' OR ${test})`);
      legacyWheres.push(test);
      for (const a of [args, legacyArgs]) a.push(`$.${JSON.stringify(key)}`, JSON.stringify(value));
    }
    const where = wheres.length ? `WHERE ${wheres.join(" AND ")}` : "";
    const max = limit !== undefined ? Number.parseInt(String(limit), 10) : undefined;
    const lim = max !== undefined ? ` LIMIT ${max}` : "";
    const rows = this.db
      .prepare(
        `SELECT * FROM (${this.s.select}) ${where} ORDER BY checkpoint_id DESC${filters.length ? "" : lim}`,
      )
      .all(...args) as CheckpointRow[];
    const matches = async (row: CheckpointRow) => {
      if (!filters.length || row.legacy || row.metadata !== METADATA_IN_RECORD) return true;
      const metadata = (await this.recordOf(row.ns_id!, row)).stored.m ?? {};
      return filters.every(([key, value]) => sameAsSql(metadata[key], value));
    };
    if (this.s.legacy) {
      const old = this.db
        .prepare(
          `SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata
           FROM ${LEGACY_CHECKPOINTS} ${legacyWheres.length ? `WHERE ${legacyWheres.join(" AND ")}` : ""} ORDER BY checkpoint_id DESC${lim}`,
        )
        .all(...legacyArgs) as CheckpointRow[];
      for (const r of old) rows.push({ ...r, legacy: true });
      rows.sort((a, b) =>
        a.checkpoint_id < b.checkpoint_id ? 1 : a.checkpoint_id > b.checkpoint_id ? -1 : 0,
      );
    }
    let count = 0;
    for (const row of rows) {
      if (max !== undefined && count >= max) break;
      if (!(await matches(row))) continue;
      count++;
      yield await this.tupleFromRow(row);
    }
  }

  // ------------------------------------------------------------------------------------------
  // Writing

  /** The channel versions of a checkpoint (the parent of a put), and whether the official saver wrote it. */
  private async versionsOf(
    thread: string,
    ns: string,
    nsId: number,
    id: string,
  ): Promise<{ versions: Versions; legacy: boolean } | undefined> {
    const last = this.lastPut.get(nsId);
    if (last?.id === id) return { versions: last.versions, legacy: false };
    const row = this.findRow(thread, ns, id);
    if (!row) return undefined;
    if (row.legacy) {
      const cp = (await this.serde.loadsTyped(row.type ?? "json", row.checkpoint)) as Checkpoint;
      return {
        versions: {
          channel_versions: cp.channel_versions ?? {},
          versions_seen: cp.versions_seen ?? {},
          chain: 0,
          inline: {},
        },
        legacy: true,
      };
    }
    const { stored } = await this.recordOf(nsId, row);
    return {
      versions: await this.versionsFrom(nsId, id, stored, row.parent_checkpoint_id),
      legacy: false,
    };
  }

  async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions = {},
  ): Promise<RunnableConfig> {
    if (!config.configurable) throw new Error("Empty configuration supplied.");
    const thread = config.configurable.thread_id as string | undefined;
    if (!thread) throw new Error(`Missing "thread_id" field in passed "config.configurable".`);
    const ns = (config.configurable.checkpoint_ns as string | undefined) ?? "";
    const parentId = config.configurable.checkpoint_id as string | undefined;
    const nsId = this.nsId(thread, ns, true)!;
    const prepared = copyCheckpoint(checkpoint);
    const parent = parentId ? await this.versionsOf(thread, ns, nsId, parentId) : undefined;
    // The channels to store: the changed ones; when continuing from a checkpoint of the official
    // saver (values inside its checkpoint row), every channel, once.
    const toStore = parent?.legacy ? { ...prepared.channel_versions } : newVersions;
    const writes = parentId ? this.writes.get(`${nsId}\u0000${parentId}`) : undefined;
    const blobs: unknown[][] = [];
    // Inline values: the ones this put adds, and every one still current (the parent's that kept
    // their version, plus the added ones).
    const added: Record<string, InlineValue> = {};
    const current: Record<string, InlineValue> = {};
    for (const [channel, entry] of Object.entries(parent?.versions.inline ?? {}))
      if (
        !Object.hasOwn(toStore, channel) &&
        entry[0] === String(prepared.channel_versions[channel])
      )
        current[channel] = entry;
    for (const [channel, version] of Object.entries(toStore)) {
      // An empty channel gets no row: a version without one reads as empty (as KIND_EMPTY rows of
      // earlier versions do), and LangGraph empties a few channels in almost every step.
      if (!Object.hasOwn(prepared.channel_values, channel)) continue;
      const value = prepared.channel_values[channel];
      const blob = await this.blobFor(
        nsId,
        channel,
        String(version),
        value,
        parent?.versions.channel_versions[channel] !== undefined
          ? String(parent.versions.channel_versions[channel])
          : undefined,
        parentId ? { id: parentId, writes } : undefined,
      );
      const inline = this.inlineOf(blob, value);
      if (inline) added[channel] = current[channel] = inline;
      else blobs.push(blob);
    }
    const { channel_values: _values, ...rest } = prepared;
    const record = this.storedRecord(
      rest,
      parentId,
      parent && !parent.legacy ? parent.versions : undefined,
      { added, current },
    );
    // Metadata goes into the record (deflated with it; list() filters such rows after reading).
    record.m = metadata;
    const cp = await this.encodeRecord(nsId, record, parentId);
    const recordKey = `${nsId}\u0000${checkpoint.id}`;
    this.recordBytes.set(recordKey, { raw: cp.raw, parentId: parentId ?? null });
    this.records.deleteWhere((key) => key === recordKey);
    try {
      // (A copy of the metadata: the caller's object may change after put.)
      this.records.set(recordKey, {
        raw: cp.raw,
        stored: { ...record, m: structuredClone(metadata) },
        parentId: parentId ?? null,
        whole: !("base" in record),
      });
    } catch {
      // Metadata structuredClone cannot copy: read back from the row when needed.
    }
    const s = this.s;
    for (const b of blobs) {
      const [, , , kind, base_version, chain, items, snapshot_items, type, zip, value] = b;
      this.pendingBlobs.set(blobKey(nsId, String(b[1]), String(b[2])), {
        kind,
        base_version,
        chain,
        items,
        snapshot_items,
        type,
        zip,
        value,
      } as BlobRow);
    }
    const written = this.enqueue(() => {
      for (const b of blobs) s.putBlob.run(...b);
      if (s.hasCheckpoint.get(nsId, checkpoint.id))
        this.releaseRecordDependents(nsId, checkpoint.id);
      s.putCheckpoint.run(
        nsId,
        checkpoint.id,
        parentId ?? null,
        cp.type,
        cp.data,
        cp.zip,
        METADATA_IN_RECORD,
      );
    });
    const versions: Versions = {
      channel_versions: { ...prepared.channel_versions },
      versions_seen: structuredClone(prepared.versions_seen ?? {}),
      chain: "base" in record ? parent!.versions.chain + 1 : 0,
      inline: current,
    };
    this.lastPut.set(nsId, { id: checkpoint.id, versions });
    this.versionMaps.set(`${nsId}\u0000${checkpoint.id}`, versions);
    // What this put stored, plus the values still current from the previous put (same version);
    // a value the caller passed for a channel it did not list as new was not stored, so it is not
    // served either.
    const previous = this.latestValues.get(nsId);
    const latest = new Map<string, { version: string; value: unknown }>();
    for (const [channel, v] of Object.entries(prepared.channel_versions)) {
      const version = String(v);
      if (Object.hasOwn(toStore, channel)) {
        if (Object.hasOwn(prepared.channel_values, channel))
          latest.set(channel, { version, value: prepared.channel_values[channel] });
      } else {
        const kept = previous?.get(channel);
        if (kept?.version === version) latest.set(channel, kept);
      }
    }
    this.latestValues.set(nsId, latest);
    await written;
    return { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  async putWrites(
    config: RunnableConfig,
    writes: PendingWrite[],
    taskId: string,
    taskPath = "",
  ): Promise<void> {
    if (!config.configurable) throw new Error("Empty configuration supplied.");
    const thread = config.configurable.thread_id;
    const id = config.configurable.checkpoint_id;
    if (!thread) throw new Error("Missing thread_id field in config.configurable.");
    if (!id) throw new Error("Missing checkpoint_id field in config.configurable.");
    const nsId = this.nsId(thread, config.configurable.checkpoint_ns ?? "", true)!;
    // Special writes (errors, interrupts ...) replace what a task wrote at their index; other writes
    // never overwrite one (a re-run task keeps its first writes), as in LangGraph's own savers.
    const replace = writes.every(([channel]) => channel in WRITES_IDX_MAP);
    const encoded = await Promise.all(
      writes.map(async ([channel, value], i) => {
        const [type, bytes] = await this.serde.dumpsTyped(value);
        return {
          idx: WRITES_IDX_MAP[channel] ?? i,
          channel,
          type,
          data: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
          value,
        };
      }),
    );
    const key = `${nsId}\u0000${id}`;
    const cached = this.writes.get(key) ?? [];
    // (A task's row may exist with no writes: it still changes below, and may be a dictionary.)
    const stored = this.taskWrites(nsId, id, taskId);
    const existing = stored ?? [];
    const byIdx = new Map(existing.map((w) => [w.idx, w]));
    for (const w of encoded) {
      if (byIdx.has(w.idx) && !replace) continue;
      byIdx.set(w.idx, w);
      // Only a write this call stored may be referred to by the next checkpoint's values.
      cached.push({ taskPath, taskId, idx: w.idx, channel: w.channel, value: w.value });
    }
    const all = [...byIdx.values()].sort((a, b) => a.idx - b.idx);
    this.pendingTaskWrites.set(`${key}\u0000${taskId}`, all);
    this.writes.set(key, cached);
    const s = this.s;
    await this.enqueue(() => {
      const packed = packWrites(all);
      if (stored) this.releaseDependents(thread, nsId, id, taskId, packed);
      const { zip, data, candidate } = this.packForStorage(thread, nsId, id, taskId, packed);
      const { rowid } = s.putTaskWrites.get(nsId, id, taskId, taskPath, zip, data) as {
        rowid: number;
      };
      this.forgetRawRows((k) => k === `${nsId}\u0000${id}\u0000${taskId}` || k === `#${rowid}`);
      if (candidate)
        this.offerDictionary(thread, { nsId, checkpointId: id, taskId, rowid, raw: packed });
    });
  }

  /**
   * How many checkpoints each thread has in its root namespace (both its own tables and the
   * official saver's), for all threads or one.
   */
  rootCheckpointCounts(threadId?: string): Map<string, number> {
    this.setup();
    this.flush();
    const counts = new Map<string, number>();
    const add = (rows: Array<{ thread_id: string; n: number }>) => {
      for (const r of rows) counts.set(r.thread_id, (counts.get(r.thread_id) ?? 0) + r.n);
    };
    const one = threadId === undefined ? "" : "AND n.thread_id = ?";
    const args = threadId === undefined ? [] : [threadId];
    add(
      this.db
        .prepare(
          `SELECT n.thread_id, count(*) AS n FROM ${T_CHECKPOINTS} c JOIN ${T_NAMESPACES} n ON n.ns_id = c.ns_id
           WHERE n.checkpoint_ns = '' ${one} GROUP BY n.thread_id`,
        )
        .all(...args) as Array<{ thread_id: string; n: number }>,
    );
    if (this.s.legacy)
      add(
        this.db
          .prepare(
            `SELECT thread_id, count(*) AS n FROM ${LEGACY_CHECKPOINTS}
             WHERE checkpoint_ns = '' ${one.replace("n.", "")} GROUP BY thread_id`,
          )
          .all(...args) as Array<{ thread_id: string; n: number }>,
      );
    return counts;
  }

  async deleteThread(threadId: string): Promise<void> {
    this.setup();
    this.flush();
    const ids = (
      this.db
        .prepare(`SELECT ns_id FROM ${T_NAMESPACES} WHERE thread_id = ?`)
        .all(threadId) as Array<{
        ns_id: number;
      }>
    ).map((r) => r.ns_id);
    this.db
      .transaction(() => {
        for (const t of [T_CHECKPOINTS, T_BLOBS, T_WRITES])
          for (const nsId of ids) this.db.prepare(`DELETE FROM ${t} WHERE ns_id = ?`).run(nsId);
        this.db.prepare(`DELETE FROM ${T_NAMESPACES} WHERE thread_id = ?`).run(threadId);
        if (this.s.legacy) {
          this.db.prepare(`DELETE FROM ${LEGACY_CHECKPOINTS} WHERE thread_id = ?`).run(threadId);
          this.db.prepare(`DELETE FROM ${LEGACY_WRITES} WHERE thread_id = ?`).run(threadId);
        }
      })
      .immediate();
    for (const nsId of ids) {
      this.lastPut.delete(nsId);
      this.versionMaps.deleteWhere((key) => key.startsWith(`${nsId}\u0000`));
      this.records.deleteWhere((key) => key.startsWith(`${nsId}\u0000`));
      this.recordBytes.deleteWhere((key) => key.startsWith(`${nsId}\u0000`));
      this.forgetRawRows((key) => key.startsWith(`${nsId}\u0000`));
      this.latestValues.deleteWhere((key) => key === nsId);
      this.values.deleteWhere((key) => key.startsWith(`${nsId}\u0000`));
      this.writes.deleteWhere((key) => key.startsWith(`${nsId}\u0000`));
    }
    for (const key of [...this.nsIds.keys()])
      if (key.startsWith(`${threadId}\u0000`)) this.nsIds.delete(key);
    this.plainRows.deleteWhere((key) => key === threadId);
    this.forgetRawRows((key) => key.startsWith("#"));
  }
}
