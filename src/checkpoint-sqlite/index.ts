/**
 * IncrementalSqliteSaver: a LangGraph checkpointer for SQLite whose storage grows linearly with the
 * steps of a thread. See README.md in this folder. This folder imports nothing of codehop: only
 * LangGraph's checkpoint package, better-sqlite3 and Node's own modules.
 */
import { randomInt } from "node:crypto";
import { deflateRawSync, inflateRawSync } from "node:zlib";
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
  copyCheckpoint,
  getCheckpointId,
  maxChannelVersion,
} from "@langchain/langgraph-checkpoint";
import Database from "better-sqlite3";

/** Options of {@link IncrementalSqliteSaver}. */
export interface IncrementalSqliteSaverOptions {
  /** Serializer (default: LangGraph's JsonPlusSerializer). */
  serde?: SerializerProtocol;
  /** Values (blobs, writes, checkpoints) at least this large are stored deflated. Default 256 bytes. */
  compressAbove?: number;
  /** A list appended this many times in a row is stored whole once more (bounds reads). Default 16. */
  minChainBeforeSnapshot?: number;
  /** Decoded channel values kept in memory for appends and reads. Default 512. */
  cacheSize?: number;
}

/** How a blob row encodes its channel value. */
const KIND_FULL = 0;
const KIND_APPEND = 1;
const KIND_EMPTY = 2;

const T_CHECKPOINTS = "lgi_checkpoints";
const T_BLOBS = "lgi_blobs";
const T_WRITES = "lgi_writes";
/** The official SqliteSaver's tables (read in place, deleted with their thread). */
const LEGACY_CHECKPOINTS = "checkpoints";
const LEGACY_WRITES = "writes";

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
  legacy?: boolean;
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

const blobKey = (thread: string, ns: string, channel: string, version: string) =>
  `${thread}\u0000${ns}\u0000${channel}\u0000${version}`;

/**
 * A LangGraph checkpointer for SQLite that writes a channel's value only when its version changes
 * (the `newVersions` of `put`), stores a list that only grew as the items it gained (with a full
 * copy from time to time, geometrically spaced, so reads stay short and storage stays linear), and
 * deflates large values. Channel versions are numbers with a random fraction, so two forks of a
 * thread never store different values under the same version.
 *
 * Opens databases written by the official `SqliteSaver` (@langchain/langgraph-checkpoint-sqlite):
 * their `checkpoints` / `writes` tables are read in place, a thread continued from one of their
 * checkpoints is written in the new tables, and `deleteThread` removes both.
 *
 * Values are treated as immutable, as LangGraph's reducers treat them: a list is recognised as
 * grown when its first items are the very objects of the version it grew from (or, after a restart,
 * serialize the same).
 */
export class IncrementalSqliteSaver extends BaseCheckpointSaver {
  /** Tables holding checkpoint rows (thread_id, checkpoint_ns, checkpoint_id): its own, then the official saver's. */
  static readonly CHECKPOINT_TABLES: readonly string[] = [T_CHECKPOINTS, LEGACY_CHECKPOINTS];
  readonly db: Database.Database;
  private readonly compressAbove: number;
  private readonly minChain: number;
  private readonly values: Lru<string, unknown>;
  /** Latest checkpoint put per thread and namespace: its id and channel versions (saves a read per put). */
  private readonly lastPut = new Map<string, { id: string; versions: ChannelVersions }>();
  private statements?: ReturnType<IncrementalSqliteSaver["prepare"]>;

  /**
   * @param db an open better-sqlite3 database (shared with other tables is fine), or a file path
   */
  constructor(db: Database.Database | string, options: IncrementalSqliteSaverOptions = {}) {
    super(options.serde);
    this.db = typeof db === "string" ? new Database(db) : db;
    this.compressAbove = options.compressAbove ?? 256;
    this.minChain = options.minChainBeforeSnapshot ?? 16;
    this.values = new Lru(options.cacheSize ?? 512);
  }

  /** A saver on a database file (WAL, synchronous=NORMAL, busy timeout 5 s). */
  static fromConnString(path: string, options: IncrementalSqliteSaverOptions = {}) {
    const db = new Database(path);
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = NORMAL");
    db.pragma("busy_timeout = 5000");
    return new IncrementalSqliteSaver(db, options);
  }

  /** Creates the tables (idempotent; runs on first use). */
  setup(): void {
    if (this.statements) return;
    this.db.exec(`
CREATE TABLE IF NOT EXISTS ${T_CHECKPOINTS} (
  thread_id TEXT NOT NULL,
  checkpoint_ns TEXT NOT NULL DEFAULT '',
  checkpoint_id TEXT NOT NULL,
  parent_checkpoint_id TEXT,
  type TEXT NOT NULL,
  checkpoint BLOB NOT NULL,
  zip INTEGER NOT NULL,
  metadata TEXT NOT NULL,
  PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);
CREATE TABLE IF NOT EXISTS ${T_BLOBS} (
  thread_id TEXT NOT NULL,
  checkpoint_ns TEXT NOT NULL DEFAULT '',
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
  PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
);
CREATE TABLE IF NOT EXISTS ${T_WRITES} (
  thread_id TEXT NOT NULL,
  checkpoint_ns TEXT NOT NULL DEFAULT '',
  checkpoint_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  channel TEXT NOT NULL,
  task_path TEXT NOT NULL DEFAULT '',
  type TEXT NOT NULL,
  zip INTEGER NOT NULL,
  value BLOB,
  PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);`);
    this.statements = this.prepare();
  }

  private hasTable(name: string): boolean {
    return !!this.db
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?")
      .get(name);
  }

  private prepare() {
    const legacy = this.hasTable(LEGACY_CHECKPOINTS) && this.hasTable(LEGACY_WRITES);
    const cols = `thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, zip, metadata`;
    return {
      legacy,
      getCheckpoint: this.db.prepare(
        `SELECT ${cols} FROM ${T_CHECKPOINTS} WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?`,
      ),
      latestCheckpoint: this.db.prepare(
        `SELECT ${cols} FROM ${T_CHECKPOINTS} WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1`,
      ),
      putCheckpoint: this.db.prepare(
        `INSERT OR REPLACE INTO ${T_CHECKPOINTS} (${cols}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      getBlob: this.db.prepare(
        `SELECT kind, base_version, chain, items, snapshot_items, type, zip, value FROM ${T_BLOBS}
         WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? AND version = ?`,
      ),
      putBlob: this.db.prepare(
        `INSERT OR REPLACE INTO ${T_BLOBS}
         (thread_id, checkpoint_ns, channel, version, kind, base_version, chain, items, snapshot_items, type, zip, value)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      getWrites: this.db.prepare(
        `SELECT task_id, channel, type, zip, value FROM ${T_WRITES}
         WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?
         ORDER BY task_path, task_id, idx`,
      ),
      getSends: this.db.prepare(
        `SELECT type, zip, value FROM ${T_WRITES}
         WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? AND channel = '${TASKS}'
         ORDER BY task_path, task_id, idx`,
      ),
      putWriteReplace: this.db.prepare(
        `INSERT OR REPLACE INTO ${T_WRITES}
         (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, zip, value)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      putWriteIgnore: this.db.prepare(
        `INSERT OR IGNORE INTO ${T_WRITES}
         (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, zip, value)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      legacyCheckpoint: legacy
        ? this.db.prepare(
            `SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata
             FROM ${LEGACY_CHECKPOINTS} WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?`,
          )
        : undefined,
      legacyLatest: legacy
        ? this.db.prepare(
            `SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata
             FROM ${LEGACY_CHECKPOINTS} WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1`,
          )
        : undefined,
      legacyWrites: legacy
        ? this.db.prepare(
            `SELECT task_id, channel, type, value FROM ${LEGACY_WRITES}
             WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? ORDER BY task_id, idx`,
          )
        : undefined,
      legacySends: legacy
        ? this.db.prepare(
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

  private async decode(type: string, zip: number, data: Buffer | null): Promise<unknown> {
    if (data === null) return undefined;
    const raw = zip ? inflateRawSync(data) : data;
    return this.serde.loadsTyped(type, new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength));
  }

  /**
   * Channel versions: the next integer plus a random fraction, so versions stay numbers that
   * increase (as LangGraph compares them) and two forks of one checkpoint never pick the same one.
   */
  override getNextVersion(current: number | string | undefined): number {
    const base =
      typeof current === "number" ? Math.floor(current) : current ? Math.floor(Number(current)) : 0;
    if (!Number.isFinite(base)) throw new Error(`Cannot continue channel version "${current}"`);
    return base + 1 + randomInt(1, 2 ** 30) / 2 ** 30;
  }

  // ------------------------------------------------------------------------------------------
  // Channel values

  /** The value of a channel at a version (undefined when no blob exists or it is empty). */
  private async readBlob(
    thread: string,
    ns: string,
    channel: string,
    version: string,
  ): Promise<{ found: boolean; value?: unknown; row?: BlobRow }> {
    const key = blobKey(thread, ns, channel, version);
    const cached = this.values.get(key);
    const row = this.s.getBlob.get(thread, ns, channel, version) as BlobRow | undefined;
    if (!row) return { found: false };
    if (row.kind === KIND_EMPTY) return { found: true, row };
    if (cached !== undefined) return { found: true, value: cached, row };
    let value: unknown;
    if (row.kind === KIND_FULL) value = await this.decode(row.type, row.zip, row.value);
    else {
      const base = await this.readBlob(thread, ns, channel, row.base_version!);
      if (!base.found || !Array.isArray(base.value))
        throw new Error(
          `IncrementalSqliteSaver: channel "${channel}" version ${version} of thread "${thread}" grows a version that is missing`,
        );
      const tail = (await this.decode(row.type, row.zip, row.value)) as unknown[];
      value = [...base.value, ...tail];
    }
    this.values.set(key, value);
    return { found: true, value, row };
  }

  /**
   * The blob row to store `value` of `channel` at `version`, given the version it had in the parent
   * checkpoint: the new items only when the value is that version's list with items added, else the
   * whole value.
   */
  private async blobFor(
    thread: string,
    ns: string,
    channel: string,
    version: string,
    value: unknown,
    present: boolean,
    baseVersion: string | undefined,
  ): Promise<unknown[]> {
    if (!present)
      return [thread, ns, channel, version, KIND_EMPTY, null, 0, 0, 0, "empty", 0, null];
    if (Array.isArray(value) && baseVersion !== undefined && baseVersion !== version) {
      const base = await this.readBlob(thread, ns, channel, baseVersion).catch(() => undefined);
      const prev = base?.value;
      if (base?.row && Array.isArray(prev) && prev.length > 0 && prev.length <= value.length) {
        if (await this.isPrefix(prev, value)) {
          const row = base.row;
          const chain = row.kind === KIND_APPEND ? row.chain + 1 : 1;
          const snapshotItems = row.kind === KIND_APPEND ? row.snapshot_items : prev.length;
          const sinceSnapshot = value.length - snapshotItems;
          // A full copy again once the chain is long and has added as many items as the last copy
          // held: copies at geometrically growing sizes keep storage linear and reads short.
          if (!(chain >= this.minChain && sinceSnapshot >= snapshotItems)) {
            const tail = value.slice(prev.length);
            const e = await this.encode(tail);
            this.values.set(blobKey(thread, ns, channel, version), value);
            return [
              thread,
              ns,
              channel,
              version,
              KIND_APPEND,
              baseVersion,
              chain,
              value.length,
              snapshotItems,
              e.type,
              e.zip,
              e.data,
            ];
          }
        }
      }
    }
    const e = await this.encode(value);
    this.values.set(blobKey(thread, ns, channel, version), value);
    const items = Array.isArray(value) ? value.length : 0;
    return [thread, ns, channel, version, KIND_FULL, null, 0, items, items, e.type, e.zip, e.data];
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
      const stored = (await this.decode(row.type ?? "json", row.zip, row.checkpoint)) as Omit<
        Checkpoint,
        "channel_values"
      >;
      const channelValues: Record<string, unknown> = {};
      for (const [channel, version] of Object.entries(stored.channel_versions ?? {})) {
        const blob = await this.readBlob(row.thread_id, ns, channel, String(version));
        if (blob.found && blob.row?.kind !== KIND_EMPTY) channelValues[channel] = blob.value;
      }
      checkpoint = { ...stored, channel_values: channelValues } as Checkpoint;
      metadata = (await this.serde.loadsTyped("json", row.metadata)) as CheckpointMetadata;
      const writes = this.s.getWrites.all(row.thread_id, ns, row.checkpoint_id) as Array<{
        task_id: string;
        channel: string;
        type: string;
        zip: number;
        value: Buffer | null;
      }>;
      pendingWrites = await Promise.all(
        writes.map(
          async (w) =>
            [
              w.task_id,
              w.channel,
              await this.decode(w.type, w.zip, w.value),
            ] as CheckpointPendingWrite,
        ),
      );
    }
    if (checkpoint.v < 4 && row.parent_checkpoint_id)
      await this.migratePendingSends(checkpoint, row.thread_id, ns, row.parent_checkpoint_id);
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
    thread: string,
    ns: string,
    parentId: string,
  ): Promise<void> {
    const fromNew = this.s.getSends.all(thread, ns, parentId) as Array<{
      type: string;
      zip: number;
      value: Buffer | null;
    }>;
    const sends = fromNew.length
      ? await Promise.all(fromNew.map((w) => this.decode(w.type, w.zip, w.value)))
      : await Promise.all(
          (
            (this.s.legacySends?.all(thread, ns, parentId) ?? []) as Array<{
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
    const s = this.s;
    if (id) {
      const row = s.getCheckpoint.get(thread, ns, id) as CheckpointRow | undefined;
      if (row) return row;
      const old = s.legacyCheckpoint?.get(thread, ns, id) as CheckpointRow | undefined;
      return old ? { ...old, legacy: true } : undefined;
    }
    const row = s.latestCheckpoint.get(thread, ns) as CheckpointRow | undefined;
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
    for (const [key, value] of filters) {
      // Both sides through json_extract: strings, numbers and objects compare as SQLite values.
      wheres.push("json_extract(metadata, ?) IS json_extract(?, '$')");
      args.push(`$.${JSON.stringify(key)}`, JSON.stringify(value));
    }
    const where = wheres.length ? `WHERE ${wheres.join(" AND ")}` : "";
    const max = limit !== undefined ? Number.parseInt(String(limit), 10) : undefined;
    const lim = max !== undefined ? ` LIMIT ${max}` : "";
    const rows = this.db
      .prepare(
        `SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, zip, metadata
         FROM ${T_CHECKPOINTS} ${where} ORDER BY checkpoint_id DESC${lim}`,
      )
      .all(...args) as CheckpointRow[];
    if (this.s.legacy) {
      const old = this.db
        .prepare(
          `SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata
           FROM ${LEGACY_CHECKPOINTS} ${where.replace(/json_extract\(metadata, \?\)/g, "json_extract(CAST(metadata AS TEXT), ?)")} ORDER BY checkpoint_id DESC${lim}`,
        )
        .all(...args) as CheckpointRow[];
      for (const r of old) rows.push({ ...r, legacy: true });
      rows.sort((a, b) =>
        a.checkpoint_id < b.checkpoint_id ? 1 : a.checkpoint_id > b.checkpoint_id ? -1 : 0,
      );
    }
    let count = 0;
    for (const row of rows) {
      if (max !== undefined && count >= max) break;
      count++;
      yield await this.tupleFromRow(row);
    }
  }

  // ------------------------------------------------------------------------------------------
  // Writing

  /** The channel versions of a thread's checkpoint (the parent of a put). */
  private async versionsOf(
    thread: string,
    ns: string,
    id: string,
  ): Promise<{ versions: ChannelVersions; legacy: boolean } | undefined> {
    const last = this.lastPut.get(`${thread}\u0000${ns}`);
    if (last?.id === id) return { versions: last.versions, legacy: false };
    const row = this.findRow(thread, ns, id);
    if (!row) return undefined;
    if (row.legacy) {
      const cp = (await this.serde.loadsTyped(row.type ?? "json", row.checkpoint)) as Checkpoint;
      return { versions: cp.channel_versions ?? {}, legacy: true };
    }
    const stored = (await this.decode(row.type ?? "json", row.zip, row.checkpoint)) as Checkpoint;
    return { versions: stored.channel_versions ?? {}, legacy: false };
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
    const prepared = copyCheckpoint(checkpoint);
    const parent = parentId ? await this.versionsOf(thread, ns, parentId) : undefined;
    // The channels to store: the changed ones; when continuing from a checkpoint of the official
    // saver (values inside its checkpoint row), every channel, once.
    const toStore = parent?.legacy ? { ...prepared.channel_versions } : newVersions;
    const blobs: unknown[][] = [];
    for (const [channel, version] of Object.entries(toStore)) {
      const present = Object.hasOwn(prepared.channel_values, channel);
      blobs.push(
        await this.blobFor(
          thread,
          ns,
          channel,
          String(version),
          prepared.channel_values[channel],
          present,
          parent?.versions[channel] !== undefined ? String(parent.versions[channel]) : undefined,
        ),
      );
    }
    const { channel_values: _values, ...rest } = prepared;
    const cp = await this.encode(rest);
    // Metadata stays plain JSON text: list() filters on it in SQL.
    const [, metaBytes] = await this.serde.dumpsTyped(metadata);
    const metaText = Buffer.from(metaBytes).toString("utf8");
    const s = this.s;
    this.db.transaction(() => {
      for (const b of blobs) s.putBlob.run(...b);
      s.putCheckpoint.run(
        thread,
        ns,
        checkpoint.id,
        parentId ?? null,
        cp.type,
        cp.data,
        cp.zip,
        metaText,
      );
    })();
    this.lastPut.set(`${thread}\u0000${ns}`, {
      id: checkpoint.id,
      versions: { ...prepared.channel_versions },
    });
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
    const ns = config.configurable.checkpoint_ns ?? "";
    const allSpecial = writes.every(([channel]) => channel in WRITES_IDX_MAP);
    const stmt = allSpecial ? this.s.putWriteReplace : this.s.putWriteIgnore;
    const rows = await Promise.all(
      writes.map(async ([channel, value], idx) => {
        const e = await this.encode(value);
        return [
          thread,
          ns,
          id,
          taskId,
          WRITES_IDX_MAP[channel] ?? idx,
          channel,
          taskPath,
          e.type,
          e.zip,
          e.data,
        ];
      }),
    );
    this.db.transaction(() => {
      for (const r of rows) stmt.run(...r);
    })();
  }

  async deleteThread(threadId: string): Promise<void> {
    this.setup();
    this.db.transaction(() => {
      for (const t of [T_CHECKPOINTS, T_BLOBS, T_WRITES])
        this.db.prepare(`DELETE FROM ${t} WHERE thread_id = ?`).run(threadId);
      if (this.s.legacy) {
        this.db.prepare(`DELETE FROM ${LEGACY_CHECKPOINTS} WHERE thread_id = ?`).run(threadId);
        this.db.prepare(`DELETE FROM ${LEGACY_WRITES} WHERE thread_id = ?`).run(threadId);
      }
    })();
    for (const key of [...this.lastPut.keys()])
      if (key.startsWith(`${threadId}\u0000`)) this.lastPut.delete(key);
    this.values.deleteWhere((key) => key.startsWith(`${threadId}\u0000`));
  }
}
