import type Database from "better-sqlite3";
import { CodehopError, ErrorCodes } from "../errors.ts";
import {
  type CallJournal,
  type CallKey,
  type CallOutcome,
  taskEpochTag,
} from "../agent/journal.ts";

/**
 * One journal row as listed by {@link SqliteCallJournal.entries}. `taskEpochs` is given in the
 * stored canonical form (trailing zeros dropped, see `taskEpochTag`): `[]` for a call of the
 * thread's first task, `[1]` for one of the root's second task (its sub-agents' first tasks).
 */
export interface JournalEntry extends CallKey {
  taskEpochs: number[];
  outcome: CallOutcome;
  recordedAt: string;
}

/**
 * A checkpoint namespace without LangGraph task ids ("act:9f..|1|act:c4.." → "act|1|act"). Task ids
 * are the same when a thread resumes from its checkpoint, but new when a replay forks from an
 * older one; the stable form lets a replay find the calls its original run made.
 */
export function stableNamespace(checkpointNs: string): string {
  return checkpointNs
    .split("|")
    .map((part) => part.split(":")[0])
    .join("|");
}

/** Prefix of the rows keyed by {@link stableNamespace} (exact rows use the namespace as given). */
const STABLE_PREFIX = "~";

const TABLE = "codehop_call_journal";

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
 * SQLite implementation of the call journal (src/agent/journal.ts). One row per tool / sub-agent
 * call made inside a code action, keyed by (thread, checkpoint namespace, task epochs, step, call
 * index) — the epochs keep a new task on a finished thread, whose steps restart at 1, from
 * overwriting the previous task's calls, so a replay of either task is served its own. Rows are
 * written synchronously in their own implicit transaction, so a call that finished before a
 * `kill -9` is on disk and is served instead of being run again after `codehop resume`.
 *
 * Each call is stored twice: under its exact checkpoint namespace (what a resumed run looks up: it
 * always matches the same call) and under the namespace without task ids (what a replay fork looks
 * up, since forking gives tasks new ids; the latest call of the same task at that position wins). A recorded outcome
 * is served only when the tool name and the arguments match, so a replay from an edited state that
 * makes different calls runs them for real.
 */
export class SqliteCallJournal implements CallJournal {
  private readonly getStmt: Database.Statement;
  private readonly putStmt: Database.Statement;

  /**
   * @param matchAcrossForks also serve calls recorded under the same namespace without task ids —
   *   for replays, whose forked tasks get new ids. Off for normal runs and resumes, where only the
   *   exact call may be served. {@link forReplay} returns a journal with it on.
   */
  constructor(
    private readonly db: Database.Database,
    private readonly matchAcrossForks = false,
  ) {
    ensureJournalTable(db);
    this.getStmt = db.prepare(
      `SELECT tool, args_json, outcome_json FROM ${TABLE}
       WHERE thread_id = ? AND checkpoint_ns = ? AND task_epoch = ? AND step = ? AND call_index = ?`,
    );
    this.putStmt = db.prepare(
      `INSERT OR REPLACE INTO ${TABLE}
       (thread_id, checkpoint_ns, task_epoch, step, call_index, tool, args_json, outcome_json,
        recorded_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
  }

  /** The recorded outcome for this call, if the same tool was called with the same arguments. */
  get(key: CallKey): CallOutcome | undefined {
    const namespaces = [key.checkpointNs];
    if (this.matchAcrossForks) namespaces.push(STABLE_PREFIX + stableNamespace(key.checkpointNs));
    const epoch = taskEpochTag(key.taskEpochs);
    for (const ns of namespaces) {
      const row = this.getStmt.get(key.threadId, ns, epoch, key.step, key.callIndex) as
        { tool: string; args_json: string; outcome_json: string } | undefined;
      if (row && row.tool === key.tool && row.args_json === key.argsJson)
        return JSON.parse(row.outcome_json) as CallOutcome;
    }
    return undefined;
  }

  /** Records (or overwrites) a finished call's outcome. Values must be JSON-serializable. */
  put(key: CallKey, outcome: CallOutcome): void {
    const json = JSON.stringify(outcome);
    const at = new Date().toISOString();
    const epoch = taskEpochTag(key.taskEpochs);
    const write = this.db.transaction(() => {
      for (const ns of [key.checkpointNs, STABLE_PREFIX + stableNamespace(key.checkpointNs)]) {
        this.putStmt.run(
          key.threadId,
          ns,
          epoch,
          key.step,
          key.callIndex,
          key.tool,
          key.argsJson,
          json,
          at,
        );
      }
    });
    write();
  }

  /** The same journal, also serving calls recorded before a replay's fork (see the constructor). */
  forReplay(): SqliteCallJournal {
    return new SqliteCallJournal(this.db, true);
  }

  /** Every recorded call of a thread, in recording order (for `codehop history --calls` and tests). */
  entries(threadId: string): JournalEntry[] {
    const rows = this.db
      .prepare(
        `SELECT * FROM ${TABLE} WHERE thread_id = ? AND substr(checkpoint_ns, 1, 1) != ?
         ORDER BY recorded_at, checkpoint_ns, task_epoch, step, call_index`,
      )
      .all(threadId, STABLE_PREFIX) as Array<Record<string, any>>;
    return rows.map((r) => ({
      threadId: r.thread_id,
      checkpointNs: r.checkpoint_ns,
      taskEpochs: r.task_epoch ? String(r.task_epoch).split(".").map(Number) : [],
      step: r.step,
      callIndex: r.call_index,
      tool: r.tool,
      argsJson: r.args_json,
      outcome: JSON.parse(r.outcome_json),
      recordedAt: r.recorded_at,
    }));
  }
}
