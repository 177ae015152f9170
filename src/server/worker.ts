import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import pg from "pg";
import type { Job } from "pg-boss";
import { getDefaultSandbox } from "../core/default-sandbox.ts";
import { type Backend, type BackendOptions, openBackend, queueOptionsOf } from "./backend.ts";
import { executeRun } from "./execute.ts";
import { readEnv } from "../config/env.ts";
import { LazyStore, memoryStoreOptions } from "../memory/open.ts";
import {
  DEAD_RUNS_QUEUE,
  RUNS_QUEUE,
  leaseSecondsOf,
  pollSecondsOf,
  workEagerly,
} from "./queue.ts";
import { CANCEL_CHANNEL, THREAD_DELETED_CHANNEL } from "./store.ts";

/**
 * `codehop worker`: takes runs from the queue and executes them with this machine's sandbox pool,
 * any number of workers on any number of machines sharing one database. Each run's job heartbeats
 * through pg-boss; the run's row heartbeats too (every lease/3 s), which is how a worker hears a
 * cancel it missed and learns that its run was given to another worker (it then stops it: two
 * workers never advance one thread). A worker killed with kill -9 stops heartbeating: after the
 * lease its runs are taken by other workers and continue from their last checkpoints, the call
 * journal serving every sub-agent call already finished.
 */

/**
 * Runs a worker executes at once unless told otherwise. With 4, 50 runs submitted at once waited
 * 3x longer for a worker than langgraph dev's 10 (bench/serving.bench.ts); 16 matches the default
 * sandbox's process cap, so each run in flight can hold a warm process for its actions.
 */
export const DEFAULT_WORKER_CONCURRENCY = 16;

/** Options of {@link startWorker}. */
export interface WorkerOptions extends BackendOptions {
  /**
   * Runs executed at once by this worker. Default {@link DEFAULT_WORKER_CONCURRENCY}: a run mostly
   * waits on its model, so a worker keeps many in flight (langgraph dev runs 10 at once).
   */
  concurrency?: number;
  /** Id of this worker in the runs it holds (default: a new UUID). */
  workerId?: string;
  /** Also serve distributed eval questions (registered by src/server/eval-queue.ts). */
  extraQueues?: (backend: Backend, workerId: string) => Promise<void>;
  /** Receives one line per notable event (taken, finished, lost ...). */
  log?: (line: string) => void;
  /**
   * Drops what this worker keeps of a deleted thread outside the database (the apps' data in its
   * own CODEHOP_HOME, e.g. a conversation's file index). Called for every thread deleted while
   * the worker runs (NOTIFY) and, at start, for every one recorded before (idempotent).
   */
  onThreadDeleted?: (threadId: string) => Promise<void>;
}

/** A started worker. */
export interface RunningWorker {
  readonly workerId: string;
  readonly backend: Backend;
  /** Runs being executed now. */
  readonly active: ReadonlySet<string>;
  /**
   * Stops taking runs; the runs in progress are stopped and handed back to the queue at once
   * (another worker resumes them from their checkpoints). Idempotent.
   */
  stop(): Promise<void>;
}

/** How long a run whose owner runs as many as they may waits before a worker looks again. */
const POSTPONE_SECONDS = 2;

/** Why a run stops on this worker. */
type StopReason = "cancel" | "lost" | "shutdown";

/** Starts a worker on the database of `options`. */
export async function startWorker(options: WorkerOptions): Promise<RunningWorker> {
  const workerId = options.workerId ?? randomUUID();
  const concurrency = options.concurrency ?? DEFAULT_WORKER_CONCURRENCY;
  const lease = leaseSecondsOf(queueOptionsOf(options));
  const log = options.log ?? (() => {});
  // Each run in progress needs a connection now and then (checkpoints, journal, events): a pool
  // that grows with the concurrency, within what a default PostgreSQL (100 connections) allows
  // for a few workers. A run holds one only for a query at a time: a third of the runs in flight
  // (11 at the default 16) keeps a worker's connections where they were with 4 runs (9).
  const backend = await openBackend({
    ...options,
    poolSize: options.poolSize ?? Math.min(20, 5 + Math.ceil(concurrency / 3)),
  });
  const { store, queue, graphs, persistence } = backend;
  // LangGraph's long-term store of the runs (`config.store`, `getStore()`, memory tools): the
  // database's store tables, which `codehop serve`'s /store endpoints serve too.
  const memory = new LazyStore(async () => {
    const { openPostgresMemoryStore } = await import("../memory/postgres-store.ts");
    return openPostgresMemoryStore(
      { pool: persistence.pool, schema: persistence.schema },
      memoryStoreOptions(readEnv()),
    );
  });
  await store.registerWorker(workerId, hostname(), process.pid, concurrency);
  const running = new Map<string, AbortController>();
  const stop = (runId: string, reason: StopReason) => running.get(runId)?.abort(reason);

  // Cancels reach the worker running the run at once through NOTIFY; the heartbeat below reads
  // the cancel column too, in case this listener was reconnecting at the time.
  const listener = new pg.Client({ connectionString: options.databaseUrl });
  listener.on("error", () => {});
  await listener.connect();
  await listener.query(`LISTEN ${CANCEL_CHANNEL}`);
  listener.on("notification", (n) => {
    if (n.channel === CANCEL_CHANNEL && n.payload) stop(n.payload, "cancel");
    if (n.channel === THREAD_DELETED_CHANNEL) void sweepDeletions();
  });

  // Deleted threads, read from the store's log in order: at start (everything recorded before),
  // on NOTIFY and on every heartbeat (a notification missed while reconnecting). One sweep at a
  // time; a hook that fails is retried at the next sweep.
  let deletionsSeen = 0;
  let sweeping: Promise<void> = Promise.resolve();
  const sweepDeletions = (): Promise<void> => {
    const onDeleted = options.onThreadDeleted;
    if (!onDeleted) return sweeping;
    sweeping = sweeping.then(async () => {
      try {
        for (;;) {
          const batch = await store.threadDeletionsAfter(deletionsSeen);
          for (const { id, threadId } of batch) {
            await onDeleted(threadId);
            deletionsSeen = id;
          }
          if (batch.length < 500) break;
        }
      } catch (err) {
        log(`dropping a deleted thread's data failed: ${(err as Error).message}`);
      }
    });
    return sweeping;
  };
  if (options.onThreadDeleted) await listener.query(`LISTEN ${THREAD_DELETED_CHANNEL}`);
  await sweepDeletions();

  const beat = async () => {
    try {
      // Only the runs asked about: a run taken while the query was on its way is not lost.
      const asked = [...running.keys()];
      const held = await store.heartbeat(workerId, asked);
      for (const runId of asked) {
        if (!held.has(runId)) stop(runId, "lost");
        else if (held.get(runId)) stop(runId, "cancel");
      }
    } catch (err) {
      log(`heartbeat failed: ${(err as Error).message}`);
    }
    void sweepDeletions();
  };
  const heartbeat = setInterval(() => void beat(), Math.max(1000, (lease * 1000) / 3));

  // Warm the sandbox pool so the first action does not pay for its start.
  void getDefaultSandbox().catch(() => {});

  const handleRun = async (job: Job<{ runId: string }>) => {
    const runId = job.data.runId;
    const outcome = await store.takeRun(runId, workerId);
    if ("gone" in outcome) return; // cancelled while pending, or already finished
    if ("postponed" in outcome) {
      // Its owner runs as many as they may (or an earlier run of the thread waits): back on the
      // queue for a little later; this job ends.
      await queue.send(
        RUNS_QUEUE,
        { runId },
        { singletonKey: outcome.postponed.thread_id, startAfter: POSTPONE_SECONDS },
      );
      return;
    }
    const run = outcome.taken;
    const resolved = graphs.resolve(run.graph_id);
    if (!resolved) {
      await store.appendEvents(runId, [
        {
          event: "error",
          data: JSON.stringify({
            error: "GraphNotFound",
            message: `This worker does not serve graph "${run.graph_id}" (graphs file ${graphs.file}).`,
          }),
        },
      ]);
      // The thread's status first: a client waiting on the run reads the thread when it ends.
      await store.setThreadOutcome(run.thread_id, { status: "error" });
      await store.finishRun(runId, "error", {
        error: "GraphNotFound",
        message: `graph "${run.graph_id}" not served by worker ${workerId}`,
      });
      return;
    }
    const controller = new AbortController();
    running.set(runId, controller);
    // A cancel asked between the queue and here.
    if (run.cancel_action) controller.abort("cancel");
    log(`run ${runId} taken (thread ${run.thread_id}, attempt ${run.attempt})`);
    try {
      const end = await executeRun({
        run,
        graph: resolved.graph,
        persistence,
        store,
        memory,
        signal: controller.signal,
        workerId,
      });
      if (end.status === "aborted") {
        if (end.reason === "cancel") {
          // The thread is idle before the run reads as ended (`cancel?wait=1` returns then).
          await store.setThreadOutcome(run.thread_id, { status: "idle" });
          await store.finishRun(runId, "interrupted", null, workerId);
          log(`run ${runId} cancelled`);
        } else if (end.reason === "shutdown") {
          // Handed back: the job fails and is retried at once by another worker.
          throw new Error(`worker ${workerId} shut down during the run`);
        } else {
          // The run row is no longer this worker's (its lease expired and another worker took
          // it, or it was deleted): fail this attempt of the job. If the job was already retried,
          // pg-boss leaves it alone; otherwise it is retried and continues from the checkpoint.
          log(`run ${runId} lost (this worker no longer holds it)`);
          throw new Error(`worker ${workerId} no longer holds run ${runId}`);
        }
        return;
      }
      await store.finishRun(runId, end.status, end.status === "error" ? end.error : null, workerId);
      if (run.kwargs.temporary) {
        // A stateless run's thread goes; its run row and events stay for the waiting client.
        await persistence.deleteThread(run.thread_id);
        await store.deleteThreadRows(run.thread_id, { keepRuns: true });
      }
      log(`run ${runId} ${end.status}`);
    } finally {
      running.delete(runId);
    }
  };

  // A run whose workers were lost more often than the retry limit allows: it ends in error, and
  // its failed job is removed so the thread's later runs are not blocked behind it.
  const handleDeadRun = async ([job]: Job<{ runId: string }>[]) => {
    const full = await queue.getJobById<{ runId: string }>(DEAD_RUNS_QUEUE, job.id);
    const runId = job.data.runId;
    const error = {
      error: "WorkerLost",
      message: `The workers running this run stopped heartbeating ${(full?.retryCount ?? 0) + 1} times; giving up.`,
    };
    const run = await store.getRun(runId);
    if (run && (await store.finishRun(runId, "error", error))) {
      await store.appendEvents(runId, [{ event: "error", data: JSON.stringify(error) }]);
      await store.setThreadOutcome(run.thread_id, { status: "error" });
      await persistence.threads.fail(run.thread_id, error.message);
    }
    if (full?.sourceId) await queue.deleteJob(RUNS_QUEUE, full.sourceId).catch(() => {});
  };

  await workEagerly(
    queue,
    RUNS_QUEUE,
    concurrency,
    { pollSeconds: pollSecondsOf(queueOptionsOf(options)) },
    handleRun,
  );
  await queue.work<{ runId: string }>(
    DEAD_RUNS_QUEUE,
    { pollingIntervalSeconds: 2 },
    handleDeadRun,
  );
  await options.extraQueues?.(backend, workerId);

  let stopped: Promise<void> | undefined;
  return {
    workerId,
    backend,
    get active() {
      return new Set(running.keys());
    },
    stop() {
      stopped ??= (async () => {
        clearInterval(heartbeat);
        await sweeping;
        for (const runId of running.keys()) stop(runId, "shutdown");
        await queue.offWork(RUNS_QUEUE, { wait: true }).catch(() => {});
        await queue.offWork(DEAD_RUNS_QUEUE).catch(() => {});
        await listener.end().catch(() => {});
        await store.removeWorker(workerId).catch(() => {});
        await memory.close().catch(() => {});
        await backend.close();
      })();
      return stopped;
    },
  };
}
