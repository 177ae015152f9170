import type Database from "better-sqlite3";
import type { Statements } from "./schema.ts";

/** What the saver's parts share: its database, its statements, and its write queue. */
export interface SaverContext {
  readonly db: Database.Database;
  /** The statements (the tables are set up on first use). */
  readonly s: Statements;
  /** Writes the queued rows now (a read that goes to the tables calls it first). */
  flush(): void;
}
