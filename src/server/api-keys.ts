import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type pg from "pg";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { AuthUser } from "./auth.ts";

/**
 * API keys mapped to users, kept in the database `codehop serve` uses (`codehop_api_keys`) and
 * managed with `codehop keys add | list | revoke`. A key is `chk_<id>_<secret>`: the id finds its
 * row, the secret is stored only as its SHA-256 (a key is 256 random bits, so a fast hash is as
 * safe as a slow one and costs nothing per request), compared in constant time. A key shows its
 * secret once, when it is made.
 *
 * A server remembers a verified key for a few seconds ({@link KEY_CACHE_MS}), so a revoked key
 * stops working within that time on every server.
 */

/** How long a server trusts a key it verified before reading its row again. */
export const KEY_CACHE_MS = 5_000;

/** A key as listed (never its secret). */
export interface ApiKeyInfo {
  keyId: string;
  identity: string;
  label: string | null;
  permissions: string[];
  createdAt: string;
  revokedAt: string | null;
  lastUsedAt: string | null;
}

const KEY_FORMAT = /^chk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;

/** Identities: what a user is called in owner metadata and logs (no control characters). */
const IDENTITY = /^[^\u0000-\u001f\u007f]{1,200}$/u;

const sha256 = (text: string) => createHash("sha256").update(text).digest();

/** DDL of the keys table in `schema`. */
export function apiKeysTableSql(schema: string): string {
  return `CREATE TABLE IF NOT EXISTS "${schema}".codehop_api_keys (
  key_id TEXT PRIMARY KEY,
  identity TEXT NOT NULL,
  label TEXT,
  permissions JSONB NOT NULL DEFAULT '[]',
  secret_sha256 BYTEA NOT NULL,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  revoked_at TIMESTAMPTZ,
  last_used_at TIMESTAMPTZ
)`;
}

/** The API keys of one database schema. */
export class ApiKeyStore {
  private readonly table: string;
  private readonly verified = new Map<string, { user: AuthUser; until: number }>();
  private readonly touched = new Map<string, number>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
  ) {
    this.table = `"${schema}".codehop_api_keys`;
  }

  /** Creates the table if needed (idempotent). */
  async ensureTable(): Promise<void> {
    await this.pool.query(apiKeysTableSql(this.schema));
  }

  /** Makes a key for `identity`; returns the key itself (shown once) and its id. */
  async add(
    identity: string,
    options: { label?: string; permissions?: string[] } = {},
  ): Promise<{ key: string; keyId: string }> {
    if (!IDENTITY.test(identity))
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        "An identity is 1 to 200 characters without control characters.",
      );
    const keyId = randomBytes(8).toString("hex");
    const secret = randomBytes(32).toString("base64url");
    await this.pool.query(
      `INSERT INTO ${this.table} (key_id, identity, label, permissions, secret_sha256)
       VALUES ($1, $2, $3, $4, $5)`,
      [
        keyId,
        identity,
        options.label ?? null,
        JSON.stringify(options.permissions ?? []),
        sha256(secret),
      ],
    );
    return { key: `chk_${keyId}_${secret}`, keyId };
  }

  /** Every key (revoked ones too), newest first. */
  async list(): Promise<ApiKeyInfo[]> {
    const { rows } = await this.pool.query(
      `SELECT key_id, identity, label, permissions, created_at, revoked_at, last_used_at
       FROM ${this.table} ORDER BY created_at DESC, key_id`,
    );
    const iso = (d: Date | null) => (d ? d.toISOString() : null);
    return rows.map((r) => ({
      keyId: r.key_id,
      identity: r.identity,
      label: r.label,
      permissions: r.permissions,
      createdAt: iso(r.created_at)!,
      revokedAt: iso(r.revoked_at),
      lastUsedAt: iso(r.last_used_at),
    }));
  }

  /** Revokes a key by its id (or the key itself); false when there is no such live key. */
  async revoke(keyOrId: string): Promise<boolean> {
    const id = KEY_FORMAT.exec(keyOrId)?.[1] ?? keyOrId;
    const r = await this.pool.query(
      `UPDATE ${this.table} SET revoked_at = now() WHERE key_id = $1 AND revoked_at IS NULL`,
      [id],
    );
    return (r.rowCount ?? 0) > 0;
  }

  /** The user of a key, or undefined when it is not a live key of this store. */
  async verify(key: string): Promise<AuthUser | undefined> {
    const m = KEY_FORMAT.exec(key);
    if (!m) return undefined;
    const digest = sha256(key).toString("hex");
    const now = Date.now();
    const hit = this.verified.get(digest);
    if (hit && hit.until > now) return hit.user;
    const { rows } = await this.pool.query(
      `SELECT identity, label, permissions, secret_sha256 FROM ${this.table}
       WHERE key_id = $1 AND revoked_at IS NULL`,
      [m[1]],
    );
    const row = rows[0] as
      | { identity: string; label: string | null; permissions: string[]; secret_sha256: Buffer }
      | undefined;
    if (!row || !timingSafeEqual(sha256(m[2]), row.secret_sha256)) {
      this.verified.delete(digest);
      return undefined;
    }
    const user: AuthUser = {
      identity: row.identity,
      display_name: row.label ?? row.identity,
      permissions: row.permissions,
      is_authenticated: true,
      kind: "api_key",
      key_id: m[1],
    };
    if (this.verified.size > 10_000) this.verified.clear();
    this.verified.set(digest, { user, until: now + KEY_CACHE_MS });
    // When a key was last used, at most once a minute per key and server.
    if ((this.touched.get(m[1]) ?? 0) < now - 60_000) {
      this.touched.set(m[1], now);
      void this.pool
        .query(`UPDATE ${this.table} SET last_used_at = now() WHERE key_id = $1`, [m[1]])
        .catch(() => {});
    }
    return user;
  }
}
