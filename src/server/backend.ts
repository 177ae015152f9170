import type { PgBoss } from "pg-boss";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { isPostgresUrl, redactUrl, withAdvisoryLock } from "../persistence/postgres-database.ts";
import { openPostgresPersistence, type PostgresPersistence } from "../persistence/postgres.ts";
import { DEFAULT_GRAPHS_FILE, type GraphRegistry, loadGraphs } from "./graphs.ts";
import { openQueue, type QueueOptions } from "./queue.ts";
import { serverTablesSql, ServerStore } from "./store.ts";

/** What a server or a worker connects to. */
export interface BackendOptions {
  /** postgres:// URL (CODEHOP_DATABASE_URL): checkpoints, journal, threads, runs and the queue. */
  databaseUrl: string;
  /** Schema of codehop's and LangGraph's tables (default "public"). */
  schema?: string;
  /** Schema of the queue's tables (default "codehop_queue"). */
  queueSchema?: string;
  /** langgraph.json whose graphs are served (default: codehop's own). */
  graphsFile?: string;
  /** Seconds without a heartbeat after which a worker's run goes to another worker (>= 10). */
  leaseSeconds?: number;
  /** Retries of a run after its worker was lost. */
  retryLimit?: number;
  /** Connections of the pool for codehop's tables (the queue has its own 10). Default 10. */
  poolSize?: number;
}

/** Everything a server or worker process shares: persistence, the server's tables, the queue, the graphs. */
export interface Backend {
  readonly persistence: PostgresPersistence;
  readonly store: ServerStore;
  readonly queue: PgBoss;
  readonly graphs: GraphRegistry;
  readonly options: BackendOptions;
  close(): Promise<void>;
}

/** The queue options of a backend configuration. */
export function queueOptionsOf(options: BackendOptions): QueueOptions {
  return {
    url: options.databaseUrl,
    schema: options.queueSchema,
    leaseSeconds: options.leaseSeconds,
    retryLimit: options.retryLimit,
  };
}

/** Opens the backend (creating tables and queues on first use). */
export async function openBackend(options: BackendOptions): Promise<Backend> {
  if (!isPostgresUrl(options.databaseUrl)) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `codehop serve and codehop worker need a Postgres database: set CODEHOP_DATABASE_URL (or --database-url) to a postgres:// URL${options.databaseUrl ? `, got "${redactUrl(options.databaseUrl)}"` : ""}.`,
    );
  }
  const persistence = await openPostgresPersistence({
    url: options.databaseUrl,
    schema: options.schema,
    poolSize: options.poolSize,
  });
  try {
    const store = new ServerStore(persistence.pool, persistence.schema);
    await withAdvisoryLock(persistence.pool, `codehop-server-setup:${persistence.schema}`, () =>
      persistence.pool.query(serverTablesSql(persistence.schema)),
    );
    const graphs = await loadGraphs(
      options.graphsFile ?? DEFAULT_GRAPHS_FILE,
      persistence.checkpointer,
    );
    const queue = await openQueue(queueOptionsOf(options));
    return {
      persistence,
      store,
      queue,
      graphs,
      options,
      async close() {
        await queue.stop({ graceful: false }).catch(() => {});
        await persistence.close();
      },
    };
  } catch (err) {
    await persistence.close();
    throw err;
  }
}
