import type pg from "pg";
import type { ThreadRecord, ThreadStart, ThreadStore } from "./port.ts";
import { runnerIdentity, threadRecords, type ThreadRow } from "./thread-rows.ts";

/** DDL of the thread registry in `schema` (the same columns as the SQLite adapter's). */
export function threadsTableSql(schema: string): string {
  return `CREATE TABLE IF NOT EXISTS "${schema}".codehop_threads (
  thread_id TEXT PRIMARY KEY,
  question TEXT,
  status TEXT NOT NULL,
  answer TEXT,
  error TEXT,
  options_json TEXT NOT NULL DEFAULT '{}',
  forked_from_thread TEXT,
  forked_from_checkpoint TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  pid INTEGER,
  host TEXT,
  pid_start TEXT,
  duration_ms BIGINT
)`;
}

/**
 * The thread registry in Postgres (table codehop_threads). Threads with checkpoints but no registry
 * row (run directly through the graph API) are listed from the checkpoint table. A thread marked
 * running by a process of this host that is gone lists as "interrupted"; one run by another host
 * (a worker) counts as running until that worker's run marks it otherwise.
 */
export class PostgresThreadRegistry implements ThreadStore {
  private readonly table: string;

  /** @param countCheckpoints the checkpointer's root checkpoints per thread (all threads, or one) */
  constructor(
    private readonly pool: pg.Pool,
    schema: string,
    private readonly countCheckpoints: (threadId?: string) => Promise<Map<string, number>>,
  ) {
    this.table = `"${schema}".codehop_threads`;
  }

  async start(threadId: string, init: ThreadStart = {}): Promise<void> {
    const now = new Date().toISOString();
    const who = runnerIdentity();
    await this.pool.query(
      `INSERT INTO ${this.table} AS t (thread_id, question, status, options_json, forked_from_thread,
         forked_from_checkpoint, created_at, updated_at, pid, host, pid_start)
       VALUES ($1, $2, 'running', $3, $4, $5, $6, $6, $7, $8, $9)
       ON CONFLICT (thread_id) DO UPDATE SET
         status = 'running', error = NULL, updated_at = $6, pid = $7, host = $8, pid_start = $9,
         question = CASE WHEN $10 AND EXCLUDED.question IS NOT NULL THEN EXCLUDED.question
                         ELSE COALESCE(t.question, EXCLUDED.question) END,
         options_json = CASE WHEN $11 THEN EXCLUDED.options_json ELSE t.options_json END`,
      [
        threadId,
        init.question ?? null,
        JSON.stringify(init.options ?? {}),
        init.forkedFrom?.threadId ?? null,
        init.forkedFrom?.checkpointId ?? null,
        now,
        who.pid,
        who.host,
        who.pidStart,
        Boolean(init.replaceQuestion),
        Boolean(init.options),
      ],
    );
  }

  async finish(threadId: string, answer: string, durationMs?: number): Promise<void> {
    await this.pool.query(
      `UPDATE ${this.table} SET status = 'done', answer = $1, error = NULL, updated_at = $2,
         duration_ms = COALESCE($3, duration_ms) WHERE thread_id = $4`,
      [answer, new Date().toISOString(), durationMs ?? null, threadId],
    );
  }

  async fail(
    threadId: string,
    error: string,
    options: { interrupted?: boolean } = {},
  ): Promise<void> {
    await this.pool.query(
      `UPDATE ${this.table} SET status = $1, error = $2, updated_at = $3 WHERE thread_id = $4`,
      [options.interrupted ? "interrupted" : "failed", error, new Date().toISOString(), threadId],
    );
  }

  async get(threadId: string): Promise<ThreadRecord | undefined> {
    return (await this.rows(threadId))[0];
  }

  async list(): Promise<ThreadRecord[]> {
    return this.rows();
  }

  /** Deletes a thread's registry row (the adapter deletes its checkpoints and journal rows). */
  async delete(threadId: string): Promise<void> {
    await this.pool.query(`DELETE FROM ${this.table} WHERE thread_id = $1`, [threadId]);
  }

  private async rows(onlyThreadId?: string): Promise<ThreadRecord[]> {
    const where = onlyThreadId === undefined ? "" : "WHERE thread_id = $1";
    const [{ rows }, counts] = await Promise.all([
      this.pool.query<ThreadRow>(
        `SELECT * FROM ${this.table} ${where}`,
        onlyThreadId === undefined ? [] : [onlyThreadId],
      ),
      this.countCheckpoints(onlyThreadId),
    ]);
    return threadRecords(rows, counts);
  }
}
