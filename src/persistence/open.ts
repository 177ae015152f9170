/**
 * Opening the persistence a configuration names, without loading the Postgres adapter (the `pg`
 * driver, the Postgres checkpointer) unless it is the one asked for: what the apps, the CLI and the
 * graph entries import (src/persistence/index.ts is the whole module, both adapters).
 */
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { Persistence } from "./port.ts";
import { isPostgresUrl, redactUrl } from "./postgres-url.ts";
import type { OpenDatabaseOptions } from "./sqlite-database.ts";
import { openSqlitePersistence, type SqlitePersistence } from "./sqlite.ts";

export type { Persistence, ThreadRecord, ThreadStart, ThreadStatus, ThreadStore } from "./port.ts";

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
    // Loaded here: the driver and the Postgres adapter are for servers and workers, not for
    // every command that opens the SQLite file.
    const { openPostgresPersistence } = await import("./postgres.ts");
    return openPostgresPersistence({ url: location.databaseUrl, schema: location.databaseSchema });
  }
  return openSqlitePersistence(location.home, options);
}
