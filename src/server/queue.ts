import { type Job, PgBoss } from "pg-boss";
import type pg from "pg";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { redactUrl } from "../persistence/postgres-database.ts";

/**
 * The job queue of `codehop serve`, `codehop worker` and `codehop eval --queue`: pg-boss
 * (Postgres-only, SKIP LOCKED fetches, LISTEN/NOTIFY wake-ups). Why pg-boss and not
 * graphile-worker: a run can take minutes, and a worker killed mid-run must hand it over within
 * seconds; pg-boss has per-job heartbeats (`heartbeatSeconds`: a job whose worker stops beating
 * is retried on another worker after that long), per-key strict FIFO (`key_strict_fifo`: runs of
 * one thread never overlap and keep their order, runs of different threads go in parallel),
 * dead-letter queues and enqueueing inside the caller's transaction. graphile-worker releases a
 * crashed worker's jobs only after a fixed 4 hours (or a hand-written sweeper calling
 * `forceUnlockWorkers`).
 */

/** Runs of the LangGraph API (data: `{ runId }`, singleton key: the thread id). */
export const RUNS_QUEUE = "codehop-runs";
/** Runs whose workers were lost more often than the retry limit allows. */
export const DEAD_RUNS_QUEUE = "codehop-runs-dead";
/** Questions of distributed evaluations (data: see src/server/eval-queue.ts). */
export const EVAL_QUEUE = "codehop-eval";
/** Eval questions whose workers were lost more often than the retry limit allows. */
export const DEAD_EVAL_QUEUE = "codehop-eval-dead";

/** Where and how the queue runs. */
export interface QueueOptions {
  /** postgres:// URL of the database (the same as the persistence's). */
  url: string;
  /** Schema of pg-boss's tables. Default "codehop_queue". */
  schema?: string;
  /**
   * Seconds without a heartbeat after which a worker's job is given to another worker (>= 10, a
   * pg-boss minimum). Default 30.
   */
  leaseSeconds?: number;
  /** Times a job is retried after its worker was lost. Default 5. */
  retryLimit?: number;
  /** Connections of pg-boss's own pool. Default 10. */
  poolSize?: number;
}

/** The pg-boss schema of a queue (validated like the persistence's). */
export function queueSchema(options: QueueOptions): string {
  const schema = options.schema ?? "codehop_queue";
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema)) {
    throw new CodehopError(ErrorCodes.CONFIG_INVALID, `Invalid queue schema name "${schema}".`);
  }
  return schema;
}

/** The lease of a queue in seconds (validated). */
export function leaseSecondsOf(options: QueueOptions): number {
  const lease = options.leaseSeconds ?? 30;
  if (!Number.isInteger(lease) || lease < 10) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `The lease must be a whole number of seconds >= 10, got ${lease}.`,
    );
  }
  return lease;
}

/**
 * Starts pg-boss on the database (creating its schema and the queues on first use). The monitor
 * that fails jobs with a stale heartbeat runs every lease/5 seconds, so a lost worker's run is
 * retried between one lease and 1.2 leases after its last heartbeat.
 */
export async function openQueue(options: QueueOptions): Promise<PgBoss> {
  const lease = leaseSecondsOf(options);
  const check = Math.max(1, Math.floor(lease / 5));
  const boss = new PgBoss({
    connectionString: options.url,
    schema: queueSchema(options),
    max: options.poolSize ?? 10,
    superviseIntervalSeconds: check,
    monitorIntervalSeconds: check,
    useListenNotify: true,
  });
  // pg-boss reports background errors (a lost connection it will retry) as events.
  boss.on("error", (err) => {
    process.stderr.write(`codehop queue: ${(err as Error).message}\n`);
  });
  try {
    await boss.start();
  } catch (err) {
    throw new CodehopError(
      ErrorCodes.DB_INVALID,
      `Cannot start the job queue on ${redactUrl(options.url)}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  const common = {
    heartbeatSeconds: lease,
    retryLimit: options.retryLimit ?? 5,
    retryDelay: 0,
    // A run may take long; dead workers are found by their heartbeat, not by this.
    expireInSeconds: 24 * 3600,
    notify: true,
  };
  for (const [name, dead] of [
    [RUNS_QUEUE, DEAD_RUNS_QUEUE],
    [EVAL_QUEUE, DEAD_EVAL_QUEUE],
  ]) {
    if (!(await boss.getQueue(dead))) await createQueueOnce(boss, dead, { retryLimit: 2 });
    if (!(await boss.getQueue(name))) {
      await createQueueOnce(boss, name, {
        ...common,
        // Runs of one thread one after another, in order; other threads in parallel.
        ...(name === RUNS_QUEUE ? { policy: "key_strict_fifo" as const } : {}),
        deadLetter: dead,
      });
    }
  }
  return boss;
}

/** createQueue that tolerates another process creating the same queue at the same moment. */
async function createQueueOnce(
  boss: PgBoss,
  name: string,
  options: Parameters<PgBoss["createQueue"]>[1],
): Promise<void> {
  try {
    await boss.createQueue(name, options);
  } catch (err) {
    if (!(await boss.getQueue(name))) throw err;
  }
}

/**
 * How often an idle worker polls the queue besides NOTIFY wake-ups. New jobs wake workers at once,
 * but a job retried after its worker was lost sends no NOTIFY: this bounds how long it waits.
 */
export function pollSecondsOf(options: QueueOptions): number {
  return Math.max(1, Math.floor(leaseSecondsOf(options) / 5));
}

/**
 * Takes jobs of `name` with `concurrency` pollers, each fetching its next job as soon as its
 * handler returns. pg-boss's `localConcurrency` pollers instead sleep the NOTIFY backstop interval
 * (lease/5: 6 s by default) after every job, because NOTIFY fires only when a job is inserted: a
 * backlog of 50 runs submitted at once then went through 4 at a time with a 5-s pause after each
 * (issue 23's 8.9-s queue latency). Each poller is its own `work()` so it can be woken by id;
 * `offWork(name)` still stops them all. A poller that finds the queue empty sleeps until a NOTIFY
 * or its backstop poll, as before.
 */
export async function workEagerly<T extends object>(
  boss: PgBoss,
  name: string,
  concurrency: number,
  options: { pollSeconds: number },
  handler: (job: Job<T>) => Promise<void>,
): Promise<void> {
  for (let i = 0; i < concurrency; i++) {
    let id = "";
    id = await boss.work<T>(
      name,
      { pollingIntervalSeconds: 1, notifyPollingIntervalSeconds: options.pollSeconds },
      async ([job]) => {
        try {
          await handler(job);
        } finally {
          // Skips the sleep after this job: the poller fetches again at once.
          boss.notifyWorker(id);
        }
      },
    );
  }
}

/** pg-boss's database adapter over a client in a transaction (jobs enqueued with the caller's rows). */
export function inClient(client: pg.PoolClient) {
  return {
    executeSql: async (text: string, values?: unknown[]) => {
      const r = await client.query(text, values as unknown[]);
      return { rows: r.rows };
    },
  };
}
