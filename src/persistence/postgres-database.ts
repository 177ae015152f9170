import pg from "pg";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { isPostgresUrl, redactUrl } from "./postgres-url.ts";

export { isPostgresUrl, redactUrl } from "./postgres-url.ts";

/** Where a Postgres adapter keeps its data. */
export interface PostgresLocation {
  /** Connection URL, e.g. postgres://user:pass@host:5432/codehop (CODEHOP_DATABASE_URL). */
  url: string;
  /** Schema of codehop's tables and LangGraph's checkpoint tables. Default "public". */
  schema?: string;
  /** Connections in this process's pool. Default 10. */
  poolSize?: number;
}

/** A schema name codehop accepts (it is interpolated into SQL, quoted). */
const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** The schema of a location, validated. */
export function schemaOf(location: PostgresLocation): string {
  const schema = location.schema ?? "public";
  if (!SCHEMA_NAME.test(schema)) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Invalid Postgres schema name "${schema}": use letters, digits and _ (at most 63).`,
    );
  }
  return schema;
}

/**
 * Opens a connection pool and checks it can reach the database, so a wrong URL fails here with
 * DB_INVALID naming the (redacted) URL instead of mid-run.
 */
export async function openPool(location: PostgresLocation): Promise<pg.Pool> {
  if (!isPostgresUrl(location.url)) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `CODEHOP_DATABASE_URL must be a postgres:// URL, got "${redactUrl(location.url)}".`,
    );
  }
  const pool = new pg.Pool({
    connectionString: location.url,
    max: location.poolSize ?? 10,
    // Also how long a query waits for a free connection of the pool: a busy worker's runs queue
    // for one instead of failing.
    connectionTimeoutMillis: 60_000,
  });
  // An idle client whose server went away emits "error" on the pool: without a listener that
  // would crash the process; the next query reconnects.
  pool.on("error", () => {});
  try {
    const client = await pool.connect();
    client.release();
  } catch (err) {
    await pool.end().catch(() => {});
    throw new CodehopError(
      ErrorCodes.DB_INVALID,
      `Cannot connect to Postgres at ${redactUrl(location.url)}: ${(err as Error).message}. Check CODEHOP_DATABASE_URL and that the server is running.`,
      { cause: err },
    );
  }
  return pool;
}

/** SQLSTATEs of a server that is gone, starting, stopping or out of connections. */
const UNAVAILABLE_CODES = new Set(["57P01", "57P02", "57P03", "53300", "08000", "08003", "08006"]);

/**
 * True when `err` (or an error it was caused by) says the database could not be reached or went
 * away, as opposed to a query that failed: the work can be retried once the database answers.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && UNAVAILABLE_CODES.has(code)) return true;
    const message = e instanceof Error ? e.message : "";
    if (
      /timeout exceeded when trying to connect|Connection terminated|ECONNREFUSED|ECONNRESET|Client has encountered a connection error/i.test(
        message,
      )
    )
      return true;
  }
  return false;
}

/**
 * Runs `fn` while holding a session advisory lock named by `key` in the database: schema setup
 * (CREATE TABLE IF NOT EXISTS, migrations) from several processes at once would otherwise race.
 */
export async function withAdvisoryLock<T>(
  pool: pg.Pool,
  key: string,
  fn: () => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("SELECT pg_advisory_lock(hashtext($1))", [key]);
    try {
      return await fn();
    } finally {
      await client.query("SELECT pg_advisory_unlock(hashtext($1))", [key]);
    }
  } finally {
    client.release();
  }
}

/** Runs `fn` in a transaction on one client of the pool (rolled back if it throws). */
export async function inTransaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const out = await fn(client);
    await client.query("COMMIT");
    return out;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
