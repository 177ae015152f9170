import { randomInt } from "node:crypto";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import type pg from "pg";

/**
 * LangGraph's official Postgres checkpointer (@langchain/langgraph-checkpoint-postgres) with two
 * additions codehop needs:
 *
 * - **Fork-safe channel versions.** The official saver keeps a channel's value per
 *   `(thread, namespace, channel, version)` and inserts with ON CONFLICT DO NOTHING, while the
 *   base class numbers versions 1, 2, 3 ...: two forks of one checkpoint (`codehop replay`, an
 *   edited state) both write version N+1 of a channel, and the second fork silently reads the
 *   first fork's value. Versions here are the next integer plus a random fraction (as in
 *   IncrementalSqliteSaver), so forks never share a version.
 * - **Root checkpoint counts** per thread, for thread listings.
 *
 * Why this saver and not a port of IncrementalSqliteSaver (bench/postgres.bench.ts, in
 * docs/benchmarks.md): it stores only the channels that changed, and Postgres compresses large
 * values (TOAST), so what remains quadratic is a list channel written whole at each step. For an
 * agent of 10 steps that stores 1.4x the values IncrementalSqliteSaver's file holds, 2.7x at 30
 * steps and 4.3x at 60; codehop's agents take at most 8 steps by default (page_search 3), where the
 * official, maintained saver with LangGraph's own SQL is the better trade. Runs of hundreds of
 * steps per agent would call for the port.
 */
export class CodehopPostgresSaver extends PostgresSaver {
  constructor(
    private readonly connections: pg.Pool,
    private readonly schemaName: string,
  ) {
    super(connections, undefined, { schema: schemaName });
  }

  /** The next integer plus six random decimals (see the class comment). */
  override getNextVersion(current: number | string | undefined): number {
    const base =
      typeof current === "number" ? Math.floor(current) : current ? Math.floor(Number(current)) : 0;
    if (!Number.isFinite(base)) throw new Error(`Cannot continue channel version "${current}"`);
    return base + 1 + randomInt(1, 1_000_000) / 1_000_000;
  }

  /** Root-graph checkpoints per thread (all threads, or one). */
  async rootCheckpointCounts(threadId?: string): Promise<Map<string, number>> {
    const where = threadId === undefined ? "" : "AND thread_id = $1";
    const { rows } = await this.connections.query<{ thread_id: string; n: string }>(
      `SELECT thread_id, count(*) AS n FROM "${this.schemaName}".checkpoints
       WHERE checkpoint_ns = '' ${where} GROUP BY thread_id`,
      threadId === undefined ? [] : [threadId],
    );
    return new Map(rows.map((r) => [r.thread_id, Number(r.n)]));
  }

  /** The pool is the adapter's (shared with the journal and registry): closing it is theirs. */
  override async end(): Promise<void> {}
}
