/**
 * Persistence: the port (src/persistence/port.ts) and its adapters. SQLite is the default (one
 * file under CODEHOP_HOME); Postgres when CODEHOP_DATABASE_URL names a database (servers, workers,
 * distributed eval). Nothing outside an adapter knows which one a run uses.
 */
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { OpenDatabaseOptions } from "./sqlite-database.ts";
import type { Persistence } from "./port.ts";
import { isPostgresUrl, redactUrl } from "./postgres-database.ts";
import { openPostgresPersistence } from "./postgres.ts";
import { openSqlitePersistence, type SqlitePersistence } from "./sqlite.ts";

export type { Persistence, ThreadRecord, ThreadStart, ThreadStatus, ThreadStore } from "./port.ts";
export { openSqlitePersistence, type SqlitePersistence } from "./sqlite.ts";
export { openPostgresPersistence, type PostgresPersistence } from "./postgres.ts";
export { CodehopPostgresSaver } from "./postgres-saver.ts";
export { LinearPostgresSaver } from "@codehop/checkpoint-postgres";
export { isPostgresUrl, redactUrl, type PostgresLocation } from "./postgres-database.ts";
export { SqliteCallJournal, SqliteJournalRows } from "./sqlite-journal.ts";
export { ThreadRegistry } from "./sqlite-threads.ts";
export { CHECKPOINT_DB_FILE, checkpointDbPath, openCodehopDatabase } from "./sqlite-database.ts";
export { stableNamespace, type JournalEntry } from "../core/journal.ts";

/**
 * Opens the SQLite persistence under `home` (CODEHOP_HOME): `<home>/checkpoints.db` with the
 * checkpoints, the call journal and the thread registry.
 */
export function openPersistence(
  home: string,
  options: OpenDatabaseOptions = {},
): SqlitePersistence {
  return openSqlitePersistence(home, options);
}

/** Where a run's persistence lives: a Postgres database when a URL is given, else the data directory (SQLite). */
export interface PersistenceLocation {
  /** Data directory (CODEHOP_HOME): `<home>/checkpoints.db`. */
  home: string;
  /** A postgres:// URL (CODEHOP_DATABASE_URL): selects the Postgres adapter. */
  databaseUrl?: string;
  /** Schema of the Postgres tables (default "public"). */
  databaseSchema?: string;
}

/** Opens the persistence a configuration names (the adapter is chosen here and only here). */
export async function openPersistenceFor(
  location: PersistenceLocation,
  options: OpenDatabaseOptions = {},
): Promise<Persistence> {
  if (location.databaseUrl !== undefined) {
    if (!isPostgresUrl(location.databaseUrl)) {
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `CODEHOP_DATABASE_URL must be a postgres:// URL (unset it to use SQLite under CODEHOP_HOME), got "${redactUrl(location.databaseUrl)}".`,
      );
    }
    return openPostgresPersistence({ url: location.databaseUrl, schema: location.databaseSchema });
  }
  return openSqlitePersistence(location.home, options);
}
