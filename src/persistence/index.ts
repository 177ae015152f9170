/**
 * Persistence: the port (src/persistence/port.ts) and its adapters. SQLite is the default (one
 * file under CODEHOP_HOME); nothing outside an adapter knows which one a run uses.
 */
import type { OpenDatabaseOptions } from "./sqlite-database.ts";
import type { Persistence } from "./port.ts";
import { openSqlitePersistence, type SqlitePersistence } from "./sqlite.ts";

export type { Persistence, ThreadRecord, ThreadStart, ThreadStatus, ThreadStore } from "./port.ts";
export { openSqlitePersistence, type SqlitePersistence } from "./sqlite.ts";
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

/** Where a run's persistence lives: the data directory (SQLite). */
export interface PersistenceLocation {
  /** Data directory (CODEHOP_HOME): `<home>/checkpoints.db`. */
  home: string;
}

/** Opens the persistence a configuration names (the adapter is chosen here and only here). */
export async function openPersistenceFor(
  location: PersistenceLocation,
  options: OpenDatabaseOptions = {},
): Promise<Persistence> {
  return openSqlitePersistence(location.home, options);
}
