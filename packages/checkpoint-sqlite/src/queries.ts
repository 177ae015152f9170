/**
 * The saver's queries over many rows: the checkpoint rows `list()` reads (this saver's and the
 * official saver's, with LangGraph's filters), the thread ids, and a thread's deletion (each
 * thread's root checkpoint count is in thread-counts.ts).
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { type CheckpointListOptions, getCheckpointId } from "@langchain/langgraph-checkpoint";
import type Database from "better-sqlite3";
import {
  LEGACY_CHECKPOINTS,
  LEGACY_WRITES,
  METADATA_IN_RECORD,
  T_BLOBS,
  T_CHECKPOINTS,
  T_NAMESPACES,
  T_WRITES,
  type CheckpointRow,
  type Statements,
} from "./schema.ts";

/**
 * Whether a metadata value equals a filter value as `json_extract(a) IS json_extract(b)` compares
 * them in SQL (how rows with metadata text are filtered): objects and lists as their JSON text,
 * booleans as 0/1, a missing value as NULL.
 */
export function sameAsSql(a: unknown, b: unknown): boolean {
  const sql = (v: unknown) =>
    v === undefined || v === null
      ? null
      : typeof v === "boolean"
        ? Number(v)
        : typeof v === "object"
          ? JSON.stringify(v)
          : v;
  return sql(a) === sql(b);
}

/**
 * The checkpoint rows `list()` reads, newest first: the filters of rows whose metadata is in their
 * record (`filters`) still have to be applied after reading it; `max` is the limit to apply then.
 */
export function listedRows(
  db: Database.Database,
  s: Statements,
  config: RunnableConfig,
  options: CheckpointListOptions,
): { rows: CheckpointRow[]; filters: Array<[string, unknown]>; max: number | undefined } {
  const { before, limit, filter } = options;
  const wheres: string[] = [];
  const args: unknown[] = [];
  const thread = config.configurable?.thread_id;
  const ns = config.configurable?.checkpoint_ns;
  const id = getCheckpointId(config);
  if (thread) {
    wheres.push("thread_id = ?");
    args.push(thread);
  }
  if (ns !== undefined && ns !== null) {
    wheres.push("checkpoint_ns = ?");
    args.push(ns);
  }
  if (id) {
    wheres.push("checkpoint_id = ?");
    args.push(id);
  }
  if (before?.configurable?.checkpoint_id !== undefined) {
    wheres.push("checkpoint_id < ?");
    args.push(before.configurable.checkpoint_id);
  }
  const filters = Object.entries(filter ?? {}).filter(([, v]) => v !== undefined);
  const legacyWheres = [...wheres];
  const legacyArgs = [...args];
  for (const [key, value] of filters) {
    // Both sides through json_extract: strings, numbers and objects compare as SQLite values.
    // Rows with the metadata in their record are filtered after reading it (by the caller).
    const test = "json_extract(CAST(metadata AS TEXT), ?) IS json_extract(?, '$')";
    wheres.push(`(metadata = '${METADATA_IN_RECORD}' OR ${test})`);
    legacyWheres.push(test);
    for (const a of [args, legacyArgs]) a.push(`$.${JSON.stringify(key)}`, JSON.stringify(value));
  }
  const where = wheres.length ? `WHERE ${wheres.join(" AND ")}` : "";
  const max = limit !== undefined ? Number.parseInt(String(limit), 10) : undefined;
  const lim = max !== undefined ? ` LIMIT ${max}` : "";
  const rows = db
    .prepare(
      `SELECT * FROM (${s.select}) ${where} ORDER BY checkpoint_id DESC${filters.length ? "" : lim}`,
    )
    .all(...args) as CheckpointRow[];
  if (s.legacy) {
    const old = db
      .prepare(
        `SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata
           FROM ${LEGACY_CHECKPOINTS} ${legacyWheres.length ? `WHERE ${legacyWheres.join(" AND ")}` : ""} ORDER BY checkpoint_id DESC${lim}`,
      )
      .all(...legacyArgs) as CheckpointRow[];
    for (const r of old) rows.push({ ...r, legacy: true });
    rows.sort((a, b) =>
      a.checkpoint_id < b.checkpoint_id ? 1 : a.checkpoint_id > b.checkpoint_id ? -1 : 0,
    );
  }
  return { rows, filters, max };
}

/** The ids of every thread with rows in this saver's tables or the official saver's. */
export function threadIds(db: Database.Database, s: Statements): string[] {
  const ids = new Set(
    (
      db.prepare(`SELECT DISTINCT thread_id FROM ${T_NAMESPACES}`).all() as Array<{
        thread_id: string;
      }>
    ).map((r) => r.thread_id),
  );
  if (s.legacy)
    for (const r of db
      .prepare(`SELECT DISTINCT thread_id FROM ${LEGACY_CHECKPOINTS}`)
      .all() as Array<{ thread_id: string }>)
      ids.add(r.thread_id);
  return [...ids].sort();
}

/** Deletes every row of a thread (both table sets) in one transaction; returns its namespace ids. */
export function deleteThreadRows(db: Database.Database, s: Statements, threadId: string): number[] {
  const ids = (
    db.prepare(`SELECT ns_id FROM ${T_NAMESPACES} WHERE thread_id = ?`).all(threadId) as Array<{
      ns_id: number;
    }>
  ).map((r) => r.ns_id);
  db.transaction(() => {
    for (const t of [T_CHECKPOINTS, T_BLOBS, T_WRITES])
      for (const nsId of ids) db.prepare(`DELETE FROM ${t} WHERE ns_id = ?`).run(nsId);
    db.prepare(`DELETE FROM ${T_NAMESPACES} WHERE thread_id = ?`).run(threadId);
    if (s.legacy) {
      db.prepare(`DELETE FROM ${LEGACY_CHECKPOINTS} WHERE thread_id = ?`).run(threadId);
      db.prepare(`DELETE FROM ${LEGACY_WRITES} WHERE thread_id = ?`).run(threadId);
    }
  }).immediate();
  return ids;
}
