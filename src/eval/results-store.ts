import { join, resolve } from "node:path";
import Database from "better-sqlite3";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { ensureDir } from "../util/fs-safe.ts";
import type { AgentTranscript, JudgeVerdict, QuestionResult, SystemName } from "./types.ts";

/** File name of the results database inside an eval output directory. */
export const RESULTS_DB_FILE = "eval.db";

/**
 * Per-question results of an evaluation run, one SQLite row per (system, question), committed as
 * each question finishes. A killed or interrupted run therefore loses at most the questions that
 * were in flight, the report can always be rebuilt from what is stored, and a rerun with the same
 * output directory skips the questions that finished without error.
 */
export class ResultsStore {
  readonly path: string;
  private readonly db: Database.Database;

  constructor(outDir: string) {
    const dir = resolve(outDir);
    this.path = join(dir, RESULTS_DB_FILE);
    let opened: Database.Database | undefined;
    try {
      ensureDir(dir, { code: ErrorCodes.CONFIG_INVALID, what: "output directory" });
      this.db = opened = new Database(this.path);
      this.db.pragma("journal_mode = WAL");
      this.db.pragma("busy_timeout = 5000");
      this.db.exec(`
CREATE TABLE IF NOT EXISTS eval_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS eval_results (
  system TEXT NOT NULL,
  question_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  ok INTEGER NOT NULL,
  result_json TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  transcripts_json TEXT NOT NULL DEFAULT '[]',
  judged INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (system, question_id)
);`);
      // Columns added since the first results databases, with how old rows get their value.
      const added: { name: string; type: string; backfill?: string }[] = [
        { name: "transcripts_json", type: "TEXT NOT NULL DEFAULT '[]'" },
        {
          name: "judged",
          type: "INTEGER NOT NULL DEFAULT 0",
          backfill:
            "UPDATE eval_results SET judged = 1 WHERE json_extract(result_json, '$.judge') IS NOT NULL",
        },
      ];
      const columns = (
        this.db.prepare("PRAGMA table_info(eval_results)").all() as { name: string }[]
      ).map((c) => c.name);
      for (const column of added.filter((c) => !columns.includes(c.name))) {
        this.db.transaction(() => {
          this.db.exec(`ALTER TABLE eval_results ADD COLUMN ${column.name} ${column.type}`);
          if (column.backfill) this.db.exec(column.backfill);
        })();
      }
    } catch (err) {
      // Don't leak the handle of a file we could open but not use (not SQLite, bad migration).
      try {
        opened?.close();
      } catch {
        // already closed
      }
      throw new CodehopError(
        ErrorCodes.DB_INVALID,
        `Cannot open eval results database ${this.path}: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
  }

  getMeta<T>(key: string): T | undefined {
    const row = this.db.prepare("SELECT value FROM eval_meta WHERE key = ?").get(key) as
      { value: string } | undefined;
    return row ? (JSON.parse(row.value) as T) : undefined;
  }

  setMeta(key: string, value: unknown): void {
    this.db
      .prepare(
        "INSERT INTO eval_meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
      )
      .run(key, JSON.stringify(value));
  }

  /** Stores (or replaces) one question's result. Transcripts go to their own column (they are big). */
  put(result: QuestionResult): void {
    const { transcripts, ...rest } = result;
    this.db
      .prepare(
        `INSERT INTO eval_results (system, question_id, idx, ok, result_json, finished_at, transcripts_json, judged) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT(system, question_id) DO UPDATE SET idx = excluded.idx, ok = excluded.ok,
           result_json = excluded.result_json, finished_at = excluded.finished_at, transcripts_json = excluded.transcripts_json,
           judged = excluded.judged`,
      )
      .run(
        result.system,
        result.questionId,
        result.index,
        result.error ? 0 : 1,
        JSON.stringify(rest),
        result.finishedAt,
        JSON.stringify(transcripts),
        result.judge ? 1 : 0,
      );
  }

  /** Adds the judge's verdict to a stored result (its transcripts are left as they are). */
  setJudge(system: SystemName, questionId: string, verdict: JudgeVerdict): void {
    this.db
      .prepare(
        "UPDATE eval_results SET result_json = json_set(result_json, '$.judge', json(?)), judged = 1 WHERE system = ? AND question_id = ?",
      )
      .run(JSON.stringify(verdict), system, questionId);
  }

  /** One stored result without its transcripts (see {@link transcripts}). */
  result(system: SystemName, questionId: string): Omit<QuestionResult, "transcripts"> | undefined {
    const row = this.db
      .prepare("SELECT result_json FROM eval_results WHERE system = ? AND question_id = ?")
      .get(system, questionId) as { result_json: string } | undefined;
    return row ? withoutTranscripts(row.result_json) : undefined;
  }

  /** The transcripts of one stored result (empty if none). */
  transcripts(system: SystemName, questionId: string): AgentTranscript[] {
    const row = this.db
      .prepare("SELECT transcripts_json FROM eval_results WHERE system = ? AND question_id = ?")
      .get(system, questionId) as { transcripts_json: string } | undefined;
    return row ? (JSON.parse(row.transcripts_json) as AgentTranscript[]) : [];
  }

  /** One stored result with its transcripts. */
  get(system: SystemName, questionId: string): QuestionResult | undefined {
    const row = this.db
      .prepare(
        "SELECT result_json, transcripts_json FROM eval_results WHERE system = ? AND question_id = ?",
      )
      .get(system, questionId) as { result_json: string; transcripts_json: string } | undefined;
    if (!row) return undefined;
    return {
      ...(JSON.parse(row.result_json) as QuestionResult),
      transcripts: JSON.parse(row.transcripts_json) as AgentTranscript[],
    };
  }

  /** Whether any result of `system` is stored. */
  hasResults(system: SystemName): boolean {
    return (
      this.db.prepare("SELECT 1 FROM eval_results WHERE system = ? LIMIT 1").get(system) !==
      undefined
    );
  }

  /**
   * Keys `${system}\u0000${questionId}` of questions that finished without error; with `unjudged`,
   * only those the LLM judge has not graded yet (read from a column: no result is parsed).
   */
  finishedKeys(options: { unjudged?: boolean } = {}): Set<string> {
    const rows = this.db
      .prepare(
        `SELECT system, question_id FROM eval_results WHERE ok = 1${options.unjudged ? " AND judged = 0" : ""}`,
      )
      .all() as {
      system: string;
      question_id: string;
    }[];
    return new Set(rows.map((r) => resultKey(r.system as SystemName, r.question_id)));
  }

  /** All stored results, in dataset order, then system, without transcripts (see {@link transcripts}). */
  all(): Omit<QuestionResult, "transcripts">[] {
    const rows = this.db
      .prepare("SELECT result_json FROM eval_results ORDER BY idx, system")
      .all() as { result_json: string }[];
    return rows.map((r) => withoutTranscripts(r.result_json));
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}

/** A stored result row (results stored before transcripts had their own column carry them inline). */
function withoutTranscripts(resultJson: string): Omit<QuestionResult, "transcripts"> {
  const { transcripts: _t, ...rest } = JSON.parse(resultJson) as QuestionResult;
  return rest;
}

/** Key of a (system, question) pair. */
export function resultKey(system: SystemName, questionId: string): string {
  return `${system}\u0000${questionId}`;
}
