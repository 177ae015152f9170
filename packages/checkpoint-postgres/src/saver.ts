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
import { listFirstLayout, pendingWrites, selectSql, tuples } from "./reads.ts";
import { CHECKPOINT_CALL, quoteIdent, tableNames, tablesSql } from "./schema.ts";
import { fetchAncestors, StepSet, stepSql, writesOf } from "./step-reads.ts";
import { STEP_COLUMNS, type StepRow, stepRecord } from "./step-rows.ts";
import { prepareStep, storeStep, storeStepWrites } from "./writes.ts";

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
  /** Which tables of earlier layouts the schema holds (decided once). */
  private old?: Promise<{ first: boolean; official: boolean }>;
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
    const payloads = new Lru<string, Buffer>(64);
    this.ctx = {
      pool,
      t: this.t,
      serde: this.serde,
      values,
      latest,
      payloads,
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
    const found = await this.fetchStep(thread, ns, id);
    if (found) return found.set.tuple(found.id, true, (p) => this.parentSet(thread, ns, p));
    const old = await this.oldTables();
    if (old.first) {
      const { rows } = await this.pool.query<CheckpointRow>(
        selectSql(
          this.ctx,
          id
            ? "WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = $3"
            : "WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 ORDER BY c.checkpoint_id DESC LIMIT 1",
        ),
        id ? [thread, ns, id] : [thread, ns],
      );
      if (rows.length) return (await this.withLaterWrites(await tuples(this.ctx, rows, false)))[0];
    }
    return old.official ? this.legacyTuple(config) : undefined;
  }

  /**
   * Checkpoint `id` (or the namespace's latest) of linear_steps with the rows its values need and
   * its writes, in one statement; undefined when it is not there.
   */
  private async fetchStep(
    thread: string,
    ns: string,
    id: string | undefined,
  ): Promise<{ set: StepSet; id: string } | undefined> {
    const { rows } = await this.read<StepRow & { n: number }>(
      stepSql(this.ctx, id !== undefined),
      id === undefined ? [thread, ns] : [thread, ns, id],
    );
    const target = rows.find((r) => r.n === 0);
    if (!target) return undefined;
    const set = new StepSet(this.ctx, thread, ns);
    for (const row of rows) set.add(row);
    return { set, id: target.checkpoint_id };
  }

  /** The rows of a parent checkpoint (for the pending sends of checkpoints of format < 4). */
  private async parentSet(thread: string, ns: string, parentId: string): Promise<StepSet> {
    return (await this.fetchStep(thread, ns, parentId))?.set ?? new StepSet(this.ctx, thread, ns);
  }

  /** Which tables of earlier layouts the schema holds (checked once). */
  private oldTables(): Promise<{ first: boolean; official: boolean }> {
    this.old ??= this.pool
      .query<{ first: string | null; official: string | null }>(
        "SELECT to_regclass($1)::text AS first, to_regclass($2)::text AS official",
        [this.t.checkpoints, this.legacyTable()],
      )
      .then(({ rows }) => ({ first: rows[0]?.first != null, official: rows[0]?.official != null }))
      .catch((err: unknown) => {
        this.old = undefined;
        throw err;
      });
    return this.old;
  }

  /**
   * Tuples of earlier layouts with the writes stored since in linear_steps (a thread of an earlier
   * layout resumed: its tasks' writes of that checkpoint are written here).
   */
  private async withLaterWrites(list: CheckpointTuple[]): Promise<CheckpointTuple[]> {
    const byNs = new Map<string, CheckpointTuple[]>();
    for (const t of list) {
      const c = t.config.configurable!;
      const key = nsKey(c.thread_id as string, (c.checkpoint_ns as string) ?? "");
      byNs.set(key, [...(byNs.get(key) ?? []), t]);
    }
    for (const group of byNs.values()) {
      const c = group[0].config.configurable!;
      const ids = group.map((t) => t.config.configurable!.checkpoint_id as string);
      const set = await writesOf(
        this.ctx,
        c.thread_id as string,
        (c.checkpoint_ns as string) ?? "",
        ids,
      );
      for (const t of group) {
        const added = await set.pendingWrites(t.config.configurable!.checkpoint_id as string);
        if (added.length) t.pendingWrites = [...(t.pendingWrites ?? []), ...added];
      }
    }
    return list;
  }

  /** A checkpoint of the official layout, with pending writes stored since in this saver's tables. */
  private async legacyTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const tuple = await (await this.legacy()).getTuple(config);
    if (!tuple) return undefined;
    const c = tuple.config.configurable!;
    if ((await this.oldTables()).first) {
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
    }
    return (await this.withLaterWrites([tuple]))[0];
  }

  async *list(
    config: RunnableConfig,
    options: CheckpointListOptions = {},
  ): AsyncGenerator<CheckpointTuple> {
    const { filter, before, limit } = options;
    const wheres: string[] = [];
    const args: unknown[] = [];
    const c = config?.configurable ?? {};
    if (c.thread_id) wheres.push(`thread_id = $${args.push(c.thread_id)}`);
    if (c.checkpoint_ns !== undefined && c.checkpoint_ns !== null)
      wheres.push(`checkpoint_ns = $${args.push(c.checkpoint_ns)}`);
    if (c.checkpoint_id) wheres.push(`checkpoint_id = $${args.push(c.checkpoint_id)}`);
    if (before?.configurable?.checkpoint_id !== undefined)
      wheres.push(`checkpoint_id < $${args.push(before.configurable.checkpoint_id)}`);
    const filtered = filter && Object.keys(filter).length > 0;
    const max = limit === undefined ? undefined : Number.parseInt(String(limit), 10);
    let count = 0;
    const done = () => max !== undefined && count >= max;
    // linear_steps: the checkpoints and their writes in one statement (a limit counts
    // checkpoints; a metadata filter is applied to the decoded records, the limit only after it).
    const where = wheres.length ? `AND ${wheres.join(" AND ")}` : "";
    const s = this.t.steps;
    const picked =
      max !== undefined && !filtered
        ? `AND (thread_id, checkpoint_ns, checkpoint_id) IN (SELECT thread_id, checkpoint_ns, checkpoint_id
             FROM ${s} WHERE call = ${CHECKPOINT_CALL} ${where} ORDER BY checkpoint_id DESC LIMIT ${max})`
        : "";
    const { rows } = await this.read<StepRow>(
      `SELECT ${STEP_COLUMNS} FROM ${s} WHERE true ${where} ${picked}
       ORDER BY checkpoint_id DESC, thread_id, checkpoint_ns, call`,
      args,
    );
    const sets = new Map<string, StepSet>();
    const order: Array<{ set: StepSet; id: string }> = [];
    for (const row of rows) {
      const key = nsKey(row.thread_id, row.checkpoint_ns);
      let set = sets.get(key);
      if (!set) sets.set(key, (set = new StepSet(this.ctx, row.thread_id, row.checkpoint_ns)));
      set.add(row);
      if (row.call === String(CHECKPOINT_CALL)) order.push({ set, id: row.checkpoint_id });
    }
    for (const set of sets.values()) await fetchAncestors(this.ctx, set);
    for (const { set, id } of order) {
      if (done()) return;
      if (filtered) {
        const step = await set.step(id);
        if (!step || !jsonContains((await stepRecord(this.ctx, step)).m, filter)) continue;
      }
      const tuple = await set.tuple(id, false, (p) => this.parentSet(set.thread, set.ns, p));
      if (!tuple) continue;
      count++;
      yield tuple;
    }
    const old = await this.oldTables();
    if (old.first && !done())
      for await (const tuple of listFirstLayout(
        this.ctx,
        wheres,
        args,
        filter,
        max === undefined ? undefined : max - count,
      )) {
        count++;
        yield (await this.withLaterWrites([tuple]))[0];
        if (done()) return;
      }
    if (old.official && !done())
      for await (const tuple of (await this.legacy()).list(config, {
        ...options,
        ...(max === undefined ? {} : { limit: max - count }),
      }))
        yield (await this.withLaterWrites([tuple]))[0];
  }

  /** Whether checkpoint `id` of a namespace is in a table of an earlier layout. */
  private async inOldLayout(thread: string, ns: string, id: string): Promise<boolean> {
    const old = await this.oldTables();
    const at = "WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3";
    for (const [has, table] of [
      [old.first, this.t.checkpoints],
      [old.official, this.legacyTable()],
    ] as const)
      if (
        has &&
        (await this.pool.query(`SELECT 1 FROM ${table} ${at}`, [thread, ns, id])).rows.length
      )
        return true;
    return false;
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
    let toStore = newVersions;
    let parent = parentId ? this.ctx.latest.get(key) : undefined;
    if (parentId && parent?.id !== parentId) {
      // A parent this process has not seen: read it (its values and where they are stored).
      const found = await this.fetchStep(thread, ns, parentId);
      if (found) await found.set.tuple(found.id, true, (p) => this.parentSet(thread, ns, p));
      parent = this.ctx.latest.get(key);
      // Continuing from a checkpoint of an earlier layout: every channel, once.
      if (!found && (await this.inOldLayout(thread, ns, parentId)))
        toStore = { ...prepared.channel_versions };
    }
    if (parent?.id !== parentId) parent = undefined;
    const step = await prepareStep(this.ctx, prepared, metadata, toStore, parent);
    this.ctx.latest.set(key, step.latest);
    this.ctx.payloads.set(`${key}\u0000${checkpoint.id}`, step.latest.payload!);
    for (const [channel, entry] of step.latest.values)
      this.ctx.values.set(valueKey(thread, ns, channel, entry.version), entry);
    try {
      await storeStep(this.ctx, { thread, ns, id: checkpoint.id, parentId }, step);
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
    const payload = this.ctx.payloads.get(`${nsKey(thread, ns)}\u0000${id}`);
    await storeStepWrites(this.ctx, { thread, ns, id }, writes, taskId, taskPath, payload);
  }

  async deleteThread(threadId: string): Promise<void> {
    await this.setup();
    const old = await this.oldTables();
    const tables = [
      this.t.steps,
      ...(old.first ? [this.t.checkpoints, this.t.blobs, this.t.writes] : []),
    ];
    for (const table of tables)
      await this.pool.query(`DELETE FROM ${table} WHERE thread_id = $1`, [threadId]);
    if (old.official) await (await this.legacy()).deleteThread(threadId);
    const ofThread = (key: string) => key.startsWith(`${threadId}\u0000`);
    this.ctx.values.deleteWhere(ofThread);
    this.ctx.latest.deleteWhere(ofThread);
    this.ctx.payloads.deleteWhere(ofThread);
  }

  /** The checkpoint rows of the schema (this saver's, and earlier layouts' when present). */
  private async checkpointTables(): Promise<Array<{ table: string; where: string }>> {
    await this.setup();
    const old = await this.oldTables();
    return [
      { table: this.t.steps, where: `call = ${CHECKPOINT_CALL}` },
      ...(old.first ? [{ table: this.t.checkpoints, where: "true" }] : []),
      ...(old.official ? [{ table: this.legacyTable(), where: "true" }] : []),
    ];
  }

  /** Root-graph checkpoints per thread (all threads, or one), in both layouts. */
  async rootCheckpointCounts(threadId?: string): Promise<Map<string, number>> {
    const counts = new Map<string, number>();
    const where = threadId === undefined ? "" : "AND thread_id = $1";
    for (const { table, where: rows_ } of await this.checkpointTables()) {
      const { rows } = await this.pool.query<{ thread_id: string; n: string }>(
        `SELECT thread_id, count(*) AS n FROM ${table} WHERE ${rows_} AND checkpoint_ns = '' ${where} GROUP BY thread_id`,
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
    for (const { table, where } of await this.checkpointTables()) {
      const { rows } = await this.pool.query<{ checkpoint_ns: string; checkpoint_id: string }>(
        `SELECT checkpoint_ns, checkpoint_id FROM ${table} WHERE ${where} AND thread_id = $1`,
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
      `${tables.map((t) => `SELECT thread_id FROM ${t.table} WHERE ${t.where}`).join(" UNION ")} ORDER BY thread_id`,
    );
    return rows.map((r) => r.thread_id);
  }

  /** Closes the pool when this saver made it (fromConnString); a pool you passed stays open. */
  async end(): Promise<void> {
    await this.ownPool?.end();
    this.ownPool = undefined;
  }
}
