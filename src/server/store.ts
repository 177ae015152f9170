import { randomUUID } from "node:crypto";
import { LINEAR_TABLES } from "@codehop/checkpoint-postgres";
import type pg from "pg";
import { inTransaction } from "../persistence/postgres-database.ts";
import { apiKeysTableSql } from "./api-keys.ts";
import type { AuthFilters } from "./auth.ts";

/**
 * The server's own tables, next to the checkpoints in the Postgres schema: the LangGraph API's
 * threads (`codehop_api_threads`), its runs (`codehop_runs`), each run's stream events
 * (`codehop_run_events`, what `runs.stream` / `joinStream` replay, so a client can attach from any
 * server process and a run's stream survives the worker that produced it) and the workers
 * (`codehop_workers`, for `GET /info` and operators). The queue itself is pg-boss's (queue.ts).
 */

/** Run statuses of the LangGraph API. */
export type RunStatus = "pending" | "running" | "success" | "error" | "timeout" | "interrupted";
/** Thread statuses of the LangGraph API. */
export type ThreadStatus = "idle" | "busy" | "interrupted" | "error";
/** How a new run treats a thread that already has one in flight. */
export type MultitaskStrategy = "reject" | "enqueue" | "interrupt" | "rollback";

/** A run's statuses after which nothing changes. */
export const TERMINAL_RUN_STATUSES: readonly RunStatus[] = [
  "success",
  "error",
  "timeout",
  "interrupted",
];

/** What a run executes (the LangGraph API's run kwargs). */
export interface RunKwargs {
  input?: unknown;
  command?: { resume?: unknown; update?: unknown; goto?: unknown } | null;
  config?: { configurable?: Record<string, unknown>; recursion_limit?: number; tags?: string[] };
  context?: Record<string, unknown>;
  stream_mode: string[];
  subgraphs: boolean;
  interrupt_before?: string[] | "*";
  interrupt_after?: string[] | "*";
  /** A stateless run's thread is deleted when it ends. */
  temporary: boolean;
}

/** A run row (the API object plus what workers keep). */
export interface RunRecord {
  run_id: string;
  thread_id: string;
  assistant_id: string;
  graph_id: string;
  status: RunStatus;
  metadata: Record<string, unknown>;
  kwargs: RunKwargs;
  multitask_strategy: MultitaskStrategy;
  created_at: Date;
  updated_at: Date;
  /** How many times a worker took the run (1 on the first take, 2 after a worker was lost ...). */
  attempt: number;
  worker_id: string | null;
  heartbeat_at: Date | null;
  /** Set when a cancel was asked ("interrupt"); the worker running it stops. */
  cancel_action: string | null;
  error: { error: string; message: string } | null;
  /** The thread's latest root checkpoint before the run's first attempt ("" = none). */
  base_checkpoint_id: string | null;
  /** The identity of the user who created the run (null without authentication). */
  owner: string | null;
  /** Runs of the owner that may execute at once (null: no limit). */
  max_running: number | null;
}

/** A thread row of the API. */
export interface ApiThread {
  thread_id: string;
  created_at: Date;
  updated_at: Date;
  metadata: Record<string, unknown>;
  status: ThreadStatus;
  values: Record<string, unknown> | null;
  interrupts: Record<string, unknown[]>;
}

/** What a thread search or count asks for. */
export interface ThreadQuery {
  /** Threads whose metadata contains this. */
  metadata?: Record<string, unknown>;
  /** Threads whose values contain this. */
  values?: Record<string, unknown>;
  status?: string;
  /** Only these thread ids. */
  ids?: string[];
  /** The caller's authorization filters (on metadata). */
  filters?: AuthFilters;
}

/** One stream event of a run. */
export interface RunEvent {
  id: string;
  event: string;
  /** JSON text of the event's data. */
  data: string;
}

/** NOTIFY channel: a run has new stream events (payload: run id). */
export const EVENTS_CHANNEL = "codehop_run_events";
/** NOTIFY channel: a run was cancelled (payload: run id). */
export const CANCEL_CHANNEL = "codehop_run_cancel";
/** NOTIFY channel: a thread was deleted (payload: thread id); workers drop what they keep of it. */
export const THREAD_DELETED_CHANNEL = "codehop_thread_deleted";

/** DDL of the server's tables in `schema`. */
export function serverTablesSql(schema: string): string {
  const s = `"${schema}"`;
  return `
CREATE TABLE IF NOT EXISTS ${s}.codehop_api_threads (
  thread_id TEXT PRIMARY KEY,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  metadata JSONB NOT NULL DEFAULT '{}',
  status TEXT NOT NULL DEFAULT 'idle',
  "values" JSONB,
  interrupts JSONB NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS codehop_api_threads_updated ON ${s}.codehop_api_threads (updated_at DESC);
CREATE TABLE IF NOT EXISTS ${s}.codehop_runs (
  run_id TEXT PRIMARY KEY,
  thread_id TEXT NOT NULL,
  assistant_id TEXT NOT NULL,
  graph_id TEXT NOT NULL,
  status TEXT NOT NULL,
  metadata JSONB NOT NULL DEFAULT '{}',
  kwargs JSONB NOT NULL,
  multitask_strategy TEXT NOT NULL DEFAULT 'reject',
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  started_at TIMESTAMPTZ,
  ended_at TIMESTAMPTZ,
  attempt INTEGER NOT NULL DEFAULT 0,
  worker_id TEXT,
  heartbeat_at TIMESTAMPTZ,
  cancel_action TEXT,
  error JSONB,
  base_checkpoint_id TEXT
);
CREATE INDEX IF NOT EXISTS codehop_runs_thread ON ${s}.codehop_runs (thread_id, created_at);
CREATE INDEX IF NOT EXISTS codehop_runs_inflight ON ${s}.codehop_runs (thread_id)
  WHERE status IN ('pending', 'running');
CREATE TABLE IF NOT EXISTS ${s}.codehop_run_events (
  id BIGSERIAL PRIMARY KEY,
  run_id TEXT NOT NULL,
  event TEXT NOT NULL,
  data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS codehop_run_events_run ON ${s}.codehop_run_events (run_id, id);
CREATE TABLE IF NOT EXISTS ${s}.codehop_uploads (
  thread_id TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  bytes BYTEA NOT NULL,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (thread_id, sha256)
);
CREATE TABLE IF NOT EXISTS ${s}.codehop_thread_deletions (
  id BIGSERIAL PRIMARY KEY,
  thread_id TEXT NOT NULL,
  deleted_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS codehop_api_threads_metadata ON ${s}.codehop_api_threads
  USING gin (metadata jsonb_path_ops);
-- Who made a run and an upload (the authenticated identity): per-user limits count by it.
ALTER TABLE ${s}.codehop_runs ADD COLUMN IF NOT EXISTS owner TEXT;
-- How many runs of its owner may execute at once (the server's limit when the run was made).
ALTER TABLE ${s}.codehop_runs ADD COLUMN IF NOT EXISTS max_running INTEGER;
ALTER TABLE ${s}.codehop_uploads ADD COLUMN IF NOT EXISTS owner TEXT;
CREATE INDEX IF NOT EXISTS codehop_runs_owner_inflight ON ${s}.codehop_runs (owner)
  WHERE status IN ('pending', 'running');
CREATE INDEX IF NOT EXISTS codehop_uploads_owner ON ${s}.codehop_uploads (owner);
${apiKeysTableSql(schema)};
CREATE TABLE IF NOT EXISTS ${s}.codehop_workers (
  worker_id TEXT PRIMARY KEY,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  concurrency INTEGER NOT NULL,
  started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  running INTEGER NOT NULL DEFAULT 0
);`;
}

/**
 * An authorization handler's filters as SQL conditions on a JSONB column (`metadata`), with their
 * values appended to `args`: `{ owner: "ada" }` and `{ owner: { $eq: "ada" } }` match that value,
 * `{ tags: { $contains: "x" } }` a list holding it. Applied in the query itself, so a page of
 * results is never filtered after the fact.
 */
export function filterSql(
  filters: AuthFilters | undefined,
  args: unknown[],
  column = "metadata",
): string[] {
  const where: string[] = [];
  const equals = (key: string, value: unknown) => {
    if (value === null || typeof value !== "object") {
      // Containment of a scalar is equality, and uses the GIN index.
      args.push(JSON.stringify({ [key]: value }));
      where.push(`${column} @> $${args.length}::jsonb`);
    } else {
      args.push(key, JSON.stringify(value));
      where.push(`(${column} -> $${args.length - 1}) = $${args.length}::jsonb`);
    }
  };
  for (const [key, condition] of Object.entries(filters ?? {})) {
    if (condition && typeof condition === "object" && !Array.isArray(condition)) {
      const ops = Object.keys(condition);
      const c = condition as { $eq?: unknown; $contains?: unknown };
      if (!ops.length || ops.some((op) => op !== "$eq" && op !== "$contains"))
        throw new Error(
          `Unsupported auth filter on "${key}": use a value, { $eq } or { $contains }.`,
        );
      if ("$eq" in c) equals(key, c.$eq);
      if ("$contains" in c) {
        args.push(key, JSON.stringify(Array.isArray(c.$contains) ? c.$contains : [c.$contains]));
        where.push(`(${column} -> $${args.length - 1}) @> $${args.length}::jsonb`);
      }
    } else equals(key, condition);
  }
  return where;
}

/** `AND`-joined conditions, or `TRUE`. */
const all = (conditions: string[]) => (conditions.length ? conditions.join(" AND ") : "TRUE");

/** Options of a new run. */
export interface NewRun {
  threadId: string;
  assistantId: string;
  graphId: string;
  kwargs: RunKwargs;
  metadata?: Record<string, unknown>;
  multitaskStrategy: MultitaskStrategy;
  /** The user's identity (per-user limits), null without authentication. */
  owner?: string | null;
  /** Refuse the run (RunLimitReached) when its owner already has this many pending or running. */
  maxActive?: number;
  /** Runs of its owner that may execute at once (workers hold the others in the queue). */
  maxRunning?: number;
  /** The thread must match these (the user's authorization filters). */
  filters?: AuthFilters;
}

/** Why a run could not be created. */
export class RunConflict extends Error {}

/** A user has as many runs pending or running as they may (the caller answers 429). */
export class RunLimitReached extends Error {}

/** What {@link ServerStore.takeRun} found. */
export type TakeOutcome =
  | { taken: RunRecord }
  /** The run is gone or ended (cancelled while pending, finished). */
  | { gone: true }
  /** Not now: its owner runs as many as they may, or an earlier run of its thread waits. */
  | { postponed: RunRecord };

/** The server's tables over a pool (the persistence's). */
export class ServerStore {
  readonly t: {
    threads: string;
    runs: string;
    events: string;
    workers: string;
    uploads: string;
    deletions: string;
  };

  constructor(
    readonly pool: pg.Pool,
    readonly schema: string,
  ) {
    const s = `"${schema}"`;
    this.t = {
      threads: `${s}.codehop_api_threads`,
      runs: `${s}.codehop_runs`,
      events: `${s}.codehop_run_events`,
      workers: `${s}.codehop_workers`,
      uploads: `${s}.codehop_uploads`,
      deletions: `${s}.codehop_thread_deletions`,
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Threads

  /** Creates a thread (or returns the existing one when `ifExists` is "do_nothing"). */
  async createThread(
    threadId: string | undefined,
    metadata: Record<string, unknown> = {},
    ifExists: "raise" | "do_nothing" = "raise",
  ): Promise<ApiThread | undefined> {
    const id = threadId ?? randomUUID();
    const { rows } = await this.pool.query<ApiThread>(
      `INSERT INTO ${this.t.threads} (thread_id, metadata) VALUES ($1, $2)
       ON CONFLICT (thread_id) DO NOTHING RETURNING *`,
      [id, JSON.stringify(metadata)],
    );
    if (rows[0]) return rows[0];
    return ifExists === "do_nothing" ? this.getThread(id) : undefined;
  }

  /** A thread, if it exists and matches `filters` (the caller's authorization). */
  async getThread(threadId: string, filters?: AuthFilters): Promise<ApiThread | undefined> {
    const args: unknown[] = [threadId];
    const where = ["thread_id = $1", ...filterSql(filters, args)];
    const { rows } = await this.pool.query<ApiThread>(
      `SELECT * FROM ${this.t.threads} WHERE ${all(where)}`,
      args,
    );
    return rows[0];
  }

  /** Merges `metadata` into a thread's metadata (only a thread matching `filters`). */
  async patchThread(
    threadId: string,
    metadata: Record<string, unknown>,
    filters?: AuthFilters,
  ): Promise<ApiThread | undefined> {
    const args: unknown[] = [threadId, JSON.stringify(metadata)];
    const where = ["thread_id = $1", ...filterSql(filters, args)];
    const { rows } = await this.pool.query<ApiThread>(
      `UPDATE ${this.t.threads} SET metadata = metadata || $2, updated_at = now()
       WHERE ${all(where)} RETURNING *`,
      args,
    );
    return rows[0];
  }

  /** The conditions of a thread search (the client's query and the caller's filters). */
  private threadConditions(query: ThreadQuery, args: unknown[]): string[] {
    const where = filterSql(query.filters, args);
    if (query.metadata && Object.keys(query.metadata).length) {
      args.push(JSON.stringify(query.metadata));
      where.push(`metadata @> $${args.length}`);
    }
    if (query.values && Object.keys(query.values).length) {
      args.push(JSON.stringify(query.values));
      where.push(`"values" @> $${args.length}`);
    }
    if (query.status) {
      args.push(query.status);
      where.push(`status = $${args.length}`);
    }
    if (query.ids) {
      args.push(query.ids);
      where.push(`thread_id = ANY($${args.length})`);
    }
    return where;
  }

  /** Threads matching a query and the caller's filters, newest first by `sortBy`. */
  async searchThreads(
    options: ThreadQuery & {
      limit: number;
      offset: number;
      sortBy?: "created_at" | "updated_at" | "thread_id" | "status";
      sortOrder?: "asc" | "desc";
    },
  ): Promise<ApiThread[]> {
    const args: unknown[] = [];
    const where = this.threadConditions(options, args);
    const sortBy = options.sortBy ?? "updated_at";
    const order = options.sortOrder === "asc" ? "ASC" : "DESC";
    args.push(options.limit, options.offset);
    const { rows } = await this.pool.query<ApiThread>(
      `SELECT * FROM ${this.t.threads} WHERE ${all(where)}
       ORDER BY ${sortBy} ${order}, thread_id LIMIT $${args.length - 1} OFFSET $${args.length}`,
      args,
    );
    return rows;
  }

  /** How many threads match a query and the caller's filters. */
  async countThreads(query: ThreadQuery): Promise<number> {
    const args: unknown[] = [];
    const where = this.threadConditions(query, args);
    const { rows } = await this.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM ${this.t.threads} WHERE ${all(where)}`,
      args,
    );
    return Number(rows[0].n);
  }

  /**
   * Copies a thread: its API row (with `metadata`), every checkpoint, write and blob of every
   * namespace, its call journal, its registry row and its uploads, under `newId`. Runs and their
   * events stay with the original.
   */
  async copyThread(
    from: ApiThread,
    newId: string,
    metadata: Record<string, unknown>,
    owner: string | null,
  ): Promise<ApiThread> {
    const s = `"${this.schema}"`;
    return inTransaction(this.pool, async (c) => {
      const { rows } = await c.query<ApiThread>(
        `INSERT INTO ${this.t.threads} (thread_id, metadata, status, "values", interrupts)
         VALUES ($1, $2, $3, $4, $5) RETURNING *`,
        [
          newId,
          JSON.stringify(metadata),
          from.status === "busy" ? "idle" : from.status,
          from.values === null ? null : JSON.stringify(from.values),
          JSON.stringify(from.interrupts ?? {}),
        ],
      );
      for (const table of [
        ...LINEAR_TABLES,
        "checkpoints",
        "checkpoint_blobs",
        "checkpoint_writes",
        "codehop_call_journal",
        "codehop_threads",
      ]) {
        const cols = await c.query<{ column_name: string }>(
          `SELECT column_name FROM information_schema.columns
           WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`,
          [this.schema, table],
        );
        const names = cols.rows.map((r) => r.column_name);
        if (!names.includes("thread_id")) continue;
        const list = names.map((n) => `"${n}"`).join(", ");
        const select = names.map((n) => (n === "thread_id" ? "$2" : `"${n}"`)).join(", ");
        await c.query(
          `INSERT INTO ${s}."${table}" (${list}) SELECT ${select} FROM ${s}."${table}" WHERE thread_id = $1`,
          [from.thread_id, newId],
        );
      }
      await c.query(
        `INSERT INTO ${this.t.uploads} (thread_id, sha256, bytes, owner)
         SELECT $2, sha256, bytes, $3 FROM ${this.t.uploads} WHERE thread_id = $1`,
        [from.thread_id, newId, owner],
      );
      return rows[0];
    });
  }

  /** Deletes a thread's API rows (its runs and their events too, unless `keepRuns`). */
  async deleteThreadRows(threadId: string, options: { keepRuns?: boolean } = {}): Promise<boolean> {
    return inTransaction(this.pool, async (c) => {
      if (!options.keepRuns) {
        await c.query(
          `DELETE FROM ${this.t.events} WHERE run_id IN (SELECT run_id FROM ${this.t.runs} WHERE thread_id = $1)`,
          [threadId],
        );
        await c.query(`DELETE FROM ${this.t.runs} WHERE thread_id = $1`, [threadId]);
      }
      // A deleted thread's uploads go even when its runs stay on record (stateless runs).
      await c.query(`DELETE FROM ${this.t.uploads} WHERE thread_id = $1`, [threadId]);
      const r = await c.query(`DELETE FROM ${this.t.threads} WHERE thread_id = $1`, [threadId]);
      // Workers keep data of their own about a thread (a conversation's file index in their
      // CODEHOP_HOME): each reads this log and drops its part (see threadDeletionsAfter).
      await c.query(`INSERT INTO ${this.t.deletions} (thread_id) VALUES ($1)`, [threadId]);
      await c.query(`SELECT pg_notify($1, $2)`, [THREAD_DELETED_CHANNEL, threadId]);
      return (r.rowCount ?? 0) > 0;
    });
  }

  /**
   * Deleted threads recorded after position `after` (0: all), oldest first, at most `limit`. A
   * deletion of a thread created again since (thread ids are the client's to choose) is left out:
   * a worker that starts or catches up later must not drop the new thread's data.
   */
  async threadDeletionsAfter(
    after: number,
    limit = 500,
  ): Promise<Array<{ id: number; threadId: string }>> {
    const { rows } = await this.pool.query<{ id: string; thread_id: string }>(
      `SELECT d.id, d.thread_id FROM ${this.t.deletions} d
       WHERE d.id > $1 AND NOT EXISTS (
         SELECT 1 FROM ${this.t.threads} t
         WHERE t.thread_id = d.thread_id AND t.created_at >= d.deleted_at)
       ORDER BY d.id LIMIT $2`,
      [after, limit],
    );
    return rows.map((r) => ({ id: Number(r.id), threadId: r.thread_id }));
  }

  /**
   * Stores a file a run's input uploaded to a thread, once per content (src/core/uploads.ts):
   * the run's input, events and checkpoints then carry only its hash.
   */
  async putUpload(
    threadId: string,
    sha256: string,
    bytes: Buffer,
    db: pg.Pool | pg.PoolClient = this.pool,
    owner: string | null = null,
  ): Promise<void> {
    await db.query(
      `INSERT INTO ${this.t.uploads} (thread_id, sha256, bytes, owner) VALUES ($1, $2, $3, $4)
       ON CONFLICT (thread_id, sha256) DO NOTHING`,
      [threadId, sha256, bytes, owner],
    );
  }

  /** Bytes a thread's uploads and a user's uploads (all threads) hold, leaving out `except` hashes. */
  async uploadBytes(
    threadId: string,
    owner: string | null,
    db: pg.Pool | pg.PoolClient = this.pool,
  ): Promise<{ thread: number; user: number; hashes: Set<string> }> {
    const { rows } = await db.query<{ thread: string; user: string; hashes: string[] | null }>(
      `SELECT
         COALESCE(SUM(octet_length(bytes)) FILTER (WHERE thread_id = $1), 0) AS thread,
         COALESCE(SUM(octet_length(bytes)) FILTER (WHERE owner IS NOT DISTINCT FROM $2), 0) AS user,
         array_agg(sha256) FILTER (WHERE thread_id = $1) AS hashes
       FROM ${this.t.uploads} WHERE thread_id = $1 OR ($2::text IS NOT NULL AND owner = $2)`,
      [threadId, owner],
    );
    return {
      thread: Number(rows[0].thread),
      user: owner === null ? 0 : Number(rows[0].user),
      hashes: new Set(rows[0].hashes ?? []),
    };
  }

  /** The bytes of a thread's upload, or undefined. */
  async getUpload(threadId: string, sha256: string): Promise<Uint8Array | undefined> {
    const { rows } = await this.pool.query<{ bytes: Buffer }>(
      `SELECT bytes FROM ${this.t.uploads} WHERE thread_id = $1 AND sha256 = $2`,
      [threadId, sha256],
    );
    return rows[0]?.bytes;
  }

  /** Records how a run left its thread (status, latest values, pending interrupts). */
  async setThreadOutcome(
    threadId: string,
    outcome: {
      status: ThreadStatus;
      values?: Record<string, unknown> | null;
      interrupts?: Record<string, unknown[]>;
    },
  ): Promise<void> {
    await this.pool.query(
      `UPDATE ${this.t.threads} SET updated_at = now(),
         status = CASE WHEN $2 = 'idle' AND EXISTS (
             SELECT 1 FROM ${this.t.runs} WHERE thread_id = $1 AND status = 'pending') THEN 'busy'
           ELSE $2 END,
         "values" = COALESCE($3::jsonb, "values"), interrupts = COALESCE($4::jsonb, interrupts)
       WHERE thread_id = $1`,
      [
        threadId,
        outcome.status,
        outcome.values === undefined ? null : JSON.stringify(outcome.values),
        outcome.interrupts === undefined ? null : JSON.stringify(outcome.interrupts),
      ],
    );
  }

  // ---------------------------------------------------------------------------------------------
  // Runs

  /**
   * Creates a pending run on a thread under the thread's row lock, applying the multitask
   * strategy to runs in flight: "reject" throws RunConflict, "enqueue" queues behind them,
   * "interrupt" asks them to stop first. `enqueue(client)` puts the run's job on the queue in the
   * same transaction, so a run row never exists without its job (or the reverse).
   */
  async createRun(
    run: NewRun,
    enqueue: (client: pg.PoolClient, runId: string) => Promise<void>,
  ): Promise<{ run: RunRecord; interrupted: string[] }> {
    return inTransaction(this.pool, async (c) => {
      if (run.owner) {
        // One run creation per user at a time: the count below and the uploads the caller checks
        // in `enqueue` are exact.
        await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`codehop-user:${run.owner}`]);
        if (run.maxActive) {
          const active = await c.query<{ n: string }>(
            `SELECT count(*) AS n FROM ${this.t.runs}
             WHERE owner = $1 AND status IN ('pending', 'running')`,
            [run.owner],
          );
          if (Number(active.rows[0].n) >= run.maxActive)
            throw new RunLimitReached(
              `You have ${active.rows[0].n} runs pending or running, the most one user may have at once (${run.maxActive}): wait for one to end.`,
            );
        }
      }
      const lockArgs: unknown[] = [
        run.threadId,
        JSON.stringify({ graph_id: run.graphId, assistant_id: run.assistantId }),
      ];
      const lockWhere = ["thread_id = $1", ...filterSql(run.filters, lockArgs)];
      const locked = await c.query(
        `UPDATE ${this.t.threads} SET status = 'busy', updated_at = now(),
           metadata = metadata || $2 WHERE ${all(lockWhere)} RETURNING thread_id`,
        lockArgs,
      );
      if (!locked.rowCount) throw new RunConflict(`Thread ${run.threadId} not found`);
      const inflight = await c.query<{ run_id: string }>(
        `SELECT run_id FROM ${this.t.runs} WHERE thread_id = $1 AND status IN ('pending', 'running')`,
        [run.threadId],
      );
      const others = inflight.rows.map((r) => r.run_id);
      if (others.length && run.multitaskStrategy === "reject") {
        throw new RunConflict(
          "Thread is already running a task. Wait for it to finish or choose a different multitask strategy.",
        );
      }
      const runId = randomUUID();
      const { rows } = await c.query<RunRecord>(
        `INSERT INTO ${this.t.runs} (run_id, thread_id, assistant_id, graph_id, status, metadata,
           kwargs, multitask_strategy, owner, max_running)
         VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8, $9) RETURNING *`,
        [
          runId,
          run.threadId,
          run.assistantId,
          run.graphId,
          JSON.stringify(run.metadata ?? {}),
          JSON.stringify(run.kwargs),
          run.multitaskStrategy,
          run.owner ?? null,
          run.maxRunning || null,
        ],
      );
      const interrupted = run.multitaskStrategy === "interrupt" ? others : [];
      for (const id of interrupted) await this.requestCancel(c, id, "interrupt");
      await enqueue(c, runId);
      return { run: rows[0], interrupted };
    });
  }

  /**
   * A run, by id (and thread, when given); `filters` (the caller's authorization) apply to the
   * run's own metadata, which carries its creator's owner mark even after its thread is gone.
   */
  async getRun(
    runId: string,
    threadId?: string,
    filters?: AuthFilters,
  ): Promise<RunRecord | undefined> {
    const args: unknown[] = [runId];
    const where = ["run_id = $1"];
    if (threadId) {
      args.push(threadId);
      where.push(`thread_id = $${args.length}`);
    }
    where.push(...filterSql(filters, args));
    const { rows } = await this.pool.query<RunRecord>(
      `SELECT * FROM ${this.t.runs} WHERE ${all(where)}`,
      args,
    );
    return rows[0];
  }

  async listRuns(
    threadId: string,
    options: { limit: number; offset: number; status?: string },
  ): Promise<RunRecord[]> {
    const args: unknown[] = [threadId];
    let where = "thread_id = $1";
    if (options.status) {
      args.push(options.status);
      where += ` AND status = $${args.length}`;
    }
    args.push(options.limit, options.offset);
    const { rows } = await this.pool.query<RunRecord>(
      `SELECT * FROM ${this.t.runs} WHERE ${where} ORDER BY created_at DESC
       LIMIT $${args.length - 1} OFFSET $${args.length}`,
      args,
    );
    return rows;
  }

  /**
   * Asks a run to stop: a pending run is marked interrupted at once (its job finds it so and does
   * nothing); a running one gets `cancel_action`, and every worker hears the NOTIFY (the one running
   * it aborts; its heartbeat also reads the column, in case the notification was missed).
   */
  async requestCancel(
    client: pg.PoolClient | pg.Pool,
    runId: string,
    action: "interrupt",
  ): Promise<RunRecord | undefined> {
    const { rows } = await client.query<RunRecord>(
      `UPDATE ${this.t.runs} SET cancel_action = $2, updated_at = now(),
         status = CASE WHEN status = 'pending' THEN 'interrupted' ELSE status END,
         ended_at = CASE WHEN status = 'pending' THEN now() ELSE ended_at END
       WHERE run_id = $1 AND status IN ('pending', 'running') RETURNING *`,
      [runId, action],
    );
    if (rows[0]) {
      await client.query("SELECT pg_notify($1, $3), pg_notify($2, $3)", [
        CANCEL_CHANNEL,
        EVENTS_CHANNEL,
        runId,
      ]);
    }
    return rows[0];
  }

  /**
   * A worker takes a run: it becomes running under `workerId` with one more attempt. `gone` when
   * the run is gone or already ended (cancelled while pending, finished); `postponed` when it
   * must wait (the caller puts it back on the queue).
   */
  async takeRun(runId: string, workerId: string): Promise<TakeOutcome> {
    return inTransaction(this.pool, async (c) => {
      const found = await c.query<RunRecord>(
        `SELECT * FROM ${this.t.runs} WHERE run_id = $1 AND status IN ('pending', 'running')`,
        [runId],
      );
      const run = found.rows[0];
      if (!run) return { gone: true as const };
      // A pending run (not one taken over from a lost worker) waits while its owner runs as many
      // as they may, or while an earlier run of its thread waits (postponed runs keep their order).
      if (run.status === "pending") {
        if (run.owner && run.max_running) {
          await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [
            `codehop-running:${run.owner}`,
          ]);
          const running = await c.query<{ n: string }>(
            `SELECT count(*) AS n FROM ${this.t.runs} WHERE owner = $1 AND status = 'running'`,
            [run.owner],
          );
          if (Number(running.rows[0].n) >= run.max_running) return { postponed: run };
        }
        const earlier = await c.query(
          `SELECT 1 FROM ${this.t.runs} WHERE thread_id = $1 AND status = 'pending'
             AND run_id <> $2 AND created_at < $3 LIMIT 1`,
          [run.thread_id, run.run_id, run.created_at],
        );
        if (earlier.rowCount) return { postponed: run };
      }
      const { rows } = await c.query<RunRecord>(
        `UPDATE ${this.t.runs} SET status = 'running', worker_id = $2, attempt = attempt + 1,
           heartbeat_at = now(), updated_at = now(), started_at = COALESCE(started_at, now())
         WHERE run_id = $1 AND status IN ('pending', 'running') RETURNING *`,
        [runId, workerId],
      );
      return rows[0] ? { taken: rows[0] } : { gone: true as const };
    });
  }

  /** Records the thread's checkpoint a run started from (first attempt only). */
  async setBaseCheckpoint(runId: string, checkpointId: string): Promise<void> {
    await this.pool.query(
      `UPDATE ${this.t.runs} SET base_checkpoint_id = $2 WHERE run_id = $1 AND base_checkpoint_id IS NULL`,
      [runId, checkpointId],
    );
  }

  /**
   * Heartbeat of a worker's runs: refreshes those it still holds and returns them with their
   * cancel requests. A run missing from the answer was taken over by another worker (this one
   * lost its lease) or deleted: the caller stops it.
   */
  async heartbeat(
    workerId: string,
    runIds: readonly string[],
  ): Promise<Map<string, string | null>> {
    await this.pool.query(
      `UPDATE ${this.t.workers} SET heartbeat_at = now(), running = $2 WHERE worker_id = $1`,
      [workerId, runIds.length],
    );
    if (!runIds.length) return new Map();
    const { rows } = await this.pool.query<{ run_id: string; cancel_action: string | null }>(
      `UPDATE ${this.t.runs} SET heartbeat_at = now()
       WHERE run_id = ANY($1) AND worker_id = $2 AND status = 'running'
       RETURNING run_id, cancel_action`,
      [runIds, workerId],
    );
    return new Map(rows.map((r) => [r.run_id, r.cancel_action]));
  }

  /** Ends a run (only while `workerId` still holds it, when given). */
  async finishRun(
    runId: string,
    status: RunStatus,
    error: { error: string; message: string } | null = null,
    workerId?: string,
  ): Promise<boolean> {
    // Readers of the run's stream wake up on the notification and see it ended.
    const r = await this.pool.query(
      `WITH done AS (
         UPDATE ${this.t.runs} SET status = $2, error = $3, updated_at = now(), ended_at = now()
         WHERE run_id = $1 AND status IN ('pending', 'running') ${workerId ? "AND worker_id = $5" : ""}
         RETURNING run_id)
       SELECT pg_notify($4, run_id) FROM done`,
      workerId
        ? [runId, status, error && JSON.stringify(error), EVENTS_CHANNEL, workerId]
        : [runId, status, error && JSON.stringify(error), EVENTS_CHANNEL],
    );
    return (r.rowCount ?? 0) > 0;
  }

  async deleteRun(runId: string, threadId: string): Promise<boolean> {
    return inTransaction(this.pool, async (c) => {
      await c.query(`DELETE FROM ${this.t.events} WHERE run_id = $1`, [runId]);
      const r = await c.query(`DELETE FROM ${this.t.runs} WHERE run_id = $1 AND thread_id = $2`, [
        runId,
        threadId,
      ]);
      return (r.rowCount ?? 0) > 0;
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Events

  /** Appends stream events of a run and notifies listeners. */
  async appendEvents(
    runId: string,
    events: ReadonlyArray<{ event: string; data: string }>,
  ): Promise<void> {
    if (!events.length) return;
    await this.pool.query(
      `WITH added AS (
         INSERT INTO ${this.t.events} (run_id, event, data)
         SELECT $1, e, d FROM unnest($2::text[], $3::text[]) AS x(e, d) RETURNING 1)
       SELECT pg_notify($4, $1) FROM (SELECT 1 FROM added LIMIT 1) AS any_added`,
      [runId, events.map((e) => e.event), events.map((e) => e.data), EVENTS_CHANNEL],
    );
  }

  /** Events of a run after event id `after` (exclusive), oldest first. */
  async eventsAfter(runId: string, after: string, limit = 500): Promise<RunEvent[]> {
    const { rows } = await this.pool.query<RunEvent>(
      // Ordered by the bigint column (e.id), not by the text alias "id" ("10" < "9").
      `SELECT e.id::text AS id, e.event, e.data FROM ${this.t.events} e
       WHERE e.run_id = $1 AND e.id > $2::bigint ORDER BY e.id LIMIT $3`,
      [runId, after, limit],
    );
    return rows;
  }

  /** The last event of a run named `event` (e.g. its final values), if any. */
  async lastEvent(runId: string, events: readonly string[]): Promise<RunEvent | undefined> {
    const { rows } = await this.pool.query<RunEvent>(
      `SELECT e.id::text AS id, e.event, e.data FROM ${this.t.events} e
       WHERE e.run_id = $1 AND e.event = ANY($2) ORDER BY e.id DESC LIMIT 1`,
      [runId, events],
    );
    return rows[0];
  }

  /** Drops the events of runs that ended more than `seconds` ago (streams of old runs). */
  async pruneEvents(seconds: number): Promise<number> {
    const r = await this.pool.query(
      `DELETE FROM ${this.t.events} WHERE run_id IN (
         SELECT run_id FROM ${this.t.runs} WHERE ended_at < now() - make_interval(secs => $1))`,
      [seconds],
    );
    return r.rowCount ?? 0;
  }

  /**
   * Deletes the thread-deletion log's entries older than `seconds`. Meant for the chat files'
   * retention: a worker that was down longer than that drops a deleted conversation's files with
   * its own retention sweep (the conversation has been idle at least that long), so it no longer
   * needs the entry.
   */
  async pruneThreadDeletions(seconds: number): Promise<number> {
    const r = await this.pool.query(
      `DELETE FROM ${this.t.deletions} WHERE deleted_at < now() - make_interval(secs => $1)`,
      [seconds],
    );
    return r.rowCount ?? 0;
  }

  // ---------------------------------------------------------------------------------------------
  // Workers

  async registerWorker(workerId: string, host: string, pid: number, concurrency: number) {
    await this.pool.query(
      `INSERT INTO ${this.t.workers} (worker_id, host, pid, concurrency) VALUES ($1, $2, $3, $4)
       ON CONFLICT (worker_id) DO UPDATE SET heartbeat_at = now()`,
      [workerId, host, pid, concurrency],
    );
  }

  async removeWorker(workerId: string): Promise<void> {
    await this.pool.query(`DELETE FROM ${this.t.workers} WHERE worker_id = $1`, [workerId]);
  }

  /** Workers whose heartbeat is younger than `seconds`. */
  async liveWorkers(seconds: number): Promise<Array<Record<string, unknown>>> {
    const { rows } = await this.pool.query(
      `SELECT worker_id, host, pid, concurrency, running, started_at, heartbeat_at
       FROM ${this.t.workers} WHERE heartbeat_at > now() - make_interval(secs => $1)
       ORDER BY started_at`,
      [seconds],
    );
    return rows;
  }
}
