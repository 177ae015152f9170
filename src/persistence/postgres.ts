import type pg from "pg";
import { LinearPostgresSaver } from "@codehop/checkpoint-postgres";
import { createCallJournal } from "../core/journal.ts";
import type { Persistence } from "./port.ts";
import {
  inTransaction,
  openPool,
  type PostgresLocation,
  redactUrl,
  schemaOf,
  withAdvisoryLock,
} from "./postgres-database.ts";
import { journalTableSql, PostgresJournalRows } from "./postgres-journal.ts";
import { PostgresThreadRegistry, threadsTableSql } from "./postgres-threads.ts";

/** The Postgres adapter: LangGraph checkpoints, call journal rows and thread registry in one database. */
export interface PostgresPersistence extends Persistence {
  readonly kind: "postgres";
  /** The connection pool the three parts share (servers and workers use it for their own tables). */
  readonly pool: pg.Pool;
  /** Schema of the tables. */
  readonly schema: string;
  /** Checkpoints in the linear layout; schemas of the official saver's layout read through. */
  readonly checkpointer: LinearPostgresSaver;
  readonly journalRows: PostgresJournalRows;
  readonly threads: PostgresThreadRegistry;
  close(): Promise<void>;
}

/**
 * Opens the Postgres adapter (CODEHOP_DATABASE_URL=postgres://...): creates the schema's tables on
 * first use (under an advisory lock, so a server and its workers can start together), then shares
 * one connection pool between the checkpointer, the journal and the registry. Throws DB_INVALID
 * naming the URL (password redacted) when the database cannot be reached.
 */
export async function openPostgresPersistence(
  location: PostgresLocation,
): Promise<PostgresPersistence> {
  const schema = schemaOf(location);
  const pool = await openPool(location);
  const checkpointer = new LinearPostgresSaver(pool, schema);
  try {
    await withAdvisoryLock(pool, `codehop-setup:${schema}`, async () => {
      await checkpointer.setup();
      await pool.query(journalTableSql(schema));
      await pool.query(threadsTableSql(schema));
    });
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
  const journalRows = new PostgresJournalRows(pool, schema);
  const threads = new PostgresThreadRegistry(pool, schema, (threadId) =>
    checkpointer.rootCheckpointCounts(threadId),
  );
  let closed: Promise<void> | undefined;
  return {
    kind: "postgres",
    location: redactUrl(location.url),
    pool,
    schema,
    checkpointer,
    journal: createCallJournal(journalRows),
    journalRows,
    threads,
    async deleteThread(threadId) {
      await checkpointer.deleteThread(threadId);
      await inTransaction(pool, async (client) => {
        await client.query(`DELETE FROM "${schema}".codehop_call_journal WHERE thread_id = $1`, [
          threadId,
        ]);
        await client.query(`DELETE FROM "${schema}".codehop_threads WHERE thread_id = $1`, [
          threadId,
        ]);
      });
    },
    close() {
      closed ??= pool.end();
      return closed;
    },
  };
}
