import { deflateRawSync } from "node:zlib";
import {
  CheckpointCorruptError,
  DEFAULT_MAX_INFLATE_BYTES,
  inflateBounded,
} from "@codehop/checkpoint-sqlite";
import type Database from "better-sqlite3";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { ApprovalJournal, ApprovalResume } from "../core/approval-decision.ts";
import {
  type CallKey,
  type CallOutcome,
  createCallJournal,
  JOURNAL_TABLE,
  journalRowKey,
  type JournalEntry,
  type JournalRow,
  type JournalRowKey,
  type JournalRowStore,
  type ReplayableJournal,
} from "../core/journal.ts";

const TABLE = JOURNAL_TABLE;

/** Columns and primary key of the journal table (task_epoch: `taskEpochTag` of the key). */
const TABLE_SCHEMA = `(
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

/**
 * Creates the journal table, or upgrades one written before task epochs were recorded: its primary
 * key lacked the epoch (a new task on a finished thread overwrote the previous task's rows), and
 * SQLite cannot change a primary key in place, so the table is rebuilt with the old rows under
 * epoch "" — the first task, which is what a thread's checkpoints from that time say (they have no
 * taskEpoch channel, which reads as 0). One immediate transaction: a concurrent opener waits, then
 * sees the new table. Throws CODEHOP_DB_INVALID naming the database when the upgrade fails (e.g. a
 * read-only file); the old table is then left as it was.
 */
function ensureJournalTable(db: Database.Database): void {
  const columns = () =>
    (db.prepare(`PRAGMA table_info(${TABLE})`).all() as Array<{ name: string }>).map((c) => c.name);
  const current = columns();
  if (current.includes("task_epoch")) return;
  const upgrade = db.transaction(() => {
    const now = columns();
    if (now.includes("task_epoch")) return;
    if (!now.length) {
      db.exec(`CREATE TABLE ${TABLE} ${TABLE_SCHEMA};`);
      return;
    }
    const kept =
      "thread_id, checkpoint_ns, step, call_index, tool, args_json, outcome_json, recorded_at";
    db.exec(`
ALTER TABLE ${TABLE} RENAME TO ${TABLE}_before_epochs;
CREATE TABLE ${TABLE} ${TABLE_SCHEMA};
INSERT INTO ${TABLE} (${kept}, task_epoch) SELECT ${kept}, '' FROM ${TABLE}_before_epochs;
DROP TABLE ${TABLE}_before_epochs;`);
  });
  try {
    upgrade.immediate();
  } catch (err) {
    throw new CodehopError(
      ErrorCodes.DB_INVALID,
      `Cannot ${current.length ? "upgrade" : "create"} the call journal table in ${db.name}: ${(err as Error).message}`,
      { cause: err },
    );
  }
}

/**
 * The journal's rows in SQLite (table codehop_call_journal, keyed by thread, checkpoint namespace,
 * task epoch, step and call index). Rows are written synchronously in one transaction per call, so
 * a call that finished before a `kill -9` is on disk and is served instead of being run again
 * after `codehop resume`. The semantics (which row answers which call) are the core's
 * (`createCallJournal`, src/core/journal.ts).
 */
export class SqliteJournalRows implements JournalRowStore {
  private readonly getStmt: Database.Statement;
  private readonly putStmt: Database.Statement;
  private readonly listStmt: Database.Statement;
  private readonly deleteStmt: Database.Statement;

  constructor(private readonly db: Database.Database) {
    ensureJournalTable(db);
    this.getStmt = db.prepare(
      `SELECT * FROM ${TABLE}
       WHERE thread_id = ? AND checkpoint_ns = ? AND task_epoch = ? AND step = ? AND call_index = ?`,
    );
    this.putStmt = db.prepare(
      `INSERT OR REPLACE INTO ${TABLE}
       (thread_id, checkpoint_ns, task_epoch, step, call_index, tool, args_json, outcome_json,
        recorded_at)
       VALUES (@threadId, @checkpointNs, @taskEpoch, @step, @callIndex, @tool, @argsJson,
        @outcomeJson, @recordedAt)`,
    );
    this.listStmt = db.prepare(
      `SELECT * FROM ${TABLE} WHERE thread_id = ?
       ORDER BY recorded_at, checkpoint_ns, task_epoch, step, call_index`,
    );
    this.deleteStmt = db.prepare(`DELETE FROM ${TABLE} WHERE thread_id = ?`);
  }

  getRow(key: JournalRowKey): JournalRow | undefined {
    const row = this.getStmt.get(
      key.threadId,
      key.checkpointNs,
      key.taskEpoch,
      key.step,
      key.callIndex,
    ) as Record<string, any> | undefined;
    return row ? journalRowFromSql(row) : undefined;
  }

  putRows(rows: readonly JournalRow[]): void {
    this.db
      .transaction(() => {
        for (const row of rows)
          this.putStmt.run({ ...row, outcomeJson: packOutcome(row.outcomeJson) });
      })
      .immediate();
  }

  listRows(threadId: string): JournalRow[] {
    return (this.listStmt.all(threadId) as Array<Record<string, any>>).map(journalRowFromSql);
  }

  deleteThread(threadId: string): void {
    this.deleteStmt.run(threadId);
  }
}

/** Outcomes this long or longer are stored deflated (a BLOB in the TEXT column; shorter ones stay text). */
const PACK_ABOVE = 256;

/**
 * An outcome as stored: its JSON text, deflated when that makes it smaller (and not past the
 * inflate bound reads use, so a read never refuses what was written).
 */
function packOutcome(json: string): string | Buffer {
  if (json.length < PACK_ABOVE || json.length > DEFAULT_MAX_INFLATE_BYTES / 4) return json;
  const packed = deflateRawSync(Buffer.from(json, "utf8"));
  return packed.length < json.length ? packed : json;
}

/**
 * The outcome's JSON text, whether it was stored as text or deflated (rows of earlier versions are
 * text); deflated bytes inflate with a bound (a bomb is CODEHOP_CHECKPOINT_CORRUPT naming the row).
 */
function unpackOutcome(stored: string | Buffer, row: JournalRow): string {
  if (typeof stored === "string") return stored;
  try {
    return inflateBounded(stored, DEFAULT_MAX_INFLATE_BYTES, {
      table: TABLE,
      row: () => journalRowKey(row),
    }).toString("utf8");
  } catch (err) {
    throw CheckpointCorruptError.isInstance(err) ? err.inThread(row.threadId) : err;
  }
}

/** A journal row as stored in SQLite, read (its outcome inflated, bounded). */
export function journalRowFromSql(r: Record<string, any>): JournalRow {
  const row: JournalRow = {
    threadId: r.thread_id,
    checkpointNs: r.checkpoint_ns,
    taskEpoch: String(r.task_epoch ?? ""),
    step: r.step,
    callIndex: r.call_index,
    tool: r.tool,
    argsJson: r.args_json,
    outcomeJson: "",
    recordedAt: r.recorded_at,
  };
  row.outcomeJson = unpackOutcome(r.outcome_json, row);
  return row;
}

/**
 * The call journal in SQLite (the core's semantics over {@link SqliteJournalRows}): what
 * `openPersistence(...).journal` is, kept as a class for code that builds one on a connection.
 */
export class SqliteCallJournal implements ReplayableJournal, ApprovalJournal {
  private readonly journal: ReplayableJournal & ApprovalJournal;

  /** @param matchAcrossForks also serve calls recorded before a replay's fork (see createCallJournal). */
  constructor(
    private readonly db: Database.Database,
    private readonly matchAcrossForks = false,
  ) {
    this.journal = createCallJournal(new SqliteJournalRows(db), { matchAcrossForks });
  }

  async get(key: CallKey): Promise<CallOutcome | undefined> {
    return this.journal.get(key);
  }

  async put(key: CallKey, outcome: CallOutcome): Promise<void> {
    await this.journal.put(key, outcome);
  }

  forReplay(): SqliteCallJournal {
    return this.matchAcrossForks ? this : new SqliteCallJournal(this.db, true);
  }

  entries(threadId: string): Promise<JournalEntry[]> {
    return this.journal.entries(threadId);
  }

  getDecision(threadId: string, approvalId: string): Promise<ApprovalResume | undefined> {
    return this.journal.getDecision(threadId, approvalId);
  }

  putDecision(threadId: string, decision: ApprovalResume): Promise<void> {
    return this.journal.putDecision(threadId, decision);
  }

  markAsked(threadId: string, approvalId: string): Promise<void> {
    return this.journal.markAsked!(threadId, approvalId);
  }

  wasAsked(threadId: string, approvalId: string): Promise<boolean> {
    return this.journal.wasAsked!(threadId, approvalId);
  }
}
