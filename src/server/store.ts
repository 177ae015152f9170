import { EVENTS_CHANNEL, type RunEvent } from "./store-schema.ts";
import { RunTables } from "./store-runs.ts";

export * from "./store-schema.ts";
export { filterSql } from "./store-filters.ts";
export * from "./store-runs.ts";

/**
 * The server's own tables over a pool (the persistence's), next to the checkpoints in the Postgres
 * schema. By concern, each part extending the one before: store-schema.ts (row types, NOTIFY
 * channels, DDL, table names), store-threads.ts (threads, deletions, uploads), store-runs.ts
 * (runs); this file adds the runs' stream events and the workers. store-filters.ts turns an
 * authorization handler's filters into SQL. Importers use this module.
 */
export class ServerStore extends RunTables {
  /** Appends stream events of a run and notifies listeners. */
  async appendEvents(
    runId: string,
    events: ReadonlyArray<{ event: string; data: string }>,
  ): Promise<void> {
    if (!events.length) return;
    await this.pool.query(
      `WITH added AS (
         INSERT INTO ${this.t.events} (run_id, event, data)
         SELECT $1, e, d FROM unnest($2::text[], $3::text[]) AS x(e, d) RETURNING 1)
       SELECT pg_notify($4, $1) FROM (SELECT 1 FROM added LIMIT 1) AS any_added`,
      [runId, events.map((e) => e.event), events.map((e) => e.data), EVENTS_CHANNEL],
    );
  }

  /** Events of a run after event id `after` (exclusive), oldest first. */
  async eventsAfter(runId: string, after: string, limit = 500): Promise<RunEvent[]> {
    const { rows } = await this.pool.query<RunEvent>(
      // Ordered by the bigint column (e.id), not by the text alias "id" ("10" < "9").
      `SELECT e.id::text AS id, e.event, e.data FROM ${this.t.events} e
       WHERE e.run_id = $1 AND e.id > $2::bigint ORDER BY e.id LIMIT $3`,
      [runId, after, limit],
    );
    return rows;
  }

  /** The last event of a run named `event` (e.g. its final values), if any. */
  async lastEvent(runId: string, events: readonly string[]): Promise<RunEvent | undefined> {
    const { rows } = await this.pool.query<RunEvent>(
      `SELECT e.id::text AS id, e.event, e.data FROM ${this.t.events} e
       WHERE e.run_id = $1 AND e.event = ANY($2) ORDER BY e.id DESC LIMIT 1`,
      [runId, events],
    );
    return rows[0];
  }

  /** Drops the events of runs that ended more than `seconds` ago (streams of old runs). */
  async pruneEvents(seconds: number): Promise<number> {
    const r = await this.pool.query(
      `DELETE FROM ${this.t.events} WHERE run_id IN (
         SELECT run_id FROM ${this.t.runs} WHERE ended_at < now() - make_interval(secs => $1))`,
      [seconds],
    );
    return r.rowCount ?? 0;
  }

  // ---------------------------------------------------------------------------------------------
  // Workers

  async registerWorker(workerId: string, host: string, pid: number, concurrency: number) {
    await this.pool.query(
      `INSERT INTO ${this.t.workers} (worker_id, host, pid, concurrency) VALUES ($1, $2, $3, $4)
       ON CONFLICT (worker_id) DO UPDATE SET heartbeat_at = now()`,
      [workerId, host, pid, concurrency],
    );
  }

  async removeWorker(workerId: string): Promise<void> {
    await this.pool.query(`DELETE FROM ${this.t.workers} WHERE worker_id = $1`, [workerId]);
  }

  /** Workers whose heartbeat is younger than `seconds`. */
  async liveWorkers(seconds: number): Promise<Array<Record<string, unknown>>> {
    const { rows } = await this.pool.query(
      `SELECT worker_id, host, pid, concurrency, running, started_at, heartbeat_at
       FROM ${this.t.workers} WHERE heartbeat_at > now() - make_interval(secs => $1)
       ORDER BY started_at`,
      [seconds],
    );
    return rows;
  }
}
