import { dirname, resolve } from "node:path";
import Database from "better-sqlite3";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { ensureDir } from "../util/fs-safe.ts";
import {
  CodehopStore,
  COMPARE,
  type FilterCondition,
  type ItemVector,
  itemId,
  type MemoryDriver,
  type MemoryStoreOptions,
  type StoredItem,
} from "./store.ts";

/**
 * The SQLite adapter of the memory store (the default: `<CODEHOP_HOME>/memory.db`). One row per
 * item (namespace as its labels joined by `.`, value as JSON text), its embedded fields in a
 * second table; filters are SQL on the JSON (`->` / `->>`), prefixes an exact comparison of the
 * namespace's first characters (no LIKE: `_` and `%` in labels mean nothing). better-sqlite3 is
 * synchronous: each call is one short statement (or one transaction for a put).
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS store_items (
  prefix TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  expires_at INTEGER,
  ttl_minutes REAL,
  PRIMARY KEY (prefix, key)
);
CREATE INDEX IF NOT EXISTS store_items_updated ON store_items (prefix, updated_at DESC);
CREATE INDEX IF NOT EXISTS store_items_expires ON store_items (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS store_vectors (
  prefix TEXT NOT NULL,
  key TEXT NOT NULL,
  field TEXT NOT NULL,
  embedding BLOB NOT NULL,
  PRIMARY KEY (prefix, key, field),
  FOREIGN KEY (prefix, key) REFERENCES store_items (prefix, key) ON DELETE CASCADE
);
`;

interface Row {
  prefix: string;
  key: string;
  value: string;
  created_at: number;
  updated_at: number;
  expires_at: number | null;
  ttl_minutes: number | null;
}

function toStored(row: Row): StoredItem {
  return {
    namespace: row.prefix.split("."),
    key: row.key,
    value: JSON.parse(row.value),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    expiresAt: row.expires_at,
    ttlMinutes: row.ttl_minutes,
  };
}

/** JSON path of a top-level field, quoted (any characters but `"`). */
function jsonPath(field: string): string {
  if (field.includes('"'))
    throw new CodehopError(
      ErrorCodes.INPUT_INVALID,
      `filter field ${JSON.stringify(field)} is invalid`,
    );
  return `$."${field}"`;
}

/** SQL and parameters of the filters (equality on JSON text; order on SQL values). */
function filterSql(filters: FilterCondition[]): { sql: string; params: unknown[] } {
  const parts: string[] = [];
  const params: unknown[] = [];
  for (const f of filters) {
    const path = jsonPath(f.field);
    if (f.op === "$eq" || f.op === "$ne") {
      // Compared as JSON text: `"x"` is not `x`, 1 is not "1", objects and arrays compare whole.
      parts.push(
        f.op === "$eq"
          ? "(value -> ?) = json(?)"
          : "((value -> ?) IS NULL OR (value -> ?) != json(?))",
      );
      params.push(path, ...(f.op === "$ne" ? [path] : []), JSON.stringify(f.value ?? null));
    } else {
      if (typeof f.value !== "number" && typeof f.value !== "string")
        throw new CodehopError(
          ErrorCodes.INPUT_INVALID,
          `filter ${f.op} on "${f.field}" needs a number or a string`,
        );
      // Same type only: a number field against a number, text against text.
      parts.push(
        `(json_type(value, ?) IN (${typeof f.value === "number" ? "'integer','real'" : "'text'"}) AND (value ->> ?) ${COMPARE[f.op]} ?)`,
      );
      params.push(path, path, f.value);
    }
  }
  return { sql: parts.length ? ` AND ${parts.join(" AND ")}` : "", params };
}

class SqliteMemoryDriver implements MemoryDriver {
  constructor(private readonly db: Database.Database) {
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = NORMAL");
    db.pragma("foreign_keys = ON");
    db.pragma("busy_timeout = 5000");
    db.exec(SCHEMA);
  }

  async get(namespace: string[], key: string, now: number) {
    const row = this.db
      .prepare(
        "SELECT * FROM store_items WHERE prefix = ? AND key = ? AND (expires_at IS NULL OR expires_at > ?)",
      )
      .get(namespace.join("."), key, now) as Row | undefined;
    return row ? toStored(row) : undefined;
  }

  async put(item: StoredItem, vectors: ItemVector[] | undefined) {
    const prefix = item.namespace.join(".");
    this.db.transaction(() => {
      this.db
        .prepare(
          `INSERT INTO store_items (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes)
           VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at,
             expires_at = excluded.expires_at, ttl_minutes = excluded.ttl_minutes`,
        )
        .run(
          prefix,
          item.key,
          JSON.stringify(item.value),
          item.createdAt,
          item.updatedAt,
          item.expiresAt,
          item.ttlMinutes,
        );
      this.db
        .prepare("DELETE FROM store_vectors WHERE prefix = ? AND key = ?")
        .run(prefix, item.key);
      const insert = this.db.prepare(
        "INSERT INTO store_vectors (prefix, key, field, embedding) VALUES (?, ?, ?, ?)",
      );
      for (const v of vectors ?? [])
        insert.run(
          prefix,
          item.key,
          v.field,
          Buffer.from(v.vector.buffer, v.vector.byteOffset, v.vector.byteLength),
        );
    })();
  }

  async delete(namespace: string[], key: string) {
    this.db
      .prepare("DELETE FROM store_items WHERE prefix = ? AND key = ?")
      .run(namespace.join("."), key);
  }

  async search(
    prefix: string[],
    filters: FilterCondition[],
    now: number,
    page?: { limit: number; offset: number },
  ) {
    const p = prefix.join(".");
    const where = p ? "(prefix = ? OR substr(prefix, 1, ?) = ?)" : "1";
    const params: unknown[] = p ? [p, p.length + 1, `${p}.`] : [];
    const f = filterSql(filters);
    const sql = `SELECT * FROM store_items WHERE ${where} AND (expires_at IS NULL OR expires_at > ?)${f.sql}
      ORDER BY updated_at DESC, prefix, key${page ? " LIMIT ? OFFSET ?" : ""}`;
    const rows = this.db
      .prepare(sql)
      .all(...params, now, ...f.params, ...(page ? [page.limit, page.offset] : [])) as Row[];
    return rows.map(toStored);
  }

  async vectors(items: readonly StoredItem[]) {
    const out = new Map<string, ItemVector[]>();
    const select = this.db.prepare(
      "SELECT field, embedding FROM store_vectors WHERE prefix = ? AND key = ?",
    );
    for (const item of items) {
      const rows = select.all(item.namespace.join("."), item.key) as Array<{
        field: string;
        embedding: Buffer;
      }>;
      out.set(
        itemId(item.namespace, item.key),
        rows.map((r) => ({
          field: r.field,
          vector: new Float32Array(
            r.embedding.buffer.slice(
              r.embedding.byteOffset,
              r.embedding.byteOffset + r.embedding.byteLength,
            ),
          ),
        })),
      );
    }
    return out;
  }

  async refresh(items: readonly StoredItem[], now: number) {
    const update = this.db.prepare(
      "UPDATE store_items SET expires_at = ? + ttl_minutes * 60000 WHERE prefix = ? AND key = ? AND ttl_minutes IS NOT NULL",
    );
    this.db.transaction(() => {
      for (const item of items) update.run(now, item.namespace.join("."), item.key);
    })();
  }

  async namespaces(now: number, under: string[] = []) {
    const p = under.join(".");
    const where = p ? " AND (prefix = ? OR substr(prefix, 1, ?) = ?)" : "";
    const rows = this.db
      .prepare(
        `SELECT DISTINCT prefix FROM store_items WHERE (expires_at IS NULL OR expires_at > ?)${where}`,
      )
      .all(now, ...(p ? [p, p.length + 1, `${p}.`] : [])) as Array<{ prefix: string }>;
    return rows.map((r) => r.prefix.split("."));
  }

  async sweep(now: number) {
    return this.db
      .prepare("DELETE FROM store_items WHERE expires_at IS NOT NULL AND expires_at <= ?")
      .run(now).changes;
  }

  async close() {
    this.db.close();
  }
}

/** File name of the memory store inside CODEHOP_HOME. */
export const MEMORY_DB_FILE = "memory.db";

/**
 * Opens (creating it if needed) a SQLite memory store at `path` (`:memory:` for one in memory).
 * A path that is not a SQLite database fails with CODEHOP_DB_INVALID naming it.
 */
export function openSqliteMemoryStore(
  path: string,
  options: MemoryStoreOptions = {},
): CodehopStore {
  if (path !== ":memory:")
    ensureDir(dirname(resolve(path)), {
      code: ErrorCodes.DB_INVALID,
      what: "memory store directory",
    });
  let db: Database.Database | undefined;
  try {
    db = new Database(path);
    return new CodehopStore(new SqliteMemoryDriver(db), options);
  } catch (err) {
    db?.close();
    throw new CodehopError(
      ErrorCodes.DB_INVALID,
      `Cannot open the memory store ${path}: ${(err as Error).message}`,
      { cause: err },
    );
  }
}
