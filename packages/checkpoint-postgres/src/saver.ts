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
  copyCheckpoint,
  getCheckpointId,
} from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { forkSafeVersion, jsonContains } from "./codec.ts";
import {
  type CheckpointRow,
  type KnownValue,
  type Latest,
  Lru,
  nsKey,
  type SaverContext,
  valueKey,
} from "./context.ts";
import type { ForkSafePostgresSaver } from "./official.ts";
import { pendingWrites, recordOf, selectSql, tuples } from "./reads.ts";
import { quoteIdent, tableNames, tablesSql } from "./schema.ts";
import { preparePut, storePut, storeWrites } from "./writes.ts";

/** Decoded values kept across reads. */
const CACHE_SIZE = 512;

/**
 * LinearPostgresSaver: a LangGraph checkpointer for PostgreSQL whose storage grows with the steps
 * of a thread, not with their square (see README.md):
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
 * - **Fork-safe versions** (next integer plus six random decimals).
 * - **The official layout read through**: a schema the official PostgresSaver wrote keeps its
 *   `checkpoints` tables; their checkpoints are read in place, a thread continued from one stores
 *   every channel once in the new tables, and deleteThread removes both.
 * - **Corrupt rows are CheckpointCorruptError** naming the thread, table and row, without the
 *   stored bytes; inflating is bounded; chains stop at a row met twice.
 *
 * Values are treated as immutable, as LangGraph's reducers treat them (reads return copies of
 * lists, sharing their items).
 */
export class LinearPostgresSaver extends BaseCheckpointSaver {
  private readonly ctx: SaverContext;
  private readonly t: SaverContext["t"];
  /** The official saver on the same schema, for checkpoints stored in its layout (loaded once needed). */
  private legacyReader?: Promise<ForkSafePostgresSaver>;
  /** Whether the schema has the official saver's tables (decided once). */
  private hasLegacy?: Promise<boolean>;
  private ready?: Promise<void>;
  /** The pool this saver made (fromConnString), which `end()` closes. */
  private ownPool?: pg.Pool;

  /**
   * A saver on `pool` (yours: `end()` leaves it open) in `schema` (default "public"). The tables
   * are created by `setup()`, by the first write, or by a read that finds them missing.
   */
  constructor(
    private readonly pool: pg.Pool,
    private readonly schema = "public",
    serde?: SerializerProtocol,
  ) {
    super(serde);
    this.t = tableNames(schema);
    const values = new Lru<string, KnownValue>(CACHE_SIZE);
    const latest = new Lru<string, Latest>(256);
    this.ctx = {
      pool,
      t: this.t,
      serde: this.serde,
      values,
      latest,
      read: (sql, args) => this.read(sql, args),
    };
  }

  /**
   * The official saver on this schema. @langchain/langgraph-checkpoint-postgres is an optional
   * peer dependency: loaded only for a schema that holds the official saver's tables.
   */
  private legacy(): Promise<ForkSafePostgresSaver> {
    this.legacyReader ??= import("./official.ts").then(
      ({ ForkSafePostgresSaver }) => new ForkSafePostgresSaver(this.pool, this.schema),
      (err: unknown) => {
        this.legacyReader = undefined;
        throw new Error(
          `Schema "${this.schema}" holds checkpoints of the official PostgresSaver's layout; reading them needs @langchain/langgraph-checkpoint-postgres (npm install @langchain/langgraph-checkpoint-postgres): ${(err as Error).message}`,
        );
      },
    );
    return this.legacyReader;
  }

  /** A saver on a pool of its own (closed by `end()`). */
  static fromConnString(
    connectionString: string,
    options: { schema?: string; serde?: SerializerProtocol; pool?: pg.PoolConfig } = {},
  ): LinearPostgresSaver {
    const pool = new pg.Pool({ ...options.pool, connectionString });
    const saver = new LinearPostgresSaver(pool, options.schema, options.serde);
    saver.ownPool = pool;
    return saver;
  }

  /**
   * Creates the tables (idempotent; concurrent setups of one schema from several processes may
   * race on CREATE: serialize them, e.g. with an advisory lock). Writes call it once per
   * instance; reads only when the tables are missing: a fresh instance's first read pays no DDL.
   */
  async setup(): Promise<void> {
    this.ready ??= (async () => {
      await this.pool.query(tablesSql(this.schema));
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
      .query<{ t: string | null }>("SELECT to_regclass($1)::text AS t", [this.legacyTable()])
      .then((r) => r.rows[0]?.t != null);
    return this.hasLegacy;
  }

  private legacyTable(): string {
    return `${quoteIdent(this.schema)}.checkpoints`;
  }

  /** The next integer plus six random decimals (two forks never pick the same version). */
  override getNextVersion(current: number | string | undefined): number {
    return forkSafeVersion(current);
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const thread = config.configurable?.thread_id as string | undefined;
    if (!thread) return undefined;
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? "";
    const id = getCheckpointId(config) || undefined;
    const { rows } = await this.read<CheckpointRow>(
      selectSql(
        this.ctx,
        id
          ? "WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = $3"
          : "WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 ORDER BY c.checkpoint_id DESC LIMIT 1",
      ),
      id ? [thread, ns, id] : [thread, ns],
    );
    if (!rows.length) return (await this.legacyTables()) ? this.legacyTuple(config) : undefined;
    const [tuple] = await tuples(this.ctx, rows, !id);
    return tuple;
  }

  /** A checkpoint of the official layout, with pending writes stored since in the new tables. */
  private async legacyTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const tuple = await (await this.legacy()).getTuple(config);
    if (!tuple) return undefined;
    const c = tuple.config.configurable!;
    const { rows } = await this.pool.query<CheckpointRow>(
      `SELECT $1::text AS thread_id, $2::text AS checkpoint_ns, $3::text AS checkpoint_id,
        array_agg(task_id ORDER BY task_path, task_id, call) AS w_task,
        array_agg(zip ORDER BY task_path, task_id, call) AS w_zip,
        array_agg(writes ORDER BY task_path, task_id, call) AS w_data
       FROM ${this.t.writes} WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3`,
      [c.thread_id, c.checkpoint_ns ?? "", c.checkpoint_id],
    );
    const added = rows[0]?.w_task ? await pendingWrites(this.ctx, rows[0]) : [];
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
    let sql = selectSql(this.ctx, wheres.length ? `WHERE ${wheres.join(" AND ")}` : "");
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
          if (jsonContains((await recordOf(this.ctx, row)).m, filter)) kept.push(row);
        batch = kept;
      }
      for (const tuple of await tuples(this.ctx, batch, false)) {
        if (max !== undefined && count >= max) return;
        count++;
        yield tuple;
      }
    }
    if ((max === undefined || count < max) && (await this.legacyTables()))
      for await (const tuple of (await this.legacy()).list(config, {
        ...options,
        ...(max === undefined ? {} : { limit: max - count }),
      }))
        yield tuple;
  }

  /** Whether checkpoint `id` of a namespace is in the new tables, the official ones, or neither. */
  private async whereIs(
    thread: string,
    ns: string,
    id: string,
  ): Promise<"new" | "legacy" | undefined> {
    const at = "WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3";
    const { rows } = await this.pool.query(`SELECT 1 FROM ${this.t.checkpoints} ${at}`, [
      thread,
      ns,
      id,
    ]);
    if (rows.length) return "new";
    if (!(await this.legacyTables())) return undefined;
    const old = await this.pool.query(`SELECT 1 FROM ${this.legacyTable()} ${at}`, [
      thread,
      ns,
      id,
    ]);
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
    const key = nsKey(thread, ns);
    const prepared = copyCheckpoint(checkpoint);
    const last = this.ctx.latest.get(key);
    // The parent's values this process knows (appends are stored against them only).
    const known = parentId && last?.id === parentId ? last.values : undefined;
    // Continuing from a checkpoint of the official layout: every channel, once.
    const fromLegacy =
      parentId !== undefined && !known && (await this.whereIs(thread, ns, parentId)) === "legacy";
    const toStore = fromLegacy ? { ...prepared.channel_versions } : newVersions;
    const put = await preparePut(this.ctx, prepared, metadata, toStore, known);
    this.ctx.latest.set(key, { id: checkpoint.id, values: put.current });
    for (const [channel, entry] of put.current)
      this.ctx.values.set(valueKey(thread, ns, channel, entry.version), entry);
    try {
      await storePut(this.ctx, { thread, ns, id: checkpoint.id, parentId }, put);
    } catch (err) {
      // Not stored: the next put must not append to what this one would have written.
      this.ctx.latest.delete(key);
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
    const ns = config.configurable.checkpoint_ns ?? "";
    await storeWrites(this.ctx, { thread, ns, id }, writes, taskId, taskPath);
  }

  async deleteThread(threadId: string): Promise<void> {
    await this.setup();
    for (const table of Object.values(this.t))
      await this.pool.query(`DELETE FROM ${table} WHERE thread_id = $1`, [threadId]);
    if (await this.legacyTables()) await (await this.legacy()).deleteThread(threadId);
    const ofThread = (key: string) => key.startsWith(`${threadId}\u0000`);
    this.ctx.values.deleteWhere(ofThread);
    this.ctx.latest.deleteWhere(ofThread);
  }

  /** The checkpoint tables of the schema: this saver's, and the official saver's when present. */
  private async checkpointTables(): Promise<string[]> {
    await this.setup();
    const tables = [this.t.checkpoints];
    if (await this.legacyTables()) tables.push(this.legacyTable());
    return tables;
  }

  /** Root-graph checkpoints per thread (all threads, or one), in both layouts. */
  async rootCheckpointCounts(threadId?: string): Promise<Map<string, number>> {
    const counts = new Map<string, number>();
    const where = threadId === undefined ? "" : "AND thread_id = $1";
    for (const table of await this.checkpointTables()) {
      const { rows } = await this.pool.query<{ thread_id: string; n: string }>(
        `SELECT thread_id, count(*) AS n FROM ${table} WHERE checkpoint_ns = '' ${where} GROUP BY thread_id`,
        threadId === undefined ? [] : [threadId],
      );
      for (const r of rows) counts.set(r.thread_id, (counts.get(r.thread_id) ?? 0) + Number(r.n));
    }
    return counts;
  }

  /** Every checkpoint key of a thread, in both layouts (to read each back, e.g. a check). */
  async checkpointKeys(
    threadId: string,
  ): Promise<Array<{ checkpoint_ns: string; checkpoint_id: string }>> {
    const out: Array<{ checkpoint_ns: string; checkpoint_id: string }> = [];
    for (const table of await this.checkpointTables()) {
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
    const tables = await this.checkpointTables();
    const { rows } = await this.pool.query<{ thread_id: string }>(
      `${tables.map((t) => `SELECT thread_id FROM ${t}`).join(" UNION ")} ORDER BY thread_id`,
    );
    return rows.map((r) => r.thread_id);
  }

  /** Closes the pool when this saver made it (fromConnString); a pool you passed stays open. */
  async end(): Promise<void> {
    await this.ownPool?.end();
    this.ownPool = undefined;
  }
}
