import { randomUUID } from "node:crypto";
import type pg from "pg";
import { inTransaction } from "../persistence/postgres-database.ts";
import type { AuthFilters } from "./auth.ts";
import { all, filterSql } from "./store-filters.ts";
import {
  CANCEL_CHANNEL,
  EVENTS_CHANNEL,
  RUN_ENDED_CHANNEL,
  type MultitaskStrategy,
  type RunKwargs,
  type RunRecord,
  type RunStatus,
} from "./store-schema.ts";
import { ThreadTables } from "./store-threads.ts";

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

/**
 * The runs of the server's tables (part of {@link ServerStore}): a run's creation under its
 * thread's lock and its user's limits, its reads, cancellation, a worker's taking it, heartbeats
 * and its end.
 */
export class RunTables extends ThreadTables {
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
      // A pending run ends here (interrupted before any worker took it).
      const ended = rows[0].status === "interrupted";
      await client.query(
        `SELECT pg_notify($1, $3), pg_notify($2, $3)${ended ? ", pg_notify($4, $3)" : ""}`,
        [CANCEL_CHANNEL, EVENTS_CHANNEL, runId, ...(ended ? [RUN_ENDED_CHANNEL] : [])],
      );
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
         WHERE run_id = $1 AND status IN ('pending', 'running') ${workerId ? "AND worker_id = $6" : ""}
         RETURNING run_id)
       SELECT pg_notify($4, run_id), pg_notify($5, run_id) FROM done`,
      [
        runId,
        status,
        error && JSON.stringify(error),
        EVENTS_CHANNEL,
        RUN_ENDED_CHANNEL,
        ...(workerId ? [workerId] : []),
      ],
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
}
