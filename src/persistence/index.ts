import type Database from "better-sqlite3";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { SqliteCallJournal } from "./call-journal.ts";
import { checkpointDbPath, openCodehopDatabase, type OpenDatabaseOptions } from "./database.ts";
import { ThreadRegistry } from "./threads.ts";

export { SqliteCallJournal, stableNamespace, type JournalEntry } from "./call-journal.ts";
export { CHECKPOINT_DB_FILE, checkpointDbPath, openCodehopDatabase } from "./database.ts";
export { ThreadRegistry, type ThreadRecord, type ThreadStatus } from "./threads.ts";

/** Everything the app persists, in one SQLite file under the data directory. */
export interface Persistence {
  /** Absolute path of `<home>/checkpoints.db`. */
  readonly dbPath: string;
  readonly db: Database.Database;
  /** LangGraph checkpointer (official SqliteSaver) sharing the connection. */
  readonly checkpointer: SqliteSaver;
  /** Call journal served to the act node as `configurable.journal`. */
  readonly journal: SqliteCallJournal;
  /** Threads started by the app (question, status, answer, run options). */
  readonly threads: ThreadRegistry;
  close(): void;
}

/**
 * Opens the app's persistence under `home` (CODEHOP_HOME): LangGraph checkpoints (SqliteSaver),
 * the call journal and the thread registry share one SQLite connection, so a journal row and the
 * checkpoint that follows it are written by the same process in order.
 */
export function openPersistence(home: string, options: OpenDatabaseOptions = {}): Persistence {
  const db = openCodehopDatabase(home, options);
  const checkpointer = new SqliteSaver(db);
  // Create the checkpoint tables now (SqliteSaver does it lazily) so thread listing can query them.
  // (`setup` is protected in the typings but idempotent and safe to call.)
  (checkpointer as unknown as { setup(): void }).setup();
  const journal = new SqliteCallJournal(db);
  const threads = new ThreadRegistry(db);
  let closed = false;
  return {
    dbPath: checkpointDbPath(home),
    db,
    checkpointer,
    journal,
    threads,
    close() {
      if (closed) return;
      closed = true;
      db.close();
    },
  };
}
