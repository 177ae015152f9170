import type Database from "better-sqlite3";
import { IncrementalSqliteSaver } from "@codehop/checkpoint-sqlite";
import type { Persistence } from "./port.ts";
import {
  checkpointDbPath,
  openCodehopDatabase,
  type OpenDatabaseOptions,
} from "./sqlite-database.ts";
import { SqliteCallJournal, SqliteJournalRows } from "./sqlite-journal.ts";
import { ThreadRegistry } from "./sqlite-threads.ts";

/** The SQLite adapter: one file, `<home>/checkpoints.db`, one connection shared by all three parts. */
export interface SqlitePersistence extends Persistence {
  readonly kind: "sqlite";
  /** Absolute path of `<home>/checkpoints.db` (= `location`). */
  readonly dbPath: string;
  readonly db: Database.Database;
  readonly checkpointer: IncrementalSqliteSaver;
  readonly journal: SqliteCallJournal;
  readonly journalRows: SqliteJournalRows;
  readonly threads: ThreadRegistry;
  close(): void;
}

/**
 * Opens the SQLite adapter under `home` (CODEHOP_HOME): LangGraph checkpoints, the call journal's
 * rows and the thread registry share one connection, so a journal row and the checkpoint that
 * follows it are written by the same process in order.
 */
export function openSqlitePersistence(
  home: string,
  options: OpenDatabaseOptions = {},
): SqlitePersistence {
  return sqlitePersistenceOn(openCodehopDatabase(home, options), checkpointDbPath(home));
}

/** The SQLite adapter on an open connection to the database file `dbPath`. */
export function sqlitePersistenceOn(db: Database.Database, dbPath: string): SqlitePersistence {
  // Writes each channel only when it changes and a growing list as its new items (linear storage);
  // reads the checkpoints earlier versions wrote with the official SqliteSaver in place.
  const checkpointer = new IncrementalSqliteSaver(db);
  checkpointer.setup();
  const journalRows = new SqliteJournalRows(db);
  const journal = new SqliteCallJournal(db);
  const threads = new ThreadRegistry(db, (threadId) => checkpointer.rootCheckpointCounts(threadId));
  let closed = false;
  return {
    kind: "sqlite",
    location: dbPath,
    dbPath,
    db,
    checkpointer,
    journal,
    journalRows,
    threads,
    async deleteThread(threadId) {
      await checkpointer.deleteThread(threadId);
      db.transaction(() => {
        journalRows.deleteThread(threadId);
        threads.delete(threadId);
      }).immediate();
    },
    close() {
      if (closed) return;
      closed = true;
      checkpointer.flush(); // (nothing is queued once a run has finished; a cut-short one may have)
      db.close();
    },
  };
}
