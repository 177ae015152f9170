/**
 * `codehop check`: verifies a checkpoint database — SQLite's integrity_check, then every stored
 * row of every thread read back (checkpoint records, values, writes rows and their dictionaries,
 * call-journal rows) — and reports what is damaged, per thread. With `repair`, the damaged threads
 * are moved aside so the others keep working: on SQLite the whole file is first copied as it was
 * (SQLite's online backup) and the threads are then deleted from it; on PostgreSQL their rows are
 * moved, in one transaction, into tables of the same names in the schema `<schema>_damaged`.
 * The PostgreSQL side is check-postgres.ts, imported only for a postgres:// database (checking a
 * SQLite file loads no Postgres driver).
 */
import { existsSync, statSync } from "node:fs";
import { dirname, join, basename } from "node:path";
import { CheckpointCorruptError } from "@codehop/checkpoint-sqlite";
import Database from "better-sqlite3";
import { journalRowKey, journalRowProblem, JOURNAL_TABLE } from "../core/journal.ts";
import { CodehopError, ErrorCodes, type CorruptData } from "../errors.ts";
import { journalRowFromSql as sqliteJournalRow } from "./sqlite-journal.ts";
import { sqlitePersistenceOn } from "./sqlite.ts";

/** A damaged row: where, and what is wrong (never its bytes). */
export interface DamagedRow {
  table: string;
  row: string;
  problem: string;
}

/** One thread's result. */
export interface ThreadCheck {
  threadId: string;
  /** Empty when every row of the thread reads back. */
  damage: DamagedRow[];
}

/** What `codehop check` found. */
export interface CheckReport {
  kind: "sqlite" | "postgres";
  /** The file, or the URL without its password (and the schema). */
  location: string;
  /** SQLite integrity_check's complaints (none: the file's structure is sound); PostgreSQL: none. */
  integrity: string[];
  /** Every thread of the database, in id order. */
  threads: ThreadCheck[];
  /** With `repair`: the threads moved aside and where their copy is. */
  repaired?: { threads: string[]; copy: string };
}

/** Whether the database is whole: a sound structure and no damaged thread. */
export function isHealthy(report: CheckReport): boolean {
  return !report.integrity.length && report.threads.every((t) => !t.damage.length);
}

/** Whether nothing damaged is left where it was: whole, or every damaged thread moved aside. */
export function isRepaired(report: CheckReport): boolean {
  if (report.integrity.length || !report.repaired) return isHealthy(report);
  const moved = new Set(report.repaired.threads);
  return report.threads.every((t) => !t.damage.length || moved.has(t.threadId));
}

const isCorrupt = (err: unknown): err is CodehopError & CorruptData =>
  CodehopError.isInstance(err) && err.code === ErrorCodes.CHECKPOINT_CORRUPT && "table" in err;

/** A failure met while reading a thread, as a damaged row (a failure that is not one is thrown). */
export function damageOf(err: unknown): DamagedRow {
  if (CheckpointCorruptError.isInstance(err) || isCorrupt(err))
    return { table: err.table, row: err.row, problem: err.problem };
  // The file itself is damaged under the rows (SQLite's own message names no stored bytes).
  if ((err as { code?: string }).code?.startsWith("SQLITE_"))
    return { table: "(database file)", row: "-", problem: (err as Error).message };
  throw err;
}

/** `rows` of a thread's journal that do not read, as damaged rows. */
export function journalDamage(
  rows: Array<() => Parameters<typeof journalRowProblem>[0]>,
): DamagedRow[] {
  const out: DamagedRow[] = [];
  for (const read of rows) {
    try {
      const row = read();
      const problem = journalRowProblem(row);
      if (problem) out.push({ table: JOURNAL_TABLE, row: journalRowKey(row), problem });
    } catch (err) {
      out.push(damageOf(err));
    }
  }
  return out;
}

/** A stamp for the name of a copy: the time, sortable, without characters a file name minds. */
const stamp = () => new Date().toISOString().replace(/[-:]/g, "").replace(/\..*$/, "");

/** Checks (and with `repair`, repairs) the SQLite checkpoint database `path`. */
export async function checkSqliteFile(
  path: string,
  options: { repair?: boolean } = {},
): Promise<CheckReport> {
  if (!existsSync(path) || !statSync(path).isFile())
    throw new CodehopError(ErrorCodes.CONFIG_INVALID, `No database file at ${path}.`);
  const report: CheckReport = { kind: "sqlite", location: path, integrity: [], threads: [] };
  let db: Database.Database;
  try {
    db = new Database(path, { fileMustExist: true });
    db.pragma("busy_timeout = 5000");
    const rows = db.pragma("integrity_check") as Array<{ integrity_check: string }>;
    report.integrity = rows.map((r) => r.integrity_check).filter((m) => m !== "ok");
  } catch (err) {
    // Not a database at all, or damaged past reading its schema.
    report.integrity = [(err as Error).message];
    return report;
  }
  const tables = new Set(
    (
      db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{
        name: string;
      }>
    ).map((t) => t.name),
  );
  if (![...tables].some((t) => /^(lgi_|codehop_)/.test(t) || t === "checkpoints")) {
    db.close();
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `${path} holds no codehop checkpoints (no lgi_*, checkpoints or codehop_* tables).`,
    );
  }
  try {
    let p: ReturnType<typeof sqlitePersistenceOn>;
    try {
      p = sqlitePersistenceOn(db, path);
    } catch (err) {
      // The file is damaged under the tables the adapter opens: integrity_check said where.
      report.integrity.push(damageOf(err).problem);
      return report;
    }
    const ids = new Set(p.checkpointer.threadIds());
    for (const table of [JOURNAL_TABLE, "codehop_threads"])
      for (const r of db.prepare(`SELECT DISTINCT thread_id FROM ${table}`).all() as Array<{
        thread_id: string;
      }>)
        ids.add(r.thread_id);
    for (const threadId of [...ids].sort()) {
      const damage: DamagedRow[] = [];
      try {
        damage.push(...(await p.checkpointer.verifyThread(threadId)).map(damageOf));
      } catch (err) {
        damage.push(damageOf(err));
      }
      const rows = db
        .prepare(`SELECT * FROM ${JOURNAL_TABLE} WHERE thread_id = ?`)
        .all(threadId) as Array<Record<string, unknown>>;
      damage.push(...journalDamage(rows.map((r) => () => sqliteJournalRow(r))));
      report.threads.push({ threadId, damage });
    }
    const damaged = report.threads.filter((t) => t.damage.length).map((t) => t.threadId);
    if (options.repair && damaged.length) {
      const copy = join(dirname(path), `${basename(path)}.before-repair-${stamp()}`);
      await db.backup(copy);
      for (const threadId of damaged) await p.deleteThread(threadId);
      report.repaired = { threads: damaged, copy };
    }
    return report;
  } finally {
    db.close();
  }
}
