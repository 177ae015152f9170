import { dirname } from "node:path";
import Database from "better-sqlite3";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { ensureDir } from "../util/fs-safe.ts";

/**
 * A small SQLite key-value cache for the online source: page lookups and search results, stored
 * as JSON with the time they were fetched, so a repeated question or a resumed run does not
 * refetch. Use ":memory:" for a per-process cache.
 */
export class PageCache {
  private readonly db: Database.Database;
  private readonly getStmt;
  private readonly putStmt;

  constructor(
    path: string,
    /** Entries older than this are refetched (default 30 days). */
    private readonly ttlMs = 30 * 24 * 3600 * 1000,
  ) {
    try {
      if (path !== ":memory:") ensureDir(dirname(path), { what: "cache directory" });
      this.db = new Database(path);
      this.db.pragma("journal_mode = WAL");
      this.db.pragma("synchronous = NORMAL");
      this.db.exec(
        "CREATE TABLE IF NOT EXISTS cache (kind TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, fetched_at INTEGER NOT NULL, PRIMARY KEY (kind, key))",
      );
    } catch (err) {
      throw new CodehopError(
        ErrorCodes.DB_INVALID,
        `cannot open page cache ${path}: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
    this.getStmt = this.db.prepare(
      "SELECT value, fetched_at FROM cache WHERE kind = ? AND key = ?",
    );
    this.putStmt = this.db.prepare(
      "INSERT INTO cache (kind, key, value, fetched_at) VALUES (?, ?, ?, ?) ON CONFLICT(kind, key) DO UPDATE SET value = excluded.value, fetched_at = excluded.fetched_at",
    );
  }

  /** The cached value, or undefined when absent or older than `maxAgeMs` (default: the cache's TTL). */
  get<T>(kind: string, key: string, maxAgeMs = this.ttlMs): T | undefined {
    const row = this.getStmt.get(kind, key) as { value: string; fetched_at: number } | undefined;
    if (!row || Date.now() - row.fetched_at > Math.min(maxAgeMs, this.ttlMs)) return undefined;
    return JSON.parse(row.value) as T;
  }

  put(kind: string, key: string, value: unknown): void {
    this.putStmt.run(kind, key, JSON.stringify(value), Date.now());
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
