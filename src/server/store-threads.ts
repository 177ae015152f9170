import { randomUUID } from "node:crypto";
import { LINEAR_TABLES } from "@codehop/checkpoint-postgres";
import type pg from "pg";
import { inTransaction } from "../persistence/postgres-database.ts";
import type { AuthFilters } from "./auth.ts";
import { all, filterSql } from "./store-filters.ts";
import {
  type ApiThread,
  ServerTables,
  THREAD_DELETED_CHANNEL,
  type ThreadQuery,
  type ThreadStatus,
} from "./store-schema.ts";

/**
 * The threads of the server's tables (part of {@link ServerStore}): the API's thread rows, their
 * copies and deletions, the log of deleted threads workers read, and the files runs uploaded.
 */
export class ThreadTables extends ServerTables {
  /** Creates a thread (or returns the existing one when `ifExists` is "do_nothing"). */
  async createThread(
    threadId: string | undefined,
    metadata: Record<string, unknown> = {},
    ifExists: "raise" | "do_nothing" = "raise",
  ): Promise<ApiThread | undefined> {
    const id = threadId ?? randomUUID();
    const { rows } = await this.pool.query<ApiThread>(
      `INSERT INTO ${this.t.threads} (thread_id, metadata) VALUES ($1, $2)
       ON CONFLICT (thread_id) DO NOTHING RETURNING *`,
      [id, JSON.stringify(metadata)],
    );
    if (rows[0]) return rows[0];
    return ifExists === "do_nothing" ? this.getThread(id) : undefined;
  }

  /** A thread, if it exists and matches `filters` (the caller's authorization). */
  async getThread(threadId: string, filters?: AuthFilters): Promise<ApiThread | undefined> {
    const args: unknown[] = [threadId];
    const where = ["thread_id = $1", ...filterSql(filters, args)];
    const { rows } = await this.pool.query<ApiThread>(
      `SELECT * FROM ${this.t.threads} WHERE ${all(where)}`,
      args,
    );
    return rows[0];
  }

  /** Merges `metadata` into a thread's metadata (only a thread matching `filters`). */
  async patchThread(
    threadId: string,
    metadata: Record<string, unknown>,
    filters?: AuthFilters,
  ): Promise<ApiThread | undefined> {
    const args: unknown[] = [threadId, JSON.stringify(metadata)];
    const where = ["thread_id = $1", ...filterSql(filters, args)];
    const { rows } = await this.pool.query<ApiThread>(
      `UPDATE ${this.t.threads} SET metadata = metadata || $2, updated_at = now()
       WHERE ${all(where)} RETURNING *`,
      args,
    );
    return rows[0];
  }

  /** The conditions of a thread search (the client's query and the caller's filters). */
  private threadConditions(query: ThreadQuery, args: unknown[]): string[] {
    const where = filterSql(query.filters, args);
    if (query.metadata && Object.keys(query.metadata).length) {
      args.push(JSON.stringify(query.metadata));
      where.push(`metadata @> $${args.length}`);
    }
    if (query.values && Object.keys(query.values).length) {
      args.push(JSON.stringify(query.values));
      where.push(`"values" @> $${args.length}`);
    }
    if (query.status) {
      args.push(query.status);
      where.push(`status = $${args.length}`);
    }
    if (query.ids) {
      args.push(query.ids);
      where.push(`thread_id = ANY($${args.length})`);
    }
    return where;
  }

  /** Threads matching a query and the caller's filters, newest first by `sortBy`. */
  async searchThreads(
    options: ThreadQuery & {
      limit: number;
      offset: number;
      sortBy?: "created_at" | "updated_at" | "thread_id" | "status";
      sortOrder?: "asc" | "desc";
    },
  ): Promise<ApiThread[]> {
    const args: unknown[] = [];
    const where = this.threadConditions(options, args);
    const sortBy = options.sortBy ?? "updated_at";
    const order = options.sortOrder === "asc" ? "ASC" : "DESC";
    args.push(options.limit, options.offset);
    const { rows } = await this.pool.query<ApiThread>(
      `SELECT * FROM ${this.t.threads} WHERE ${all(where)}
       ORDER BY ${sortBy} ${order}, thread_id LIMIT $${args.length - 1} OFFSET $${args.length}`,
      args,
    );
    return rows;
  }

  /** How many threads match a query and the caller's filters. */
  async countThreads(query: ThreadQuery): Promise<number> {
    const args: unknown[] = [];
    const where = this.threadConditions(query, args);
    const { rows } = await this.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM ${this.t.threads} WHERE ${all(where)}`,
      args,
    );
    return Number(rows[0].n);
  }

  /**
   * Copies a thread: its API row (with `metadata`), every checkpoint, write and blob of every
   * namespace, its call journal, its registry row and its uploads, under `newId`. Runs and their
   * events stay with the original.
   */
  async copyThread(
    from: ApiThread,
    newId: string,
    metadata: Record<string, unknown>,
    owner: string | null,
  ): Promise<ApiThread> {
    const s = `"${this.schema}"`;
    return inTransaction(this.pool, async (c) => {
      const { rows } = await c.query<ApiThread>(
        `INSERT INTO ${this.t.threads} (thread_id, metadata, status, "values", interrupts)
         VALUES ($1, $2, $3, $4, $5) RETURNING *`,
        [
          newId,
          JSON.stringify(metadata),
          from.status === "busy" ? "idle" : from.status,
          from.values === null ? null : JSON.stringify(from.values),
          JSON.stringify(from.interrupts ?? {}),
        ],
      );
      for (const table of [
        ...LINEAR_TABLES,
        "checkpoints",
        "checkpoint_blobs",
        "checkpoint_writes",
        "codehop_call_journal",
        "codehop_threads",
      ]) {
        const cols = await c.query<{ column_name: string }>(
          `SELECT column_name FROM information_schema.columns
           WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`,
          [this.schema, table],
        );
        const names = cols.rows.map((r) => r.column_name);
        if (!names.includes("thread_id")) continue;
        const list = names.map((n) => `"${n}"`).join(", ");
        const select = names.map((n) => (n === "thread_id" ? "$2" : `"${n}"`)).join(", ");
        await c.query(
          `INSERT INTO ${s}."${table}" (${list}) SELECT ${select} FROM ${s}."${table}" WHERE thread_id = $1`,
          [from.thread_id, newId],
        );
      }
      await c.query(
        `INSERT INTO ${this.t.uploads} (thread_id, sha256, bytes, owner)
         SELECT $2, sha256, bytes, $3 FROM ${this.t.uploads} WHERE thread_id = $1`,
        [from.thread_id, newId, owner],
      );
      return rows[0];
    });
  }

  /** Deletes a thread's API rows (its runs and their events too, unless `keepRuns`). */
  async deleteThreadRows(threadId: string, options: { keepRuns?: boolean } = {}): Promise<boolean> {
    return inTransaction(this.pool, async (c) => {
      if (!options.keepRuns) {
        await c.query(
          `DELETE FROM ${this.t.events} WHERE run_id IN (SELECT run_id FROM ${this.t.runs} WHERE thread_id = $1)`,
          [threadId],
        );
        await c.query(`DELETE FROM ${this.t.runs} WHERE thread_id = $1`, [threadId]);
      }
      // A deleted thread's uploads go even when its runs stay on record (stateless runs).
      await c.query(`DELETE FROM ${this.t.uploads} WHERE thread_id = $1`, [threadId]);
      const r = await c.query(`DELETE FROM ${this.t.threads} WHERE thread_id = $1`, [threadId]);
      // Workers keep data of their own about a thread (a conversation's file index in their
      // CODEHOP_HOME): each reads this log and drops its part (see threadDeletionsAfter).
      await c.query(`INSERT INTO ${this.t.deletions} (thread_id) VALUES ($1)`, [threadId]);
      await c.query(`SELECT pg_notify($1, $2)`, [THREAD_DELETED_CHANNEL, threadId]);
      return (r.rowCount ?? 0) > 0;
    });
  }

  /**
   * Deleted threads recorded after position `after` (0: all), oldest first, at most `limit`. A
   * deletion of a thread created again since (thread ids are the client's to choose) is left out:
   * a worker that starts or catches up later must not drop the new thread's data.
   */
  async threadDeletionsAfter(
    after: number,
    limit = 500,
  ): Promise<Array<{ id: number; threadId: string }>> {
    const { rows } = await this.pool.query<{ id: string; thread_id: string }>(
      `SELECT d.id, d.thread_id FROM ${this.t.deletions} d
       WHERE d.id > $1 AND NOT EXISTS (
         SELECT 1 FROM ${this.t.threads} t
         WHERE t.thread_id = d.thread_id AND t.created_at >= d.deleted_at)
       ORDER BY d.id LIMIT $2`,
      [after, limit],
    );
    return rows.map((r) => ({ id: Number(r.id), threadId: r.thread_id }));
  }

  /**
   * Stores a file a run's input uploaded to a thread, once per content (src/core/uploads.ts):
   * the run's input, events and checkpoints then carry only its hash.
   */
  async putUpload(
    threadId: string,
    sha256: string,
    bytes: Buffer,
    db: pg.Pool | pg.PoolClient = this.pool,
    owner: string | null = null,
  ): Promise<void> {
    await db.query(
      `INSERT INTO ${this.t.uploads} (thread_id, sha256, bytes, owner) VALUES ($1, $2, $3, $4)
       ON CONFLICT (thread_id, sha256) DO NOTHING`,
      [threadId, sha256, bytes, owner],
    );
  }

  /** Bytes a thread's uploads and a user's uploads (all threads) hold, leaving out `except` hashes. */
  async uploadBytes(
    threadId: string,
    owner: string | null,
    db: pg.Pool | pg.PoolClient = this.pool,
  ): Promise<{ thread: number; user: number; hashes: Set<string> }> {
    const { rows } = await db.query<{ thread: string; user: string; hashes: string[] | null }>(
      `SELECT
         COALESCE(SUM(octet_length(bytes)) FILTER (WHERE thread_id = $1), 0) AS thread,
         COALESCE(SUM(octet_length(bytes)) FILTER (WHERE owner IS NOT DISTINCT FROM $2), 0) AS user,
         array_agg(sha256) FILTER (WHERE thread_id = $1) AS hashes
       FROM ${this.t.uploads} WHERE thread_id = $1 OR ($2::text IS NOT NULL AND owner = $2)`,
      [threadId, owner],
    );
    return {
      thread: Number(rows[0].thread),
      user: owner === null ? 0 : Number(rows[0].user),
      hashes: new Set(rows[0].hashes ?? []),
    };
  }

  /** The bytes of a thread's upload, or undefined. */
  async getUpload(threadId: string, sha256: string): Promise<Uint8Array | undefined> {
    const { rows } = await this.pool.query<{ bytes: Buffer }>(
      `SELECT bytes FROM ${this.t.uploads} WHERE thread_id = $1 AND sha256 = $2`,
      [threadId, sha256],
    );
    return rows[0]?.bytes;
  }

  /** Records how a run left its thread (status, latest values, pending interrupts). */
  async setThreadOutcome(
    threadId: string,
    outcome: {
      status: ThreadStatus;
      values?: Record<string, unknown> | null;
      interrupts?: Record<string, unknown[]>;
    },
  ): Promise<void> {
    await this.pool.query(
      `UPDATE ${this.t.threads} SET updated_at = now(),
         status = CASE WHEN $2 = 'idle' AND EXISTS (
             SELECT 1 FROM ${this.t.runs} WHERE thread_id = $1 AND status = 'pending') THEN 'busy'
           ELSE $2 END,
         "values" = COALESCE($3::jsonb, "values"), interrupts = COALESCE($4::jsonb, interrupts)
       WHERE thread_id = $1`,
      [
        threadId,
        outcome.status,
        outcome.values === undefined ? null : JSON.stringify(outcome.values),
        outcome.interrupts === undefined ? null : JSON.stringify(outcome.interrupts),
      ],
    );
  }

  /**
   * Deletes the thread-deletion log's entries older than `seconds`. Meant for the chat files'
   * retention: a worker that was down longer than that drops a deleted conversation's files with
   * its own retention sweep (the conversation has been idle at least that long), so it no longer
   * needs the entry.
   */
  async pruneThreadDeletions(seconds: number): Promise<number> {
    const r = await this.pool.query(
      `DELETE FROM ${this.t.deletions} WHERE deleted_at < now() - make_interval(secs => $1)`,
      [seconds],
    );
    return r.rowCount ?? 0;
  }
}
