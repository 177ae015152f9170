import type pg from "pg";
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
/**
 * NOTIFY channel: a run has ended (payload: run id). `runs.join` / `wait` wait on this alone, not
 * on every event batch: a joined run costs two queries, not three per batch of events.
 */
export const RUN_ENDED_CHANNEL = "codehop_run_ended";
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
 * The server's table names in a schema, over a pool (the persistence's): what every part of
 * {@link ServerStore} queries.
 */
export class ServerTables {
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
}
