import type pg from "pg";
import {
  JOURNAL_TABLE,
  type JournalRow,
  type JournalRowKey,
  type JournalRowStore,
} from "../core/journal.ts";
import { inTransaction } from "./postgres-database.ts";

/** DDL of the journal table in `schema` (the same columns as the SQLite adapter's). */
export function journalTableSql(schema: string): string {
  return `CREATE TABLE IF NOT EXISTS "${schema}".${JOURNAL_TABLE} (
  thread_id TEXT NOT NULL,
  checkpoint_ns TEXT NOT NULL,
  task_epoch TEXT NOT NULL DEFAULT '',
  step INTEGER NOT NULL,
  call_index INTEGER NOT NULL,
  tool TEXT NOT NULL,
  args_json TEXT NOT NULL,
  outcome_json TEXT NOT NULL,
  recorded_at TEXT NOT NULL,
  PRIMARY KEY (thread_id, checkpoint_ns, task_epoch, step, call_index)
)`;
}

interface Row {
  thread_id: string;
  checkpoint_ns: string;
  task_epoch: string;
  step: number;
  call_index: number;
  tool: string;
  args_json: string;
  outcome_json: string;
  recorded_at: string;
}

/** A journal row as stored in Postgres, read. */
export const journalRowFromSql = (r: Row): JournalRow => ({
  threadId: r.thread_id,
  checkpointNs: r.checkpoint_ns,
  taskEpoch: r.task_epoch,
  step: r.step,
  callIndex: r.call_index,
  tool: r.tool,
  argsJson: r.args_json,
  outcomeJson: r.outcome_json,
  recordedAt: r.recorded_at,
});

/**
 * The call journal's rows in Postgres (table codehop_call_journal). A `putRows` is one transaction
 * committed before it resolves (synchronous_commit is on by default), so a call that finished
 * before a worker was killed is served to the worker that takes the run over. Large outcomes are
 * compressed by Postgres itself (TOAST).
 */
export class PostgresJournalRows implements JournalRowStore {
  private readonly table: string;

  constructor(
    private readonly pool: pg.Pool,
    schema: string,
  ) {
    this.table = `"${schema}".${JOURNAL_TABLE}`;
  }

  async getRow(key: JournalRowKey): Promise<JournalRow | undefined> {
    const { rows } = await this.pool.query<Row>(
      `SELECT * FROM ${this.table}
       WHERE thread_id = $1 AND checkpoint_ns = $2 AND task_epoch = $3 AND step = $4 AND call_index = $5`,
      [key.threadId, key.checkpointNs, key.taskEpoch, key.step, key.callIndex],
    );
    return rows[0] ? journalRowFromSql(rows[0]) : undefined;
  }

  async putRows(rows: readonly JournalRow[]): Promise<void> {
    await inTransaction(this.pool, async (client) => {
      for (const r of rows) {
        await client.query(
          `INSERT INTO ${this.table}
             (thread_id, checkpoint_ns, task_epoch, step, call_index, tool, args_json, outcome_json, recorded_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
           ON CONFLICT (thread_id, checkpoint_ns, task_epoch, step, call_index) DO UPDATE SET
             tool = EXCLUDED.tool, args_json = EXCLUDED.args_json,
             outcome_json = EXCLUDED.outcome_json, recorded_at = EXCLUDED.recorded_at`,
          [
            r.threadId,
            r.checkpointNs,
            r.taskEpoch,
            r.step,
            r.callIndex,
            r.tool,
            r.argsJson,
            r.outcomeJson,
            r.recordedAt,
          ],
        );
      }
    });
  }

  async listRows(threadId: string): Promise<JournalRow[]> {
    const { rows } = await this.pool.query<Row>(
      `SELECT * FROM ${this.table} WHERE thread_id = $1
       ORDER BY recorded_at, checkpoint_ns, task_epoch, step, call_index`,
      [threadId],
    );
    return rows.map(journalRowFromSql);
  }

  async deleteThread(threadId: string): Promise<void> {
    await this.pool.query(`DELETE FROM ${this.table} WHERE thread_id = $1`, [threadId]);
  }
}
