import type Database from "better-sqlite3";
import type { ThreadRecord, ThreadStart, ThreadStore } from "./port.ts";
import { runnerIdentity, threadRecords, type ThreadRow } from "./thread-rows.ts";

/**
 * The thread registry in SQLite (table codehop_threads, next to the checkpoints). A thread marked
 * running whose process is gone (same host, pid dead or reused) lists as "interrupted". Threads
 * created directly through the graph API (no registry row) are still listed, from the checkpoint
 * checkpointer sharing the connection (`countCheckpoints`).
 */
export class ThreadRegistry implements ThreadStore {
  /**
   * @param countCheckpoints the checkpointer's root checkpoints per thread (all threads, or one)
   */
  constructor(
    private readonly db: Database.Database,
    private readonly countCheckpoints: (threadId?: string) => Map<string, number>,
  ) {
    db.exec(`
CREATE TABLE IF NOT EXISTS codehop_threads (
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
  duration_ms INTEGER
);`);
    // Registries created before pid/host were recorded.
    const columns = new Set(
      (db.prepare("PRAGMA table_info(codehop_threads)").all() as Array<{ name: string }>).map(
        (c) => c.name,
      ),
    );
    if (!columns.has("pid")) db.exec("ALTER TABLE codehop_threads ADD COLUMN pid INTEGER");
    if (!columns.has("host")) db.exec("ALTER TABLE codehop_threads ADD COLUMN host TEXT");
    if (!columns.has("pid_start")) db.exec("ALTER TABLE codehop_threads ADD COLUMN pid_start TEXT");
    if (!columns.has("duration_ms"))
      db.exec("ALTER TABLE codehop_threads ADD COLUMN duration_ms INTEGER");
  }

  /**
   * Records that a run started on `threadId` (keeps the original question and created time on
   * re-runs, unless `replaceQuestion`: a new question on a thread that never checkpointed).
   */
  async start(threadId: string, init: ThreadStart = {}): Promise<void> {
    const now = new Date().toISOString();
    this.db
      .prepare(
        `INSERT INTO codehop_threads (thread_id, question, status, options_json, forked_from_thread, forked_from_checkpoint, created_at, updated_at, pid, host, pid_start)
         VALUES (@id, @question, 'running', @options, @fromThread, @fromCheckpoint, @now, @now, @pid, @host, @pidStart)
         ON CONFLICT(thread_id) DO UPDATE SET
           status = 'running', error = NULL, updated_at = @now, pid = @pid, host = @host, pid_start = @pidStart,
           question = CASE WHEN @replaceQuestion AND excluded.question IS NOT NULL THEN excluded.question
                           ELSE COALESCE(codehop_threads.question, excluded.question) END,
           options_json = CASE WHEN @hasOptions THEN excluded.options_json ELSE codehop_threads.options_json END`,
      )
      .run({
        id: threadId,
        question: init.question ?? null,
        options: JSON.stringify(init.options ?? {}),
        hasOptions: init.options ? 1 : 0,
        replaceQuestion: init.replaceQuestion ? 1 : 0,
        fromThread: init.forkedFrom?.threadId ?? null,
        fromCheckpoint: init.forkedFrom?.checkpointId ?? null,
        now,
        ...runnerIdentity(),
      });
  }

  /** Marks a run finished with its answer (and how long the finishing run took, when known). */
  async finish(threadId: string, answer: string, durationMs?: number): Promise<void> {
    this.db
      .prepare(
        `UPDATE codehop_threads SET status = 'done', answer = ?, error = NULL, updated_at = ?,
           duration_ms = COALESCE(?, duration_ms) WHERE thread_id = ?`,
      )
      .run(answer, new Date().toISOString(), durationMs ?? null, threadId);
  }

  /** Marks a run failed, or interrupted by its user (it stays resumable from its last checkpoint). */
  async fail(
    threadId: string,
    error: string,
    options: { interrupted?: boolean } = {},
  ): Promise<void> {
    this.db
      .prepare(
        `UPDATE codehop_threads SET status = ?, error = ?, updated_at = ? WHERE thread_id = ?`,
      )
      .run(
        options.interrupted ? "interrupted" : "failed",
        error,
        new Date().toISOString(),
        threadId,
      );
  }

  /** One thread, or undefined if neither a registry row nor a checkpoint exists. */
  async get(threadId: string): Promise<ThreadRecord | undefined> {
    return this.rows(threadId)[0];
  }

  /** All threads, most recently updated first. */
  async list(): Promise<ThreadRecord[]> {
    return this.rows();
  }

  /** Deletes a thread's registry row (the adapter deletes its checkpoints and journal rows). */
  delete(threadId: string): void {
    this.db.prepare("DELETE FROM codehop_threads WHERE thread_id = ?").run(threadId);
  }

  private rows(onlyThreadId?: string): ThreadRecord[] {
    // One thread uses the primary-key indexes of both tables instead of scanning them.
    const where = onlyThreadId === undefined ? "" : "WHERE thread_id = ?";
    const args = onlyThreadId === undefined ? [] : [onlyThreadId];
    const rows = this.db
      .prepare(`SELECT * FROM codehop_threads ${where}`)
      .all(...args) as ThreadRow[];
    return threadRecords(rows, this.countCheckpoints(onlyThreadId));
  }
}
