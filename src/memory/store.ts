import {
  BaseStore,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
  getTextAtPath,
  validateNamespace,
} from "@langchain/langgraph-checkpoint";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { Embedder } from "../store/embeddings.ts";

/**
 * Long-term memory: LangGraph's `BaseStore` (namespaced JSON items: put / get / delete / search /
 * list namespaces) over a {@link MemoryDriver} — SQLite (the default, `sqlite-store.ts`) or
 * PostgreSQL (`postgres-store.ts`) — with what both share here: namespace rules (LangGraph's:
 * labels without `.`), filters (`{field: value}` and `$eq $ne $gt $gte $lt $lte`, applied by the
 * driver in SQL), time-to-live (minutes, refreshed on reads unless told not to, expired items
 * never returned and swept), and ranking for a `query`:
 * - with an embedder (CODEHOP_EMBEDDINGS_*), semantic: the indexed fields of each item (the whole
 *   value, `$`, by default) are embedded when it is put, and a query ranks items by cosine
 *   similarity (the best of their fields);
 * - without one, lexical: items ranked by the share of the query's words they contain, items
 *   containing none dropped.
 * A query ranks every live item under the prefix that matches the filter (brute force, fine for
 * memories: thousands per user, not millions).
 */

/** Time-to-live settings of a store. */
export interface StoreTtl {
  /** Minutes an item lives after it is written (or last read); unset: forever. */
  defaultTtl?: number;
  /** Reads (get, search) push an item's expiry back by its TTL (default true). */
  refreshOnRead?: boolean;
  /** How often expired items are deleted, in minutes (default 60; 0: only when the store opens). */
  sweepIntervalMinutes?: number;
}

/** Semantic search settings. */
export interface StoreIndex {
  embedder: Embedder;
  /** JSON paths embedded by default (`$`: the whole value; `text`, `facts[*]` ...). */
  fields?: string[];
}

/** Options of a memory store. */
export interface MemoryStoreOptions {
  ttl?: StoreTtl;
  index?: StoreIndex;
}

/** An item as a driver stores it (times in ms since the epoch). */
export interface StoredItem {
  namespace: string[];
  key: string;
  value: Record<string, unknown>;
  createdAt: number;
  updatedAt: number;
  /** When it expires (null: never). */
  expiresAt: number | null;
  /** Its TTL in minutes, to refresh it on reads (null: none). */
  ttlMinutes: number | null;
}

/** One embedded field of an item. */
export interface ItemVector {
  field: string;
  vector: Float32Array;
}

/** A filter condition on a top-level field of the value. */
export interface FilterCondition {
  field: string;
  op: "$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte";
  value: unknown;
}

/** The SQL comparison of each filter operator (adapters share it). */
export const COMPARE: Record<FilterCondition["op"], string> = {
  $eq: "=",
  $ne: "!=",
  $gt: ">",
  $gte: ">=",
  $lt: "<",
  $lte: "<=",
};

/** What an adapter implements: rows and SQL; the semantics are {@link CodehopStore}'s. */
export interface MemoryDriver {
  /** A live item (not expired at `now`). */
  get(namespace: string[], key: string, now: number): Promise<StoredItem | undefined>;
  /** Inserts or replaces an item; `vectors` replace its vectors (undefined: it has none). */
  put(item: StoredItem, vectors: ItemVector[] | undefined): Promise<void>;
  delete(namespace: string[], key: string): Promise<void>;
  /**
   * Live items under a namespace prefix matching every filter, newest update first; `page`
   * undefined returns them all.
   */
  search(
    prefix: string[],
    filters: FilterCondition[],
    now: number,
    page?: { limit: number; offset: number },
  ): Promise<StoredItem[]>;
  /** The vectors of items, by `namespace.key`. */
  vectors(items: readonly StoredItem[]): Promise<Map<string, ItemVector[]>>;
  /** Sets the expiry of items to `now` + their TTL. */
  refresh(items: readonly StoredItem[], now: number): Promise<void>;
  /** Namespaces holding live items (only those under `under`, in the query, when given). */
  namespaces(now: number, under?: string[]): Promise<string[][]>;
  /** Deletes expired items; returns how many. */
  sweep(now: number): Promise<number>;
  close(): Promise<void>;
}

/** `namespace.key`, the identity of an item (labels hold no `.`). */
export const itemId = (namespace: readonly string[], key: string) =>
  `${namespace.join(".")}\u0000${key}`;

const OPS = new Set(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]);

/** A LangGraph filter object as conditions (a plain value means `$eq`). */
export function filterConditions(filter: Record<string, unknown> | undefined): FilterCondition[] {
  const out: FilterCondition[] = [];
  for (const [field, spec] of Object.entries(filter ?? {})) {
    if (field.includes("\u0000"))
      throw new CodehopError(
        ErrorCodes.INPUT_INVALID,
        `filter field ${JSON.stringify(field)} is invalid`,
      );
    const ops =
      spec && typeof spec === "object" && !Array.isArray(spec) && Object.keys(spec).length
        ? Object.entries(spec as Record<string, unknown>)
        : undefined;
    if (ops && ops.every(([k]) => k.startsWith("$"))) {
      for (const [op, value] of ops) {
        if (!OPS.has(op))
          throw new CodehopError(
            ErrorCodes.INPUT_INVALID,
            `filter operator ${op} on "${field}" is not one of $eq, $ne, $gt, $gte, $lt, $lte`,
          );
        out.push({ field, op: op as FilterCondition["op"], value });
      }
    } else out.push({ field, op: "$eq", value: spec });
  }
  return out;
}

function matchesCondition(namespace: string[], condition: MatchCondition): boolean {
  const path = condition.path;
  if (path.length > namespace.length) return false;
  const part =
    condition.matchType === "prefix"
      ? namespace.slice(0, path.length)
      : namespace.slice(namespace.length - path.length);
  return path.every((label, i) => label === "*" || label === part[i]);
}

/** The strings and numbers of a JSON value (not its keys), joined. */
function leafText(value: unknown): string {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (Array.isArray(value)) return value.map(leafText).join(" ");
  if (value && typeof value === "object") return Object.values(value).map(leafText).join(" ");
  return "";
}

/** Words of a text, lower-cased (letters and digits of any script). */
function words(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na && nb ? dot / Math.sqrt(na * nb) : 0;
}

/** The texts of an item's fields to index (`$`: the whole value as JSON). */
function fieldTexts(
  value: Record<string, unknown>,
  fields: readonly string[],
): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const field of fields) {
    if (field === "$") out.push([field, JSON.stringify(value)]);
    else for (const text of getTextAtPath(value, field)) out.push([field, text]);
  }
  return out;
}

/** A value a store accepts: a JSON object (what LangGraph's stores and the server API hold). */
function checkValue(value: unknown): asserts value is Record<string, unknown> {
  if (!value || typeof value !== "object" || Array.isArray(value))
    throw new CodehopError(ErrorCodes.INPUT_INVALID, "a store item's value must be a JSON object");
}

function checkKey(key: unknown): asserts key is string {
  if (typeof key !== "string" || !key || key.includes("\u0000"))
    throw new CodehopError(
      ErrorCodes.INPUT_INVALID,
      "a store item's key must be a non-empty string without NUL",
    );
}

/** LangGraph's namespace rules as a coded error. */
function checkNamespace(namespace: unknown, allowEmpty = false): asserts namespace is string[] {
  try {
    if (!Array.isArray(namespace)) throw new Error("a namespace is a list of labels");
    validateNamespace(namespace, { allowEmpty });
  } catch (err) {
    throw new CodehopError(ErrorCodes.INPUT_INVALID, (err as Error).message);
  }
}

/** Per-call options beyond LangGraph's BaseStore API. */
export interface PutOptions {
  /** Minutes the item lives (null: forever; default: the store's defaultTtl). */
  ttl?: number | null;
}

/**
 * The long-term memory store (see the module comment): a LangGraph `BaseStore`, so graphs read it
 * through `config.store` / `getStore()`, the server API serves it, and agents' memory tools use it.
 */
export class CodehopStore extends BaseStore {
  private readonly ttl: StoreTtl;
  private readonly index?: StoreIndex;
  private sweeper?: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly driver: MemoryDriver,
    options: MemoryStoreOptions = {},
  ) {
    super();
    this.ttl = options.ttl ?? {};
    this.index = options.index;
    const every = this.ttl.sweepIntervalMinutes ?? 60;
    if (every > 0) {
      this.sweeper = setInterval(() => void this.sweep().catch(() => {}), every * 60_000);
      this.sweeper.unref();
    }
  }

  /** Whether a query is ranked by embeddings (else lexically). */
  get semantic(): boolean {
    return this.index !== undefined;
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    this.assertOpen();
    const results: unknown[] = [];
    // Embeddings of every put of the batch in one request.
    const puts = operations.filter((op): op is PutOperation => "value" in op && op.value !== null);
    const vectors = await this.embedPuts(puts);
    for (const op of operations) {
      if ("value" in op) results.push(await this.putOne(op, vectors.get(op)));
      else if ("namespacePrefix" in op) results.push(await this.searchOne(op));
      else if ("key" in op) results.push(await this.getOne(op));
      else results.push(await this.listOne(op as ListNamespacesOperation));
    }
    return results as OperationResults<Op>;
  }

  /** `put` with a TTL (minutes; null: forever), beside LangGraph's `put(namespace, key, value, index)`. */
  override async put(
    namespace: string[],
    key: string,
    value: Record<string, any>,
    index?: false | string[],
    options: PutOptions = {},
  ): Promise<void> {
    this.assertOpen();
    const op: PutOperation = { namespace, key, value, ...(index === undefined ? {} : { index }) };
    checkValue(value);
    const vectors = await this.embedPuts([op]);
    await this.putOne(op, vectors.get(op), options.ttl);
  }

  /** `get` that may leave the item's expiry as it is (`refreshTtl: false`). */
  override async get(
    namespace: string[],
    key: string,
    options: { refreshTtl?: boolean } = {},
  ): Promise<Item | null> {
    this.assertOpen();
    return this.getOne({ namespace, key }, options.refreshTtl);
  }

  /** `search` that may leave the items' expiry as it is (`refreshTtl: false`). */
  override async search(
    namespacePrefix: string[],
    options: {
      filter?: Record<string, any>;
      limit?: number;
      offset?: number;
      query?: string;
      refreshTtl?: boolean;
    } = {},
  ): Promise<SearchItem[]> {
    this.assertOpen();
    const { refreshTtl, ...op } = options;
    return this.searchOne({ namespacePrefix, ...op }, refreshTtl);
  }

  /** Deletes expired items now (also done every `sweepIntervalMinutes`); returns how many. */
  async sweep(): Promise<number> {
    if (this.closed) return 0;
    return this.driver.sweep(Date.now());
  }

  override stop(): void {
    // LangGraph calls stop() when a run ends: the store outlives runs (close() ends it).
  }

  /** Closes the store's database (the store is unusable afterwards). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.sweeper) clearInterval(this.sweeper);
    await this.driver.close();
  }

  private assertOpen(): void {
    if (this.closed)
      throw new CodehopError(ErrorCodes.GRAPH_INVARIANT, "the memory store is closed");
  }

  private async embedPuts(puts: PutOperation[]): Promise<Map<PutOperation, ItemVector[]>> {
    const out = new Map<PutOperation, ItemVector[]>();
    if (!this.index) return out;
    const jobs: Array<{ op: PutOperation; field: string; text: string }> = [];
    for (const op of puts) {
      if (op.index === false || !op.value) continue;
      checkValue(op.value);
      const fields = op.index ?? this.index.fields ?? ["$"];
      for (const [field, text] of fieldTexts(op.value, fields)) jobs.push({ op, field, text });
    }
    if (!jobs.length) return out;
    const vectors = await this.index.embedder.embed(jobs.map((j) => j.text));
    jobs.forEach((job, i) => {
      const list = out.get(job.op) ?? [];
      list.push({ field: job.field, vector: Float32Array.from(vectors[i]) });
      out.set(job.op, list);
    });
    return out;
  }

  private async putOne(
    op: PutOperation,
    vectors?: ItemVector[],
    ttl?: number | null,
  ): Promise<void> {
    checkNamespace(op.namespace);
    checkKey(op.key);
    if (op.value === null) return this.driver.delete(op.namespace, op.key);
    checkValue(op.value);
    const now = Date.now();
    const existing = await this.driver.get(op.namespace, op.key, now);
    const minutes = ttl === undefined ? (this.ttl.defaultTtl ?? null) : ttl;
    if (minutes !== null && !(Number.isFinite(minutes) && minutes > 0))
      throw new CodehopError(
        ErrorCodes.INPUT_INVALID,
        `ttl must be a positive number of minutes, got ${minutes}`,
      );
    await this.driver.put(
      {
        namespace: op.namespace,
        key: op.key,
        value: op.value,
        createdAt: existing?.createdAt ?? now,
        updatedAt: now,
        ttlMinutes: minutes,
        expiresAt: minutes === null ? null : now + minutes * 60_000,
      },
      vectors,
    );
  }

  private refreshing(refreshTtl: boolean | undefined): boolean {
    return refreshTtl ?? this.ttl.refreshOnRead ?? true;
  }

  private async getOne(op: GetOperation, refreshTtl?: boolean): Promise<Item | null> {
    checkNamespace(op.namespace);
    checkKey(op.key);
    const now = Date.now();
    const item = await this.driver.get(op.namespace, op.key, now);
    if (!item) return null;
    if (item.ttlMinutes !== null && this.refreshing(refreshTtl))
      await this.driver.refresh([item], now);
    return toItem(item);
  }

  private async searchOne(op: SearchOperation, refreshTtl?: boolean): Promise<SearchItem[]> {
    checkNamespace(op.namespacePrefix, true);
    const limit = Math.max(0, Math.floor(op.limit ?? 10));
    const offset = Math.max(0, Math.floor(op.offset ?? 0));
    const filters = filterConditions(op.filter);
    const now = Date.now();
    const query = op.query?.trim();
    let found: Array<{ item: StoredItem; score?: number }>;
    if (!query) {
      const items = await this.driver.search(op.namespacePrefix, filters, now, { limit, offset });
      found = items.map((item) => ({ item }));
    } else {
      const items = await this.driver.search(op.namespacePrefix, filters, now);
      const ranked = this.index ? await this.rankSemantic(items, query) : rankLexical(items, query);
      found = ranked.slice(offset, offset + limit);
    }
    const refresh = found.map((f) => f.item).filter((i) => i.ttlMinutes !== null);
    if (refresh.length && this.refreshing(refreshTtl)) await this.driver.refresh(refresh, now);
    return found.map(({ item, score }) => ({
      ...toItem(item),
      ...(score === undefined ? {} : { score }),
    }));
  }

  private async rankSemantic(items: StoredItem[], query: string) {
    const [q] = await this.index!.embedder.embed([query]);
    const qv = Float32Array.from(q);
    const vectors = await this.driver.vectors(items);
    const scored: Array<{ item: StoredItem; score: number }> = [];
    for (const item of items) {
      const list = vectors.get(itemId(item.namespace, item.key));
      if (!list?.length) continue;
      scored.push({ item, score: Math.max(...list.map((v) => cosine(qv, v.vector))) });
    }
    return scored.sort((a, b) => b.score - a.score || b.item.updatedAt - a.item.updatedAt);
  }

  private async listOne(op: ListNamespacesOperation): Promise<string[][]> {
    const conditions = op.matchConditions ?? [];
    const seen = new Set<string>();
    const out: string[][] = [];
    // The leading labels of a prefix condition (up to a wildcard) narrow the query itself: a
    // served user's listing reads only the namespaces under their identity.
    const fixed: string[] = [];
    for (const label of conditions.find((c) => c.matchType === "prefix")?.path ?? []) {
      if (label === "*") break;
      fixed.push(label);
    }
    for (const namespace of await this.driver.namespaces(Date.now(), fixed)) {
      if (!conditions.every((c) => matchesCondition(namespace, c))) continue;
      const cut = op.maxDepth !== undefined ? namespace.slice(0, op.maxDepth) : namespace;
      const id = cut.join(".");
      if (seen.has(id)) continue;
      seen.add(id);
      out.push(cut);
    }
    out.sort((a, b) => a.join(".").localeCompare(b.join(".")));
    return out.slice(op.offset ?? 0, (op.offset ?? 0) + (op.limit ?? 100));
  }
}

/** Items ranked by the share of the query's distinct words in their text (none: dropped). */
function rankLexical(items: StoredItem[], query: string) {
  const terms = [...new Set(words(query))];
  if (!terms.length) return [];
  const scored: Array<{ item: StoredItem; score: number }> = [];
  for (const item of items) {
    const have = new Set(words(leafText(item.value)));
    const hits = terms.filter((t) => have.has(t)).length;
    if (hits) scored.push({ item, score: hits / terms.length });
  }
  return scored.sort((a, b) => b.score - a.score || b.item.updatedAt - a.item.updatedAt);
}

function toItem(item: StoredItem): Item {
  return {
    namespace: item.namespace,
    key: item.key,
    value: item.value,
    createdAt: new Date(item.createdAt),
    updatedAt: new Date(item.updatedAt),
  };
}
