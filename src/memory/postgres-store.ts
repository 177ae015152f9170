import type pg from "pg";
import { CodehopError, ErrorCodes } from "../errors.ts";
import {
  openPool,
  type PostgresLocation,
  schemaOf,
  withAdvisoryLock,
  inTransaction,
} from "../persistence/postgres-database.ts";
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
 * The PostgreSQL adapter of the memory store (with CODEHOP_DATABASE_URL; what `codehop serve`'s
 * `/store` endpoints and the workers' runs share): `codehop_store_items` (value as jsonb, filters
 * as jsonb operators, order comparisons in the "C" collation so they agree with SQLite's) and
 * `codehop_store_vectors` (float32 vectors as bytea), in the persistence's schema.
 */

interface Row {
  prefix: string;
  key: string;
  value: Record<string, unknown>;
  created_at: string;
  updated_at: string;
  expires_at: string | null;
  ttl_minutes: number | null;
}

function toStored(row: Row): StoredItem {
  return {
    namespace: row.prefix.split("."),
    key: row.key,
    value: row.value,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    expiresAt: row.expires_at === null ? null : Number(row.expires_at),
    ttlMinutes: row.ttl_minutes,
  };
}

/** SQL of the filters, numbering parameters from `first`. */
function filterSql(filters: FilterCondition[], first: number): { sql: string; params: unknown[] } {
  const parts: string[] = [];
  const params: unknown[] = [];
  const next = (value: unknown) => {
    params.push(value);
    return `$${first + params.length - 1}`;
  };
  for (const f of filters) {
    const field = next(f.field);
    if (f.op === "$eq")
      parts.push(`(value -> ${field}) = ${next(JSON.stringify(f.value ?? null))}::jsonb`);
    else if (f.op === "$ne")
      parts.push(
        `(value -> ${field}) IS DISTINCT FROM ${next(JSON.stringify(f.value ?? null))}::jsonb`,
      );
    else if (typeof f.value === "number")
      parts.push(
        `(jsonb_typeof(value -> ${field}) = 'number' AND (value ->> ${field})::float8 ${COMPARE[f.op]} ${next(f.value)}::float8)`,
      );
    else if (typeof f.value === "string")
      parts.push(
        `(jsonb_typeof(value -> ${field}) = 'string' AND (value ->> ${field}) COLLATE "C" ${COMPARE[f.op]} ${next(f.value)}::text COLLATE "C")`,
      );
    else
      throw new CodehopError(
        ErrorCodes.INPUT_INVALID,
        `filter ${f.op} on "${f.field}" needs a number or a string`,
      );
  }
  return { sql: parts.length ? ` AND ${parts.join(" AND ")}` : "", params };
}

class PostgresMemoryDriver implements MemoryDriver {
  private readonly items: string;
  private readonly vectorsTable: string;

  constructor(
    private readonly pool: pg.Pool,
    schema: string,
    private readonly ownsPool: boolean,
  ) {
    this.items = `"${schema}".codehop_store_items`;
    this.vectorsTable = `"${schema}".codehop_store_vectors`;
  }

  async setup(): Promise<void> {
    await withAdvisoryLock(this.pool, `codehop-store:${this.items}`, async () => {
      await this.pool.query(`
        CREATE TABLE IF NOT EXISTS ${this.items} (
          prefix text NOT NULL,
          key text NOT NULL,
          value jsonb NOT NULL,
          created_at bigint NOT NULL,
          updated_at bigint NOT NULL,
          expires_at bigint,
          ttl_minutes double precision,
          PRIMARY KEY (prefix, key)
        );
        CREATE INDEX IF NOT EXISTS codehop_store_items_updated ON ${this.items} (prefix, updated_at DESC);
        CREATE INDEX IF NOT EXISTS codehop_store_items_expires ON ${this.items} (expires_at) WHERE expires_at IS NOT NULL;
        CREATE TABLE IF NOT EXISTS ${this.vectorsTable} (
          prefix text NOT NULL,
          key text NOT NULL,
          field text NOT NULL,
          embedding bytea NOT NULL,
          PRIMARY KEY (prefix, key, field),
          FOREIGN KEY (prefix, key) REFERENCES ${this.items} (prefix, key) ON DELETE CASCADE
        );`);
    });
  }

  async get(namespace: string[], key: string, now: number) {
    const { rows } = await this.pool.query<Row>(
      `SELECT * FROM ${this.items} WHERE prefix = $1 AND key = $2 AND (expires_at IS NULL OR expires_at > $3)`,
      [namespace.join("."), key, now],
    );
    return rows[0] ? toStored(rows[0]) : undefined;
  }

  async put(item: StoredItem, vectors: ItemVector[] | undefined) {
    const prefix = item.namespace.join(".");
    await inTransaction(this.pool, async (client) => {
      await client.query(
        `INSERT INTO ${this.items} (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes)
         VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7)
         ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at,
           expires_at = excluded.expires_at, ttl_minutes = excluded.ttl_minutes`,
        [
          prefix,
          item.key,
          JSON.stringify(item.value),
          item.createdAt,
          item.updatedAt,
          item.expiresAt,
          item.ttlMinutes,
        ],
      );
      await client.query(`DELETE FROM ${this.vectorsTable} WHERE prefix = $1 AND key = $2`, [
        prefix,
        item.key,
      ]);
      for (const v of vectors ?? [])
        await client.query(
          `INSERT INTO ${this.vectorsTable} (prefix, key, field, embedding) VALUES ($1, $2, $3, $4)`,
          [
            prefix,
            item.key,
            v.field,
            Buffer.from(v.vector.buffer, v.vector.byteOffset, v.vector.byteLength),
          ],
        );
    });
  }

  async delete(namespace: string[], key: string) {
    await this.pool.query(`DELETE FROM ${this.items} WHERE prefix = $1 AND key = $2`, [
      namespace.join("."),
      key,
    ]);
  }

  async search(
    prefix: string[],
    filters: FilterCondition[],
    now: number,
    page?: { limit: number; offset: number },
  ) {
    const p = prefix.join(".");
    const params: unknown[] = [now];
    let where = "(expires_at IS NULL OR expires_at > $1)";
    if (p) {
      params.push(p, p.length + 1, `${p}.`);
      where += " AND (prefix = $2 OR left(prefix, $3) = $4)";
    }
    const f = filterSql(filters, params.length + 1);
    params.push(...f.params);
    let sql = `SELECT * FROM ${this.items} WHERE ${where}${f.sql} ORDER BY updated_at DESC, prefix COLLATE "C", key COLLATE "C"`;
    if (page) {
      params.push(page.limit, page.offset);
      sql += ` LIMIT $${params.length - 1} OFFSET $${params.length}`;
    }
    const { rows } = await this.pool.query<Row>(sql, params);
    return rows.map(toStored);
  }

  async vectors(items: readonly StoredItem[]) {
    const out = new Map<string, ItemVector[]>();
    if (!items.length) return out;
    const { rows } = await this.pool.query<{
      prefix: string;
      key: string;
      field: string;
      embedding: Buffer;
    }>(
      `SELECT v.prefix, v.key, v.field, v.embedding FROM ${this.vectorsTable} v
       JOIN unnest($1::text[], $2::text[]) AS w(prefix, key) ON v.prefix = w.prefix AND v.key = w.key`,
      [items.map((i) => i.namespace.join(".")), items.map((i) => i.key)],
    );
    for (const r of rows) {
      const id = itemId(r.prefix.split("."), r.key);
      const list = out.get(id) ?? [];
      const bytes = r.embedding;
      list.push({
        field: r.field,
        vector: new Float32Array(
          bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength),
        ),
      });
      out.set(id, list);
    }
    return out;
  }

  async refresh(items: readonly StoredItem[], now: number) {
    await this.pool.query(
      `UPDATE ${this.items} i SET expires_at = $1 + (i.ttl_minutes * 60000)::bigint
       FROM unnest($2::text[], $3::text[]) AS w(prefix, key)
       WHERE i.prefix = w.prefix AND i.key = w.key AND i.ttl_minutes IS NOT NULL`,
      [now, items.map((i) => i.namespace.join(".")), items.map((i) => i.key)],
    );
  }

  async namespaces(now: number, under: string[] = []) {
    const p = under.join(".");
    const { rows } = await this.pool.query<{ prefix: string }>(
      `SELECT DISTINCT prefix FROM ${this.items} WHERE (expires_at IS NULL OR expires_at > $1)` +
        (p ? " AND (prefix = $2 OR left(prefix, $3) = $4)" : ""),
      p ? [now, p, p.length + 1, `${p}.`] : [now],
    );
    return rows.map((r) => r.prefix.split("."));
  }

  async sweep(now: number) {
    const { rowCount } = await this.pool.query(
      `DELETE FROM ${this.items} WHERE expires_at IS NOT NULL AND expires_at <= $1`,
      [now],
    );
    return rowCount ?? 0;
  }

  async close() {
    if (this.ownsPool) await this.pool.end();
  }
}

/**
 * Opens the PostgreSQL memory store: on `location` (a pool of its own, closed with the store) or
 * on a given pool (left open). Creates its tables if needed.
 */
export async function openPostgresMemoryStore(
  where: PostgresLocation | { pool: pg.Pool; schema?: string },
  options: MemoryStoreOptions = {},
): Promise<CodehopStore> {
  const owns = !("pool" in where);
  const pool = "pool" in where ? where.pool : await openPool(where);
  const schema = schemaOf({ url: "", schema: where.schema });
  const driver = new PostgresMemoryDriver(pool, schema, owns);
  try {
    await driver.setup();
  } catch (err) {
    if (owns) await pool.end().catch(() => {});
    throw err;
  }
  return new CodehopStore(driver, options);
}
