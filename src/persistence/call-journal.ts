import type Database from "better-sqlite3";
import type { CallJournal, CallKey, CallOutcome } from "../agent/journal.ts";

/** One journal row as listed by {@link SqliteCallJournal.entries}. */
export interface JournalEntry extends CallKey {
  outcome: CallOutcome;
  recordedAt: string;
}

/**
 * SQLite implementation of the call journal (src/agent/journal.ts). One row per tool / sub-agent
 * call made inside a code action, keyed by (thread, checkpoint namespace, step, call index). Rows are
 * written synchronously in their own implicit transaction, so a call that finished before a
 * `kill -9` is on disk and is served instead of being run again after `codehop resume`.
 *
 * A recorded outcome is served only when the tool name and the arguments match: a replay from an
 * edited state that makes different calls runs them for real.
 */
export class SqliteCallJournal implements CallJournal {
  private readonly getStmt: Database.Statement;
  private readonly putStmt: Database.Statement;

  constructor(private readonly db: Database.Database) {
    db.exec(`
CREATE TABLE IF NOT EXISTS codehop_call_journal (
  thread_id TEXT NOT NULL,
  checkpoint_ns TEXT NOT NULL,
  step INTEGER NOT NULL,
  call_index INTEGER NOT NULL,
  tool TEXT NOT NULL,
  args_json TEXT NOT NULL,
  outcome_json TEXT NOT NULL,
  recorded_at TEXT NOT NULL,
  PRIMARY KEY (thread_id, checkpoint_ns, step, call_index)
);`);
    this.getStmt = db.prepare(
      `SELECT tool, args_json, outcome_json FROM codehop_call_journal
       WHERE thread_id = ? AND checkpoint_ns = ? AND step = ? AND call_index = ?`,
    );
    this.putStmt = db.prepare(
      `INSERT OR REPLACE INTO codehop_call_journal
       (thread_id, checkpoint_ns, step, call_index, tool, args_json, outcome_json, recorded_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    );
  }

  /** The recorded outcome for this call, if the same tool was called with the same arguments. */
  get(key: CallKey): CallOutcome | undefined {
    const row = this.getStmt.get(key.threadId, key.checkpointNs, key.step, key.callIndex) as
      | { tool: string; args_json: string; outcome_json: string }
      | undefined;
    if (!row || row.tool !== key.tool || row.args_json !== key.argsJson) return undefined;
    return JSON.parse(row.outcome_json) as CallOutcome;
  }

  /** Records (or overwrites) a finished call's outcome. Values must be JSON-serializable. */
  put(key: CallKey, outcome: CallOutcome): void {
    this.putStmt.run(
      key.threadId,
      key.checkpointNs,
      key.step,
      key.callIndex,
      key.tool,
      key.argsJson,
      JSON.stringify(outcome),
      new Date().toISOString(),
    );
  }

  /** Every recorded call of a thread, in recording order (for `codehop history --calls` and tests). */
  entries(threadId: string): JournalEntry[] {
    const rows = this.db
      .prepare(
        `SELECT * FROM codehop_call_journal WHERE thread_id = ? ORDER BY recorded_at, checkpoint_ns, step, call_index`,
      )
      .all(threadId) as Array<Record<string, any>>;
    return rows.map((r) => ({
      threadId: r.thread_id,
      checkpointNs: r.checkpoint_ns,
      step: r.step,
      callIndex: r.call_index,
      tool: r.tool,
      argsJson: r.args_json,
      outcome: JSON.parse(r.outcome_json),
      recordedAt: r.recorded_at,
    }));
  }

  /** Copies a thread's journal to another thread id (used when a replay forks into a new thread). */
  copyThread(fromThreadId: string, toThreadId: string): number {
    const info = this.db
      .prepare(
        `INSERT OR IGNORE INTO codehop_call_journal
         SELECT ?, checkpoint_ns, step, call_index, tool, args_json, outcome_json, recorded_at
         FROM codehop_call_journal WHERE thread_id = ?`,
      )
      .run(toThreadId, fromThreadId);
    return info.changes;
  }
}
