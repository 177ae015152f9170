import { randomInt } from "node:crypto";
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
import type pg from "pg";
import { checkpointCorrupt, CodehopError, ErrorCodes, quoted } from "../errors.ts";
import {
  jsonContains,
  KIND_APPENDED,
  KIND_WHOLE,
  linearTablesSql,
  packWrites,
  packed,
  type PackedWrite,
  rowKey,
  type RowPlace,
  unpacked,
  unpackWrites,
} from "./postgres-linear-rows.ts";
import { CodehopPostgresSaver } from "./postgres-saver.ts";

/** A row of linear_checkpoints with its pending writes (arrays in the writes' order). */
interface CheckpointRow {
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  parent_checkpoint_id: string | null;
  type: string;
  zip: number;
  record: Buffer;
  w_task: string[] | null;
  w_path: string[] | null;
  w_zip: number[] | null;
  w_data: Buffer[] | null;
}

/** A row of linear_blobs. */
interface BlobRow {
  channel: string;
  version: string;
  kind: number;
  base_version: string | null;
  chain: number;
  full_items: number;
  since_full: number;
  type: string;
  zip: number;
  value: Buffer;
}

/** The stored record of a checkpoint: the checkpoint without its values and id, and its metadata. */
interface StoredRecord {
  c: Omit<Checkpoint, "channel_values" | "id">;
  m: CheckpointMetadata;
}

/** What the saver remembers of a channel's latest value in a namespace (to store appends only). */
interface KnownValue {
  version: string;
  value: unknown;
  chain: number;
  fullItems: number;
  sinceFull: number;
}

/** A namespace's latest checkpoint this process put or read, and its channel values by channel. */
interface Latest {
  id: string;
  values: Map<string, KnownValue>;
}

/** A list is stored whole again after this many appends once it gained half its last whole copy. */
const MIN_CHAIN = 16;
/** Links of a chain of appends read at most (a longer chain is corrupt). */
const MAX_CHAIN = 100_000;
/** Decoded values kept across reads. */
const CACHE_SIZE = 512;

const isCorrupt = (err: unknown) =>
  CodehopError.isInstance(err) && err.code === ErrorCodes.CHECKPOINT_CORRUPT;

/** A small LRU map. */
class Lru<K, V> extends Map<K, V> {
  constructor(private readonly max: number) {
    super();
  }
  override get(key: K): V | undefined {
    const v = super.get(key);
    if (v !== undefined) {
      super.delete(key);
      super.set(key, v);
    }
    return v;
  }
  override set(key: K, value: V): this {
    super.delete(key);
    super.set(key, value);
    if (this.size > this.max) super.delete(this.keys().next().value as K);
    return this;
  }
}

/**
 * LinearPostgresSaver: a LangGraph checkpointer for PostgreSQL with IncrementalSqliteSaver's linear
 * layout (packages/checkpoint-sqlite), so a thread's storage grows with its steps, not with their
 * square:
 *
 * - **Changed channels only**, each value a row keyed by `(thread, namespace, channel, version)`.
 * - **Lists that only grew** (the same item objects as the version the parent checkpoint had, as
 *   LangGraph's reducers hand them over) store the items they gained, pointing at that version; a
 *   whole copy again once a chain is 16 appends long and has gained half the items of its last
 *   copy (copies at geometrically growing sizes: storage stays linear, a read walks a bounded
 *   chain). A read fetches a chain in one recursive query.
 * - **Compact rows**: a checkpoint is one row (the checkpoint without its values, with its
 *   metadata), a task's writes one row per `putWrites` call (packed), all deflated when smaller.
 * - **One round trip per put**: a checkpoint's value rows and its row are one statement.
 * - **Fork-safe versions** (next integer plus six random decimals, as IncrementalSqliteSaver).
 * - **The official layout read through**: a schema the official PostgresSaver wrote (codehop serve
 *   until now) keeps its `checkpoints` tables; their checkpoints are read in place (by
 *   CodehopPostgresSaver), a thread continued from one stores every channel once in the new
 *   tables, and deleteThread removes both.
 * - **Corrupt rows are CODEHOP_CHECKPOINT_CORRUPT** naming the thread, table and row, without
 *   the stored bytes; inflating is bounded; chains stop at a row met twice.
 *
 * Values are treated as immutable, as LangGraph's reducers treat them (reads return copies of
 * lists, sharing their items).
 */
export class LinearPostgresSaver extends BaseCheckpointSaver {
  private readonly t: { checkpoints: string; blobs: string; writes: string };
  /** The official saver on the same schema, for checkpoints stored in its layout. */
  private readonly legacy: CodehopPostgresSaver;
  /** Whether the schema has the official saver's tables (decided at setup). */
  private hasLegacy?: Promise<boolean>;
  private ready?: Promise<void>;
  /** Decoded values by thread, namespace, channel and version. */
  private readonly values = new Lru<string, unknown>(CACHE_SIZE);
  private readonly latest = new Lru<string, Latest>(256);

  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
    serde?: SerializerProtocol,
  ) {
    super(serde);
    const s = `"${schema}"`;
    this.t = {
      checkpoints: `${s}.linear_checkpoints`,
      blobs: `${s}.linear_blobs`,
      writes: `${s}.linear_writes`,
    };
    this.legacy = new CodehopPostgresSaver(pool, schema);
  }

  /**
   * Creates the tables (idempotent; callers serialize concurrent setups, see postgres.ts). Writes
   * call it once per instance; reads only when the tables are missing: a fresh instance's first
   * read pays no DDL.
   */
  async setup(): Promise<void> {
    this.ready ??= (async () => {
      await this.pool.query(linearTablesSql(this.schema));
    })();
    try {
      await this.ready;
    } catch (err) {
      this.ready = undefined;
      throw err;
    }
  }

  /** A read query; on a schema without the tables yet, they are created first (then it reads again). */
  private async read<R extends pg.QueryResultRow>(sql: string, args: unknown[]) {
    try {
      return await this.pool.query<R>(sql, args);
    } catch (err) {
      if ((err as { code?: string }).code !== "42P01") throw err; // undefined_table
      await this.setup();
      return this.pool.query<R>(sql, args);
    }
  }

  /** Whether the schema holds the official saver's tables (checked once). */
  private legacyTables(): Promise<boolean> {
    this.hasLegacy ??= this.pool
      .query<{ t: string | null }>("SELECT to_regclass($1)::text AS t", [
        `"${this.schema}".checkpoints`,
      ])
      .then((r) => r.rows[0]?.t != null);
    return this.hasLegacy;
  }

  /** The next integer plus six random decimals (two forks never pick the same version). */
  override getNextVersion(current: number | string | undefined): number {
    const base =
      typeof current === "number" ? Math.floor(current) : current ? Math.floor(Number(current)) : 0;
    if (!Number.isFinite(base)) throw new Error(`Cannot continue channel version "${current}"`);
    return base + 1 + randomInt(1, 1_000_000) / 1_000_000;
  }

  // ------------------------------------------------------------------------------------------
  // Reading

  private selectSql(where: string): string {
    const w = this.t.writes;
    // Pending writes come along, one array per column, in LangGraph's order (task path, task
    // id; each task's calls in order, merged when read).
    return `SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type, c.zip, c.record,
      ARRAY(SELECT task_id FROM ${w} x WHERE x.thread_id = c.thread_id AND x.checkpoint_ns = c.checkpoint_ns AND x.checkpoint_id = c.checkpoint_id ORDER BY task_path, task_id, call) AS w_task,
      ARRAY(SELECT task_path FROM ${w} x WHERE x.thread_id = c.thread_id AND x.checkpoint_ns = c.checkpoint_ns AND x.checkpoint_id = c.checkpoint_id ORDER BY task_path, task_id, call) AS w_path,
      ARRAY(SELECT zip FROM ${w} x WHERE x.thread_id = c.thread_id AND x.checkpoint_ns = c.checkpoint_ns AND x.checkpoint_id = c.checkpoint_id ORDER BY task_path, task_id, call) AS w_zip,
      ARRAY(SELECT writes FROM ${w} x WHERE x.thread_id = c.thread_id AND x.checkpoint_ns = c.checkpoint_ns AND x.checkpoint_id = c.checkpoint_id ORDER BY task_path, task_id, call) AS w_data
      FROM ${this.t.checkpoints} c ${where}`;
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const thread = config.configurable?.thread_id as string | undefined;
    if (!thread) return undefined;
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? "";
    const id = getCheckpointId(config) || undefined;
    const { rows } = await this.read<CheckpointRow>(
      this.selectSql(
        id
          ? "WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = $3"
          : "WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 ORDER BY c.checkpoint_id DESC LIMIT 1",
      ),
      id ? [thread, ns, id] : [thread, ns],
    );
    if (!rows.length) return (await this.legacyTables()) ? this.legacyTuple(config) : undefined;
    const [tuple] = await this.tuples(rows, !id);
    return tuple;
  }

  /** A checkpoint of the official layout, with pending writes stored since in the new tables. */
  private async legacyTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const tuple = await this.legacy.getTuple(config);
    if (!tuple) return undefined;
    const c = tuple.config.configurable!;
    const { rows } = await this.pool.query<CheckpointRow>(
      `SELECT $1::text AS thread_id, $2::text AS checkpoint_ns, $3::text AS checkpoint_id,
        array_agg(task_id ORDER BY task_path, task_id, call) AS w_task,
        array_agg(task_path ORDER BY task_path, task_id, call) AS w_path,
        array_agg(zip ORDER BY task_path, task_id, call) AS w_zip,
        array_agg(writes ORDER BY task_path, task_id, call) AS w_data
       FROM ${this.t.writes} WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3`,
      [c.thread_id, c.checkpoint_ns ?? "", c.checkpoint_id],
    );
    const added = rows[0]?.w_task ? await this.pendingWrites(rows[0]) : [];
    tuple.pendingWrites = [...(tuple.pendingWrites ?? []), ...added];
    return tuple;
  }

  async *list(
    config: RunnableConfig,
    options: CheckpointListOptions = {},
  ): AsyncGenerator<CheckpointTuple> {
    const { filter, before, limit } = options;
    const wheres: string[] = [];
    const args: unknown[] = [];
    const c = config?.configurable ?? {};
    if (c.thread_id) wheres.push(`c.thread_id = $${args.push(c.thread_id)}`);
    if (c.checkpoint_ns !== undefined && c.checkpoint_ns !== null)
      wheres.push(`c.checkpoint_ns = $${args.push(c.checkpoint_ns)}`);
    if (c.checkpoint_id) wheres.push(`c.checkpoint_id = $${args.push(c.checkpoint_id)}`);
    if (before?.configurable?.checkpoint_id !== undefined)
      wheres.push(`c.checkpoint_id < $${args.push(before.configurable.checkpoint_id)}`);
    const filtered = filter && Object.keys(filter).length > 0;
    const max = limit === undefined ? undefined : Number.parseInt(String(limit), 10);
    let sql = this.selectSql(wheres.length ? `WHERE ${wheres.join(" AND ")}` : "");
    sql += " ORDER BY c.checkpoint_id DESC";
    // A metadata filter is applied to the decoded records: the limit only after it.
    if (max !== undefined && !filtered) sql += ` LIMIT ${max}`;
    const { rows } = await this.read<CheckpointRow>(sql, args);
    let count = 0;
    // In batches: values are fetched for a batch at once (their chains shared).
    const BATCH = 64;
    for (let i = 0; i < rows.length; i += BATCH) {
      if (max !== undefined && count >= max) return;
      let batch = rows.slice(i, i + BATCH);
      if (filtered) {
        const kept: CheckpointRow[] = [];
        for (const row of batch)
          if (jsonContains((await this.recordOf(row)).m, filter)) kept.push(row);
        batch = kept;
      }
      for (const tuple of await this.tuples(batch, false)) {
        if (max !== undefined && count >= max) return;
        count++;
        yield tuple;
      }
    }
    if ((max === undefined || count < max) && (await this.legacyTables()))
      for await (const tuple of this.legacy.list(config, {
        ...options,
        ...(max === undefined ? {} : { limit: max - count }),
      }))
        yield tuple;
  }

  private recordCache = new WeakMap<CheckpointRow, StoredRecord>();

  /** The decoded record of a checkpoint row. */
  private async recordOf(row: CheckpointRow): Promise<StoredRecord> {
    const cached = this.recordCache.get(row);
    if (cached) return cached;
    const where = {
      thread: row.thread_id,
      table: "linear_checkpoints",
      row: rowKey({ checkpoint_ns: row.checkpoint_ns, checkpoint_id: row.checkpoint_id }),
    };
    const bytes = unpacked(row.zip, row.record, where);
    let record: StoredRecord;
    try {
      record = (await this.serde.loadsTyped(row.type, bytes)) as StoredRecord;
    } catch {
      throw checkpointCorrupt({ ...where, problem: "its checkpoint does not parse" });
    }
    if (
      typeof record !== "object" ||
      record === null ||
      typeof record.c !== "object" ||
      record.c === null ||
      typeof record.c.v !== "number" ||
      typeof record.c.channel_versions !== "object" ||
      record.c.channel_versions === null
    )
      throw checkpointCorrupt({ ...where, problem: "its checkpoint is not a checkpoint record" });
    this.recordCache.set(row, record);
    return record;
  }

  /** Tuples of rows (their values fetched together); `remember`: seed the append state. */
  private async tuples(rows: CheckpointRow[], remember: boolean): Promise<CheckpointTuple[]> {
    const records = await Promise.all(rows.map((r) => this.recordOf(r)));
    // The values every row needs, per namespace, fetched in one query each.
    const wanted = new Map<string, { thread: string; ns: string; keys: Map<string, string> }>();
    rows.forEach((row, i) => {
      const key = `${row.thread_id}\u0000${row.checkpoint_ns}`;
      let w = wanted.get(key);
      if (!w)
        wanted.set(key, (w = { thread: row.thread_id, ns: row.checkpoint_ns, keys: new Map() }));
      for (const [channel, version] of Object.entries(records[i].c.channel_versions))
        w.keys.set(`${channel}\u0000${String(version)}`, channel);
    });
    const resolved = new Map<string, Map<string, KnownValue>>();
    for (const [key, w] of wanted) resolved.set(key, await this.loadValues(w.thread, w.ns, w.keys));
    const out: CheckpointTuple[] = [];
    for (const [i, row] of rows.entries()) {
      const record = records[i];
      const values = resolved.get(`${row.thread_id}\u0000${row.checkpoint_ns}`)!;
      const channelValues: Record<string, unknown> = {};
      const current = new Map<string, KnownValue>();
      for (const [channel, v] of Object.entries(record.c.channel_versions)) {
        const known = values.get(`${channel}\u0000${String(v)}`);
        if (!known) continue;
        current.set(channel, known);
        channelValues[channel] = Array.isArray(known.value) ? known.value.slice() : known.value;
      }
      const checkpoint = {
        ...structuredClone(record.c),
        id: row.checkpoint_id,
        channel_values: channelValues,
      } as Checkpoint;
      if (remember && i === 0)
        this.latest.set(`${row.thread_id}\u0000${row.checkpoint_ns}`, {
          id: row.checkpoint_id,
          values: current,
        });
      if (checkpoint.v < 4 && row.parent_checkpoint_id)
        await this.migratePendingSends(checkpoint, row);
      out.push({
        config: {
          configurable: {
            thread_id: row.thread_id,
            checkpoint_ns: row.checkpoint_ns,
            checkpoint_id: row.checkpoint_id,
          },
        },
        checkpoint,
        metadata: structuredClone(record.m ?? {}) as CheckpointMetadata,
        ...(row.parent_checkpoint_id
          ? {
              parentConfig: {
                configurable: {
                  thread_id: row.thread_id,
                  checkpoint_ns: row.checkpoint_ns,
                  checkpoint_id: row.parent_checkpoint_id,
                },
              },
            }
          : {}),
        pendingWrites: await this.pendingWrites(row),
      });
    }
    return out;
  }

  /**
   * The values at `keys` (channel\0version -> channel) of a namespace: from the cache, else their
   * rows and the rows their chains of appends go through, in one recursive query.
   */
  private async loadValues(
    thread: string,
    ns: string,
    keys: Map<string, string>,
  ): Promise<Map<string, KnownValue>> {
    const out = new Map<string, KnownValue>();
    const prefix = `${thread}\u0000${ns}\u0000`;
    const missing: string[] = [];
    for (const key of keys.keys()) {
      const cached = this.values.get(prefix + key) as KnownValue | undefined;
      if (cached) out.set(key, cached);
      else missing.push(key);
    }
    if (!missing.length) return out;
    const channels = missing.map((k) => k.slice(0, k.indexOf("\u0000")));
    const versions = missing.map((k) => k.slice(k.indexOf("\u0000") + 1));
    const b = this.t.blobs;
    // UNION (not UNION ALL): a row met twice ends the walk, so a chain pointing back at itself
    // ends too (and is reported below).
    const { rows } = await this.pool.query<BlobRow>(
      `WITH RECURSIVE chain AS (
         SELECT b.channel, b.version, b.kind, b.base_version, b.chain, b.full_items, b.since_full, b.type, b.zip, b.value
         FROM ${b} b JOIN unnest($3::text[], $4::text[]) AS w(channel, version)
           ON b.channel = w.channel AND b.version = w.version
         WHERE b.thread_id = $1 AND b.checkpoint_ns = $2
         UNION
         SELECT b.channel, b.version, b.kind, b.base_version, b.chain, b.full_items, b.since_full, b.type, b.zip, b.value
         FROM chain c JOIN ${b} b
           ON b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = c.channel AND b.version = c.base_version
         WHERE c.kind = ${KIND_APPENDED}
       ) SELECT * FROM chain`,
      [thread, ns, channels, versions],
    );
    const byKey = new Map(rows.map((r) => [`${r.channel}\u0000${r.version}`, r]));
    for (const key of missing) {
      const value = await this.resolve(thread, ns, key, byKey, new Set());
      if (value) out.set(key, value);
    }
    return out;
  }

  /** The value of row `key` (following its chain of appends); undefined: no row (empty channel). */
  private async resolve(
    thread: string,
    ns: string,
    key: string,
    rows: Map<string, BlobRow>,
    seen: Set<string>,
  ): Promise<KnownValue | undefined> {
    const cacheKey = `${thread}\u0000${ns}\u0000${key}`;
    const cached = this.values.get(cacheKey) as KnownValue | undefined;
    if (cached) return cached;
    const row = rows.get(key);
    if (!row) return undefined;
    const where: RowPlace = {
      thread,
      table: "linear_blobs",
      row: rowKey({ checkpoint_ns: ns, channel: row.channel, version: row.version }),
    };
    if (seen.has(key) || seen.size > MAX_CHAIN)
      throw checkpointCorrupt({ ...where, problem: "its chain of appends loops back to itself" });
    seen.add(key);
    let decoded: unknown;
    try {
      decoded = await this.serde.loadsTyped(row.type, unpacked(row.zip, row.value, where));
    } catch (err) {
      if (isCorrupt(err)) throw err;
      throw checkpointCorrupt({
        ...where,
        problem: `its ${quoted(row.type)} value does not parse`,
      });
    }
    let value: unknown;
    if (row.kind === KIND_WHOLE) value = decoded;
    else if (row.kind === KIND_APPENDED) {
      const baseKey = `${row.channel}\u0000${row.base_version}`;
      const base = await this.resolve(thread, ns, baseKey, rows, seen);
      if (!base || !Array.isArray(base.value) || !Array.isArray(decoded))
        throw checkpointCorrupt({
          ...where,
          problem: "its items are appended to a version that is not a stored list",
        });
      value = base.value.concat(decoded);
    } else
      throw checkpointCorrupt({ ...where, problem: `its kind ${quoted(row.kind)} is unknown` });
    const known: KnownValue = {
      version: row.version,
      value,
      chain: row.chain,
      fullItems: row.full_items,
      sinceFull: row.since_full,
    };
    this.values.set(cacheKey, known);
    return known;
  }

  /** The pending writes of a row: each task's calls merged as putWrites merges them. */
  private async pendingWrites(row: CheckpointRow): Promise<CheckpointPendingWrite[]> {
    const out: CheckpointPendingWrite[] = [];
    const tasks = row.w_task ?? [];
    let i = 0;
    while (i < tasks.length) {
      const task = tasks[i];
      const byIdx = new Map<number, PackedWrite>();
      for (; i < tasks.length && tasks[i] === task; i++) {
        const where: RowPlace = {
          thread: row.thread_id,
          table: "linear_writes",
          row: rowKey({
            checkpoint_ns: row.checkpoint_ns,
            checkpoint_id: row.checkpoint_id,
            task_id: task,
          }),
        };
        const writes = unpackWrites(unpacked(row.w_zip![i], row.w_data![i], where), where);
        const replace = writes.every((w) => w.channel in WRITES_IDX_MAP);
        for (const w of writes) if (replace || !byIdx.has(w.idx)) byIdx.set(w.idx, w);
      }
      for (const w of [...byIdx.values()].sort((a, b) => a.idx - b.idx)) {
        let value: unknown;
        try {
          value = await this.serde.loadsTyped(w.type, w.data);
        } catch {
          throw checkpointCorrupt({
            thread: row.thread_id,
            table: "linear_writes",
            row: rowKey({
              checkpoint_ns: row.checkpoint_ns,
              checkpoint_id: row.checkpoint_id,
              task_id: task,
              channel: w.channel,
            }),
            problem: `its ${quoted(w.type)} value does not parse`,
          });
        }
        out.push([task, w.channel, value]);
      }
    }
    return out;
  }

  /** Checkpoints of format v < 4 kept their pending sends in the parent's writes. */
  private async migratePendingSends(checkpoint: Checkpoint, row: CheckpointRow): Promise<void> {
    const [parent] = (
      await this.pool.query<CheckpointRow>(
        this.selectSql("WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = $3"),
        [row.thread_id, row.checkpoint_ns, row.parent_checkpoint_id],
      )
    ).rows;
    const sends = parent
      ? (await this.pendingWrites(parent)).filter(([, c]) => c === TASKS).map(([, , v]) => v)
      : [];
    checkpoint.channel_values ??= {};
    checkpoint.channel_values[TASKS] = sends;
    checkpoint.channel_versions[TASKS] =
      Object.keys(checkpoint.channel_versions).length > 0
        ? maxChannelVersion(...Object.values(checkpoint.channel_versions))
        : this.getNextVersion(undefined);
  }

  // ------------------------------------------------------------------------------------------
  // Writing

  /** Whether checkpoint `id` of a namespace is in the new tables, the official ones, or neither. */
  private async whereIs(
    thread: string,
    ns: string,
    id: string,
  ): Promise<"new" | "legacy" | undefined> {
    const { rows } = await this.pool.query(
      `SELECT 1 FROM ${this.t.checkpoints} WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3`,
      [thread, ns, id],
    );
    if (rows.length) return "new";
    if (!(await this.legacyTables())) return undefined;
    const old = await this.pool.query(
      `SELECT 1 FROM "${this.schema}".checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3`,
      [thread, ns, id],
    );
    return old.rows.length ? "legacy" : undefined;
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
    await this.setup();
    const nsKey = `${thread}\u0000${ns}`;
    const prepared = copyCheckpoint(checkpoint);
    const last = this.latest.get(nsKey);
    // The parent's values this process knows (appends are stored against them only).
    const known = parentId && last?.id === parentId ? last.values : undefined;
    // Continuing from a checkpoint of the official layout: every channel, once.
    const fromLegacy =
      parentId !== undefined && !known && (await this.whereIs(thread, ns, parentId)) === "legacy";
    const toStore = fromLegacy ? { ...prepared.channel_versions } : newVersions;
    const current = new Map<string, KnownValue>();
    for (const [channel, entry] of known ?? [])
      if (
        !Object.hasOwn(toStore, channel) &&
        entry.version === String(prepared.channel_versions[channel])
      )
        current.set(channel, entry);
    const rows = {
      channel: [] as string[],
      version: [] as string[],
      kind: [] as number[],
      base: [] as (string | null)[],
      chain: [] as number[],
      fullItems: [] as number[],
      sinceFull: [] as number[],
      type: [] as string[],
      zip: [] as number[],
      value: [] as Buffer[],
    };
    for (const [channel, v] of Object.entries(toStore)) {
      // An empty channel gets no row: a version without one reads as empty.
      if (!Object.hasOwn(prepared.channel_values, channel)) continue;
      const version = String(v);
      const value = prepared.channel_values[channel];
      const before = known?.get(channel);
      let entry: KnownValue = { version, value, chain: 0, fullItems: 0, sinceFull: 0 };
      let stored: unknown = value;
      let kind = KIND_WHOLE;
      let base: string | null = null;
      if (
        before &&
        Array.isArray(value) &&
        Array.isArray(before.value) &&
        value.length >= before.value.length &&
        (before.value as unknown[]).every((item, i) => value[i] === item)
      ) {
        const added = value.slice(before.value.length);
        const sinceFull = before.sinceFull + added.length;
        if (before.chain < MIN_CHAIN || sinceFull < before.fullItems / 2) {
          entry = {
            version,
            value,
            chain: before.chain + 1,
            fullItems: before.fullItems,
            sinceFull,
          };
          stored = added;
          kind = KIND_APPENDED;
          base = before.version;
        }
      }
      if (kind === KIND_WHOLE && Array.isArray(value)) entry.fullItems = value.length;
      const [type, bytes] = await this.serde.dumpsTyped(stored);
      const { zip, data } = packed(bytes);
      rows.channel.push(channel);
      rows.version.push(version);
      rows.kind.push(kind);
      rows.base.push(base);
      rows.chain.push(entry.chain);
      rows.fullItems.push(entry.fullItems);
      rows.sinceFull.push(entry.sinceFull);
      rows.type.push(type);
      rows.zip.push(zip);
      rows.value.push(data);
      current.set(channel, entry);
    }
    const { channel_values: _values, id: _id, ...rest } = prepared;
    const [type, bytes] = await this.serde.dumpsTyped({ c: rest, m: metadata } as StoredRecord);
    const record = packed(bytes);
    this.latest.set(nsKey, { id: checkpoint.id, values: current });
    for (const [channel, entry] of current)
      this.values.set(`${nsKey}\u0000${channel}\u0000${entry.version}`, entry);
    try {
      // One statement: the value rows and the checkpoint row commit together.
      await this.pool.query(
        `WITH blobs AS (
           INSERT INTO ${this.t.blobs} (thread_id, checkpoint_ns, channel, version, kind, base_version, chain, full_items, since_full, type, zip, value)
           SELECT $1, $2, * FROM unnest($6::text[], $7::text[], $8::smallint[], $9::text[], $10::int[], $11::int[], $12::int[], $13::text[], $14::smallint[], $15::bytea[])
           ON CONFLICT DO NOTHING
         )
         INSERT INTO ${this.t.checkpoints} (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, zip, record)
         VALUES ($1, $2, $3, $4, $5, $16, $17)
         ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE
           SET parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, type = EXCLUDED.type,
               zip = EXCLUDED.zip, record = EXCLUDED.record`,
        [
          thread,
          ns,
          checkpoint.id,
          parentId ?? null,
          type,
          rows.channel,
          rows.version,
          rows.kind,
          rows.base,
          rows.chain,
          rows.fullItems,
          rows.sinceFull,
          rows.type,
          rows.zip,
          rows.value,
          record.zip,
          record.data,
        ],
      );
    } catch (err) {
      // Not stored: the next put must not append to what this one would have written.
      this.latest.delete(nsKey);
      throw err;
    }
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
    await this.setup();
    const encoded = await Promise.all(
      writes.map(async ([channel, value], i) => {
        const [type, data] = await this.serde.dumpsTyped(value);
        return { idx: WRITES_IDX_MAP[channel] ?? i, channel, type, data };
      }),
    );
    // One row per call: reads merge a task's calls (special writes replace, others never
    // overwrite), which spares reading the task's earlier writes here.
    const { zip, data } = packed(packWrites(encoded));
    await this.pool.query(
      `INSERT INTO ${this.t.writes} (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, zip, writes)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [thread, config.configurable.checkpoint_ns ?? "", id, taskId, taskPath, zip, data],
    );
  }

  async deleteThread(threadId: string): Promise<void> {
    await this.setup();
    for (const table of Object.values(this.t))
      await this.pool.query(`DELETE FROM ${table} WHERE thread_id = $1`, [threadId]);
    if (await this.legacyTables()) await this.legacy.deleteThread(threadId);
    for (const cache of [this.values, this.latest] as Map<string, unknown>[])
      for (const key of [...cache.keys()])
        if (key.startsWith(`${threadId}\u0000`)) cache.delete(key);
  }

  /** Root-graph checkpoints per thread (all threads, or one), in both layouts. */
  async rootCheckpointCounts(threadId?: string): Promise<Map<string, number>> {
    await this.setup();
    const counts = new Map<string, number>();
    const where = threadId === undefined ? "" : "AND thread_id = $1";
    const tables = [this.t.checkpoints];
    if (await this.legacyTables()) tables.push(`"${this.schema}".checkpoints`);
    for (const table of tables) {
      const { rows } = await this.pool.query<{ thread_id: string; n: string }>(
        `SELECT thread_id, count(*) AS n FROM ${table} WHERE checkpoint_ns = '' ${where} GROUP BY thread_id`,
        threadId === undefined ? [] : [threadId],
      );
      for (const r of rows) counts.set(r.thread_id, (counts.get(r.thread_id) ?? 0) + Number(r.n));
    }
    return counts;
  }

  /** Every checkpoint key of a thread, in both layouts (what `codehop check` reads back). */
  async checkpointKeys(
    threadId: string,
  ): Promise<Array<{ checkpoint_ns: string; checkpoint_id: string }>> {
    await this.setup();
    const tables = [this.t.checkpoints];
    if (await this.legacyTables()) tables.push(`"${this.schema}".checkpoints`);
    const out: Array<{ checkpoint_ns: string; checkpoint_id: string }> = [];
    for (const table of tables) {
      const { rows } = await this.pool.query<{ checkpoint_ns: string; checkpoint_id: string }>(
        `SELECT checkpoint_ns, checkpoint_id FROM ${table} WHERE thread_id = $1`,
        [threadId],
      );
      out.push(...rows);
    }
    return out;
  }

  /** The ids of every thread with checkpoints, in both layouts. */
  async threadIds(): Promise<string[]> {
    await this.setup();
    const legacy = (await this.legacyTables())
      ? ` UNION SELECT thread_id FROM "${this.schema}".checkpoints`
      : "";
    const { rows } = await this.pool.query<{ thread_id: string }>(
      `SELECT thread_id FROM ${this.t.checkpoints}${legacy} ORDER BY thread_id`,
    );
    return rows.map((r) => r.thread_id);
  }

  /** The pool is the adapter's (shared with the journal and registry): closing it is theirs. */
  async end(): Promise<void> {}
}
