import type Database from "better-sqlite3";
import { LEGACY_CHECKPOINTS, LEGACY_WRITES, T_CHECKPOINTS, T_NAMESPACES } from "./tables.ts";

/**
 * How many checkpoints each thread (or only `threadId`) has in its root namespace, read from the
 * tables as they are: nothing is created or converted and nothing of LangGraph is loaded, so a
 * program that only lists threads (codehop's `threads`) does not pay for opening the saver. The
 * counts are the saver's own (`IncrementalSqliteSaver.rootCheckpointCounts` returns these): this
 * saver's rows (the current format, or the first format not yet converted) plus the official
 * SqliteSaver's rows the saver reads in place. A database with none of these tables has none.
 * Exported as `@codehop/checkpoint-sqlite/thread-counts` (and from the package's main entry).
 */
export function countRootCheckpoints(
  db: Database.Database,
  threadId?: string,
): Map<string, number> {
  const tables = new Set(
    (
      db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]
    ).map((t) => t.name),
  );
  const counts = new Map<string, number>();
  const one = threadId === undefined ? "" : "AND thread_id = ?";
  const args = threadId === undefined ? [] : [threadId];
  const add = (sql: string) => {
    for (const r of db.prepare(sql).all(...args) as Array<{ thread_id: string; n: number }>)
      counts.set(r.thread_id, (counts.get(r.thread_id) ?? 0) + r.n);
  };
  if (tables.has(T_CHECKPOINTS)) {
    // The first format kept thread and namespace in every checkpoint row (no namespace table).
    const firstFormat = (
      db.prepare(`PRAGMA table_info(${T_CHECKPOINTS})`).all() as { name: string }[]
    ).some((c) => c.name === "thread_id");
    if (firstFormat)
      add(
        `SELECT thread_id, count(*) AS n FROM ${T_CHECKPOINTS}
           WHERE checkpoint_ns = '' ${one} GROUP BY thread_id`,
      );
    else if (tables.has(T_NAMESPACES))
      add(
        `SELECT n.thread_id, count(*) AS n FROM ${T_CHECKPOINTS} c JOIN ${T_NAMESPACES} n ON n.ns_id = c.ns_id
           WHERE n.checkpoint_ns = '' ${one.replace("thread_id", "n.thread_id")} GROUP BY n.thread_id`,
      );
  }
  // The saver reads the official saver's checkpoints only with both of its tables there.
  if (tables.has(LEGACY_CHECKPOINTS) && tables.has(LEGACY_WRITES))
    add(
      `SELECT thread_id, count(*) AS n FROM ${LEGACY_CHECKPOINTS}
         WHERE checkpoint_ns = '' ${one} GROUP BY thread_id`,
    );
  return counts;
}
