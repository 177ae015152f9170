/**
 * Persistence: the port (src/persistence/port.ts) and its adapters. SQLite is the default (one
 * file under CODEHOP_HOME); Postgres when CODEHOP_DATABASE_URL names a database (servers, workers,
 * distributed eval). Nothing outside an adapter knows which one a run uses.
 */

export { openPersistence, openPersistenceFor, type PersistenceLocation } from "./open.ts";
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
