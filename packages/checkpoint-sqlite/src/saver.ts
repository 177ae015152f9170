/**
 * IncrementalSqliteSaver: the checkpointer LangGraph calls. It queues the rows of puts and
 * putWrites (write-queue.ts) and reads checkpoints back (tuples.ts: its own tables, and the
 * official SqliteSaver's in place). How rows are laid out and encoded is in the other files of
 * this folder: schema.ts (tables, formats, conversions), codec.ts (values as bytes), records.ts
 * (checkpoint records and their version-map chains), chains.ts (channel values and their chains of
 * appends), dictionaries.ts (rows deflated against other rows).
 * queries.ts holds the queries over many rows, verify.ts the check of every row of a thread.
 */
import { randomInt } from "node:crypto";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
  WRITES_IDX_MAP,
  copyCheckpoint,
  getCheckpointId,
} from "@langchain/langgraph-checkpoint";
import Database from "better-sqlite3";
import { ChannelValues } from "./chains.ts";
import { Codec, packWrites, type CachedWrite, type InlineValue } from "./codec.ts";
import { CheckpointCorruptError, DEFAULT_MAX_INFLATE_BYTES } from "./corrupt.ts";
import type { SaverContext } from "./context.ts";
import { WriteRows } from "./dictionaries.ts";
import { Lru } from "./lru.ts";
import { Records, storedRecord, type Versions } from "./records.ts";
import { TupleReader } from "./tuples.ts";
import { deleteThreadRows, listedRows, sameAsSql, threadIds } from "./queries.ts";
import { countRootCheckpoints } from "./thread-counts.ts";
import { verifyThread } from "./verify.ts";
import { WriteQueue } from "./write-queue.ts";
import { METADATA_IN_RECORD, openTables, type CheckpointRow, type Statements } from "./schema.ts";

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
  /**
   * Stored deflated bytes inflate to at most this many bytes (and never to more than deflate can
   * make of their length): a deflate bomb in a damaged or crafted file stops there, as a
   * CheckpointCorruptError. A value larger than this is stored plain, so the bound never refuses
   * what the saver wrote. Default 64 MiB.
   */
  maxInflateBytes?: number;
}

/** list() reads the pending writes of this many checkpoints in one statement. */
const READ_AHEAD = 64;

/** Runs a read of `thread`; a corruption error it raises names the thread. */
async function inThread<T>(thread: string, read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    throw CheckpointCorruptError.isInstance(err) ? err.inThread(thread) : err;
  }
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
  private readonly codec: Codec;
  private readonly writeRows: WriteRows;
  private readonly channels: ChannelValues;
  private readonly records: Records;
  /** Task writes stored by this process, by namespace id and checkpoint id (the parent of the next put). */
  private readonly writes: Lru<string, CachedWrite[]>;
  /** Latest checkpoint put per namespace id: its id and channel versions (saves a read per put). */
  private readonly lastPut = new Map<number, { id: string; versions: Versions }>();
  /**
   * The channel values of the latest checkpoint put per namespace id, by channel: version and
   * value. Reading the latest state (every invoke, every resume) is served from here even after a
   * long list() has cycled the value cache.
   */
  private readonly latestValues = new Lru<number, Map<string, { version: string; value: unknown }>>(
    64,
  );
  private readonly nsIds = new Map<string, number>();
  private statements?: Statements;
  /** The rows of puts and putWrites not written yet (written together, one commit). */
  private readonly queue: WriteQueue;
  private readonly reader: TupleReader;
  private readonly ctx: SaverContext;

  /**
   * @param db an open better-sqlite3 database (shared with other tables is fine), or a file path
   */
  constructor(db: Database.Database | string, options: IncrementalSqliteSaverOptions = {}) {
    super(options.serde);
    this.db = typeof db === "string" ? new Database(db) : db;
    this.compressAbove = options.compressAbove ?? 128;
    this.writes = new Lru(64);
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const saver = this;
    const ctx: SaverContext = (this.ctx = {
      db: this.db,
      get s() {
        return saver.s;
      },
      flush: () => this.flush(),
    });
    const serde = () => this.serde;
    this.codec = new Codec(
      serde,
      this.compressAbove,
      options.maxInflateBytes ?? DEFAULT_MAX_INFLATE_BYTES,
    );
    this.writeRows = new WriteRows(ctx, this.codec);
    this.records = new Records(ctx, serde, this.codec);
    this.channels = new ChannelValues(
      ctx,
      serde,
      this.codec,
      this.writeRows,
      options.cacheSize ?? 512,
      options.minChainBeforeSnapshot ?? 16,
    );
    this.queue = new WriteQueue(this.db, {
      // The rolled-back rows were offered as dictionaries while the batch was packed: a later row
      // deflated against one of them could never be read. Forget every candidate (and every
      // record: a rolled-back put's record is not the row's).
      rolledBack: () => {
        this.writeRows.forgetAll();
        this.records.forgetAll();
      },
      settled: () => {
        this.channels.pending.clear();
        this.writeRows.pending.clear();
      },
    });
    this.reader = new TupleReader({
      get s() {
        return saver.s;
      },
      serde,
      codec: this.codec,
      records: this.records,
      channels: this.channels,
      writeRows: this.writeRows,
      latestValues: this.latestValues,
      nextVersion: () => this.getNextVersion(undefined),
    });
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
    this.statements = openTables(this.db, this.codec);
  }

  private get s() {
    this.setup();
    return this.statements!;
  }

  /**
   * Writes every queued put and putWrites now, in one IMMEDIATE transaction (reads call it first,
   * so they always see what was put). Callers closing the database themselves call it before.
   */
  flush(): void {
    this.queue.flush();
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
  // Reading

  /**
   * The checkpoint row `id` of a namespace, or its latest, of this saver's tables or of the
   * official saver's. (A fresh saver's ancestors' rows, which reading a record needs, are read
   * one statement each: measured, one recursive CTE for the row and its ancestors costs more to
   * prepare than the ten small lookups it saves.)
   */
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
    return inThread(thread, async () => {
      const row = this.findRow(thread, ns, getCheckpointId(config) || undefined);
      return row ? this.reader.tupleFromRow(row) : undefined;
    });
  }

  async *list(
    config: RunnableConfig,
    options: CheckpointListOptions = {},
  ): AsyncGenerator<CheckpointTuple> {
    this.flush();
    const { rows, filters, max } = listedRows(this.db, this.s, config, options);
    // (Their ancestors, whose records reading them needs, are mostly among them.)
    this.records.prime(rows);
    const matches = async (row: CheckpointRow) => {
      if (!filters.length || row.legacy || row.metadata !== METADATA_IN_RECORD) return true;
      const metadata = (await this.records.recordOf(row.ns_id!, row)).stored.m ?? {};
      return filters.every(([key, value]) => sameAsSql(metadata[key], value));
    };
    let count = 0;
    try {
      for (const [i, row] of rows.entries()) {
        if (max !== undefined && count >= max) break;
        if (!(await inThread(row.thread_id, () => matches(row)))) continue;
        count++;
        if (!row.legacy && !this.writeRows.hasAhead(row.ns_id!, row.checkpoint_id)) {
          // The pending writes of this row and of the next ones of its namespace, in one statement.
          const next = rows
            .slice(i, i + READ_AHEAD)
            .filter((r) => !r.legacy && r.ns_id === row.ns_id)
            .map((r) => r.checkpoint_id);
          this.writeRows.readAhead(row.ns_id!, next);
        }
        yield await inThread(row.thread_id, () => this.reader.tupleFromRow(row));
      }
    } finally {
      this.writeRows.forgetAhead();
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
    const { stored } = await this.records.recordOf(nsId, row);
    return {
      versions: await this.records.versionsFrom(nsId, id, stored, row.parent_checkpoint_id),
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
    const parent = parentId
      ? await inThread(thread, () => this.versionsOf(thread, ns, nsId, parentId))
      : undefined;
    // The channels to store: the changed ones; when continuing from a checkpoint of the official
    // saver (values inside its checkpoint row), every channel, once.
    const toStore = parent?.legacy ? { ...prepared.channel_versions } : newVersions;
    const writes = parentId ? this.writes.get(`${nsId}\u0000${parentId}`) : undefined;
    const blobs: unknown[][] = [];
    // Inline values: every one still current (the parent's that kept their version, plus the ones
    // this put adds).
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
      const blob = await this.channels.blobFor(
        nsId,
        channel,
        String(version),
        value,
        parent?.versions.channel_versions[channel] !== undefined
          ? String(parent.versions.channel_versions[channel])
          : undefined,
        parentId ? { id: parentId, writes } : undefined,
      );
      const inline = this.channels.inlineOf(blob, value);
      if (inline) current[channel] = inline;
      else blobs.push(blob);
    }
    const { channel_values: _values, ...rest } = prepared;
    const record = storedRecord(rest, parentId, current);
    // Metadata goes into the record (deflated with it; list() filters such rows after reading).
    record.m = metadata;
    const cp = await inThread(thread, () => this.records.encode(nsId, record, parentId));
    this.records.remember(
      nsId,
      checkpoint.id,
      {
        raw: cp.raw,
        stored: record,
        parentId: parentId ?? null,
        alone: cp.zip === 0 || cp.zip === 1,
        ...(cp.keyframe ? { keyframe: cp.keyframe } : {}),
      },
      metadata,
    );
    const s = this.s;
    for (const b of blobs) this.channels.queue(nsId, b);
    const written = this.queue.enqueue(() => {
      for (const b of blobs) s.putBlob.run(...b);
      if (s.hasCheckpoint.get(nsId, checkpoint.id))
        this.records.releaseDependents(nsId, checkpoint.id);
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
      chain: 0,
      inline: current,
    };
    this.lastPut.set(nsId, { id: checkpoint.id, versions });
    this.records.rememberVersions(nsId, checkpoint.id, versions);
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
    // (Rows a list() read ahead may change now.)
    this.writeRows.forgetAhead();
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
    const stored = await inThread(thread, async () => this.writeRows.taskWrites(nsId, id, taskId));
    const existing = stored ?? [];
    const byIdx = new Map(existing.map((w) => [w.idx, w]));
    for (const w of encoded) {
      if (byIdx.has(w.idx) && !replace) continue;
      byIdx.set(w.idx, w);
      // Only a write this call stored may be referred to by the next checkpoint's values.
      cached.push({ taskPath, taskId, idx: w.idx, channel: w.channel, value: w.value });
    }
    const all = [...byIdx.values()].sort((a, b) => a.idx - b.idx);
    this.writeRows.pending.set(`${key}\u0000${taskId}`, all);
    this.writes.set(key, cached);
    const s = this.s;
    await this.queue.enqueue(() => {
      const packed = packWrites(all);
      if (stored) this.writeRows.releaseDependents(thread, nsId, id, taskId, packed);
      const { zip, data, candidate } = this.writeRows.packForStorage(
        thread,
        nsId,
        id,
        taskId,
        packed,
      );
      const { rowid } = s.putTaskWrites.get(nsId, id, taskId, taskPath, zip, data) as {
        rowid: number;
      };
      this.writeRows.forgetRawRows(
        (k) => k === `${nsId}\u0000${id}\u0000${taskId}` || k === `#${rowid}`,
      );
      if (candidate)
        this.writeRows.offerDictionary(thread, {
          nsId,
          checkpointId: id,
          taskId,
          rowid,
          raw: packed,
        });
    });
  }

  /**
   * Reads every stored row of a thread — each checkpoint whole (record, version maps, channel
   * values, pending writes), every value row, every writes row with its dictionary rows, and the
   * official saver's rows — and returns one CheckpointCorruptError per damaged row (none when the
   * thread reads back whole). What `codehop check` runs for each thread.
   */
  async verifyThread(threadId: string): Promise<CheckpointCorruptError[]> {
    this.setup();
    return verifyThread(
      {
        ctx: this.ctx,
        codec: this.codec,
        reader: this.reader,
        channels: this.channels,
        writeRows: this.writeRows,
      },
      threadId,
    );
  }

  /** The ids of every thread with rows in this saver's tables or the official saver's. */
  threadIds(): string[] {
    this.setup();
    this.flush();
    return threadIds(this.db, this.s);
  }

  /**
   * How many checkpoints each thread has in its root namespace (both its own tables and the
   * official saver's), for all threads or one.
   */
  rootCheckpointCounts(threadId?: string): Map<string, number> {
    this.setup();
    this.flush();
    return countRootCheckpoints(this.db, threadId);
  }

  async deleteThread(threadId: string): Promise<void> {
    this.setup();
    this.flush();
    const ids = deleteThreadRows(this.db, this.s, threadId);
    for (const nsId of ids) {
      this.lastPut.delete(nsId);
      this.records.forgetNamespace(nsId);
      this.latestValues.deleteWhere((key) => key === nsId);
      this.channels.forgetNamespace(nsId);
      this.writes.deleteWhere((key) => key.startsWith(`${nsId}\u0000`));
    }
    for (const key of [...this.nsIds.keys()])
      if (key.startsWith(`${threadId}\u0000`)) this.nsIds.delete(key);
    this.writeRows.forgetThread(threadId, ids);
  }
}
