/**
 * Channel values: a blob row per channel version, holding the whole value, the items a list gained
 * since an earlier version (a chain of appends, with a whole copy again at geometrically spaced
 * sizes so storage stays linear and reads short), or references to the task writes that made the
 * value (LangGraph stores every task's writes anyway).
 */
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import {
  compareWrites,
  INLINE_BELOW,
  INLINE_RAW_MAX,
  type CachedWrite,
  type Codec,
  type InlineValue,
  type Source,
  type StoredWrite,
  type WriteRef,
} from "./codec.ts";
import type { SaverContext } from "./context.ts";
import { ChainGuard, corrupt, decodingSync, shown } from "./corrupt.ts";
import type { WriteRows } from "./dictionaries.ts";
import { Lru } from "./lru.ts";
import {
  KIND_APPEND,
  KIND_APPEND_WRITES,
  KIND_EMPTY,
  KIND_FULL,
  KIND_WRITE,
  T_BLOBS,
  type BlobRow,
  type WritesRow,
} from "./schema.ts";

export const blobKey = (nsId: number, channel: string, version: string) =>
  `${nsId}\u0000${channel}\u0000${version}`;

/** A blob row, as an error names it. */
function blobSource(nsId: number, channel: string, version: string): Source {
  return {
    table: T_BLOBS,
    row: () => `ns_id ${nsId}, channel ${shown(channel)}, version ${shown(version)}`,
  };
}

/** What a blob row of references to task writes holds: the checkpoint and the writes. */
interface StoredRefs {
  checkpoint: string;
  refs: WriteRef[];
}

/** A blob row's references (`value`: JSON), checked. */
function refsOf(row: BlobRow, source: Source): StoredRefs {
  return decodingSync(
    source.table,
    source.row,
    "its references to task writes do not parse",
    () => {
      const parsed = JSON.parse(String(row.value)) as StoredRefs;
      const ref = (r: unknown) =>
        Array.isArray(r) &&
        typeof r[0] === "string" &&
        Number.isInteger(r[1]) &&
        (r[2] === 0 || r[2] === 1);
      if (
        typeof parsed?.checkpoint !== "string" ||
        !Array.isArray(parsed.refs) ||
        !parsed.refs.every(ref)
      )
        throw new Error("not references");
      return parsed;
    },
  );
}

/** A blob row's stored bytes (a row of kind full or append holds bytes). */
function bytesOf(row: BlobRow, source: Source): Buffer | null {
  if (row.value !== null && !Buffer.isBuffer(row.value))
    corrupt(source.table, source.row(), "its value is not bytes");
  return row.value;
}

/** The items a stored list contributes (a spread write, appended items): it must be a list. */
function spreadOf(value: unknown, source: Source): unknown[] {
  if (!Array.isArray(value)) corrupt(source.table, source.row(), "items it appends are not a list");
  return value;
}

/**
 * A chain of appends at most this long down to its whole copy is read a row at a time with the
 * statement that read its first row; a longer one in one recursive query (whose preparing, on a
 * fresh connection, costs what about ten row lookups do).
 */
const SHORT_CHAIN = 8;
/** The writes rows of at most this many checkpoints are read a checkpoint at a time (see SHORT_CHAIN). */
const FEW_CHECKPOINTS = 4;

/** Reading and choosing the blob rows of channel values, with the cache of decoded values. */
export class ChannelValues {
  /** Decoded channel values, by blob key. */
  private readonly values: Lru<string, unknown>;
  /** Blob rows not written yet, by blob key (read by appends to them). */
  readonly pending = new Map<string, BlobRow>();
  /**
   * Blob rows read, by blob key (null: no row, an empty channel): list() reads the same versions
   * for many checkpoints. A row changes only when its checkpoint is put again (see queue).
   */
  private readonly rows: Lru<string, BlobRow | null>;

  constructor(
    private readonly ctx: SaverContext,
    private readonly serde: () => SerializerProtocol,
    private readonly codec: Codec,
    private readonly writeRows: WriteRows,
    cacheSize: number,
    /** A list appended this many times in a row is stored whole once more (see blobFor). */
    private readonly minChain: number,
  ) {
    this.values = new Lru(cacheSize);
    this.rows = new Lru(cacheSize);
  }

  /** Forgets the decoded values of a deleted namespace. */
  forgetNamespace(nsId: number): void {
    this.values.deleteWhere((key) => key.startsWith(`${nsId}\u0000`));
    this.rows.deleteWhere((key) => key.startsWith(`${nsId}\u0000`));
  }

  /** Queues a blob row of a put (`blob` as {@link blobFor} made it) until it is written. */
  queue(nsId: number, blob: unknown[]): void {
    const [, channel, version, kind, base_version, chain, items, snapshot_items, type, zip, value] =
      blob;
    const key = blobKey(nsId, String(channel), String(version));
    this.rows.delete(key);
    this.pending.set(key, {
      kind,
      base_version,
      chain,
      items,
      snapshot_items,
      type,
      zip,
      value,
    } as BlobRow);
  }

  /** The values of stored writes, in order (a spread ref contributes the items of its list). */
  private async resolveWrites(nsId: number, refs: StoredRefs, source: Source) {
    const out: unknown[] = [];
    for (const { w, spread } of this.findWrites(nsId, refs, source)) {
      const value = await this.codec.decode(w.type, 0, w.data, w.source ?? source);
      if (spread) out.push(...spreadOf(value, source));
      else out.push(value);
    }
    return out;
  }

  /** The value of an inline entry of a checkpoint record (`source`: the record's row). */
  async readInline(nsId: number, entry: InlineValue, source: Source): Promise<unknown> {
    if (entry[1] === 0) return this.codec.decodeText(entry[2], source);
    return (
      await this.resolveWrites(
        nsId,
        { checkpoint: entry[2], refs: [[entry[3], entry[4], 0]] },
        source,
      )
    )[0];
  }

  /**
   * The inline entry for a blob row about to be written, when it is small enough: a JSON value that
   * is not a list (a list may be the base later versions append to, which must be a row), or a
   * reference to the single write that made such a value.
   */
  inlineOf(blob: unknown[], value: unknown): InlineValue | undefined {
    if (Array.isArray(value)) return undefined;
    const [, , version, kind, , , , , type, zip, data] = blob as [
      number,
      string,
      string,
      number,
      unknown,
      number,
      number,
      number,
      string,
      number,
      Buffer,
    ];
    if (kind === KIND_FULL && type === "json" && data.length < INLINE_BELOW) {
      const raw = zip
        ? this.codec.inflate(data, blobSource(blob[0] as number, String(blob[1]), version))
        : data;
      if (raw.length <= INLINE_RAW_MAX) return [version, 0, raw.toString("utf8")];
    }
    if (kind === KIND_WRITE) {
      const { checkpoint, refs } = JSON.parse(data.toString("utf8")) as {
        checkpoint: string;
        refs: WriteRef[];
      };
      return [version, 1, checkpoint, refs[0]![0], refs[0]![1]];
    }
    return undefined;
  }

  /** The value of a channel at a version (`found` false when no blob exists). */
  async readBlob(
    nsId: number,
    channel: string,
    version: string,
  ): Promise<{ found: boolean; value?: unknown; row?: BlobRow }> {
    const key = blobKey(nsId, channel, version);
    let row = this.pending.get(key) ?? this.rows.get(key);
    if (row === undefined) {
      row = (this.ctx.s.getBlob.get(nsId, channel, version) as BlobRow | undefined) ?? null;
      this.rows.set(key, row);
    }
    if (!row) return { found: false };
    if (row.kind === KIND_EMPTY) return { found: true, row };
    const cached = this.values.get(key);
    if (cached !== undefined) return { found: true, value: cached, row };
    const source = blobSource(nsId, channel, version);
    let value: unknown;
    if (row.kind === KIND_FULL)
      value = await this.codec.decode(row.type, row.zip, bytesOf(row, source), source);
    else if (row.kind === KIND_WRITE) {
      value = (await this.resolveWrites(nsId, refsOf(row, source), source))[0];
    } else if (row.kind === KIND_APPEND || row.kind === KIND_APPEND_WRITES)
      return { found: true, value: await this.readAppended(nsId, channel, version, row), row };
    else corrupt(source.table, source.row(), `its kind ${shown(row.kind)} is unknown`);
    this.values.set(key, value);
    return { found: true, value, row };
  }

  /**
   * The value of a list channel at a version stored as items appended to an earlier one: the chain
   * of appends down to a value that is cached or stored whole is fetched in one query (and the
   * writes its links refer to in another), then the items are added oldest first; every version
   * on the way is cached (list() reads them next).
   */
  private async readAppended(
    nsId: number,
    channel: string,
    version: string,
    first: BlobRow,
  ): Promise<unknown[]> {
    const source = blobSource(nsId, channel, version);
    // A row says how many appends lead down to its list's last whole copy (`chain`): the walk
    // stops there, and at a row met twice (a corrupt chain could otherwise loop for ever).
    if (!Number.isSafeInteger(first.chain) || first.chain < 0)
      corrupt(source.table, source.row(), "its chain length is not a count");
    const guard = new ChainGuard(first.chain + 1, { ...source, what: "chain of appends" });
    guard.step(version);
    const links: Array<{ version: string; row: BlobRow }> = [{ version, row: first }];
    let fetched: Map<string, BlobRow> | undefined;
    let base: unknown[] | undefined;
    for (;;) {
      const { row } = links.at(-1)!;
      const baseVersion = row.base_version;
      if (baseVersion !== null) guard.step(String(baseVersion));
      if (baseVersion === null) {
        base = [];
        break;
      }
      const cached = this.values.get(blobKey(nsId, channel, baseVersion));
      if (Array.isArray(cached)) {
        base = cached;
        break;
      }
      const baseKey = blobKey(nsId, channel, baseVersion);
      let next =
        this.pending.get(baseKey) ??
        fetched?.get(baseVersion) ??
        this.rows.get(baseKey) ??
        undefined;
      if (!next && row.chain <= SHORT_CHAIN) {
        // (A few links: the blob statement a read has prepared already, once per link.)
        next = this.ctx.s.getBlob.get(nsId, channel, baseVersion) as BlobRow | undefined;
        this.rows.set(baseKey, next ?? null);
      } else if (!next) {
        fetched = this.chainRows(nsId, channel, baseVersion);
        next = fetched.get(baseVersion);
      }
      if (next && (next.kind === KIND_APPEND || next.kind === KIND_APPEND_WRITES)) {
        links.push({ version: baseVersion, row: next });
        continue;
      }
      const whole = next ? await this.readBlob(nsId, channel, baseVersion) : undefined;
      if (!whole?.found || !Array.isArray(whole.value))
        corrupt(
          source.table,
          blobSource(nsId, channel, links.at(-1)!.version).row(),
          `it appends to version ${shown(baseVersion)}, which is missing or not a list`,
        );
      base = whole.value;
      break;
    }
    links.reverse();
    const refs = links.map(({ version: v, row }) =>
      row.kind === KIND_APPEND_WRITES ? refsOf(row, blobSource(nsId, channel, v)) : undefined,
    );
    const prefetched = this.prefetchWrites(
      nsId,
      refs.flatMap((r) => (r ? [r.checkpoint] : [])),
    );
    // The writes every link refers to, decoded together (one parse for the whole chain).
    const found = links.map(({ version: v }, i) =>
      refs[i]
        ? this.findWrites(nsId, refs[i]!, blobSource(nsId, channel, v), prefetched)
        : undefined,
    );
    const decoded = await this.codec.decodeWrites(
      found.flatMap((f) => (f ? f.map((x) => x.w) : [])),
      source,
    );
    let at = 0;
    let value = base;
    for (const [i, { version: v, row }] of links.entries()) {
      const link = blobSource(nsId, channel, v);
      let tail: unknown[];
      if (row.kind === KIND_APPEND)
        tail = spreadOf(await this.codec.decode(row.type, row.zip, bytesOf(row, link), link), link);
      else {
        tail = [];
        for (const { spread } of found[i]!) {
          const one = decoded[at++];
          if (spread) tail.push(...spreadOf(one, link));
          else tail.push(one);
        }
      }
      value = value.concat(tail);
      this.values.set(blobKey(nsId, channel, v), value);
    }
    return value;
  }

  /** The stored writes `refs` name, in order, with their spread flags. */
  private findWrites(
    nsId: number,
    refs: StoredRefs,
    source: Source,
    prefetched?: Map<string, StoredWrite[]>,
  ): Array<{ w: StoredWrite; spread: 0 | 1 }> {
    return refs.refs.map(([taskId, idx, spread]) => {
      const w = (
        prefetched?.get(`${nsId}\u0000${refs.checkpoint}\u0000${taskId}`) ??
        this.writeRows.taskWrites(nsId, refs.checkpoint, taskId)
      )?.find((x) => x.idx === idx);
      if (!w)
        corrupt(
          source.table,
          source.row(),
          `it refers to write ${idx} of task ${shown(taskId)} of checkpoint ${shown(refs.checkpoint)}, which is missing`,
        );
      return { w, spread };
    });
  }

  /** The blob rows of a chain of appends from `version` down to (and with) its first other row. */
  private chainRows(nsId: number, channel: string, version: string): Map<string, BlobRow> {
    // (The query stops at a row met twice; the caller's guard stops the walk.)
    const rows = this.ctx.s.blobChain.all({ ns: nsId, channel, version }) as Array<
      BlobRow & { version: string }
    >;
    for (const r of rows) this.rows.set(blobKey(nsId, channel, r.version), r);
    return new Map(rows.map((r) => [r.version, r]));
  }

  /** The stored writes of the tasks of these checkpoints, in one query, by task key. */
  private prefetchWrites(nsId: number, checkpointIds: string[]): Map<string, StoredWrite[]> {
    const out = new Map<string, StoredWrite[]>();
    if (checkpointIds.length < 2) return out;
    const ids = [...new Set(checkpointIds)];
    const ahead = this.writeRows.aheadRows(nsId, ids);
    const rows = ahead
      ? ([...ahead.values()].flat() as Array<WritesRow & { checkpoint_id: string }>)
      : ids.length <= FEW_CHECKPOINTS
        ? ids.flatMap(
            (id) =>
              this.writeRows.checkpointRows(nsId, id) as Array<
                WritesRow & { checkpoint_id: string }
              >,
          )
        : (this.ctx.s.writesOf.all(nsId, JSON.stringify(ids)) as Array<
            WritesRow & { checkpoint_id: string }
          >);
    for (const row of rows) {
      const key = `${nsId}\u0000${row.checkpoint_id}\u0000${row.task_id}`;
      if (!this.writeRows.pending.has(key)) out.set(key, this.writeRows.unpackRow(nsId, row));
    }
    return out;
  }

  /**
   * References to the parent's task writes whose values, in LangGraph's writes order, are exactly
   * `items` (the same objects; a written list counts as its items), or undefined.
   */
  private writeRefs(
    writes: CachedWrite[] | undefined,
    channel: string,
    items: readonly unknown[],
    single: boolean,
  ): WriteRef[] | undefined {
    const mine = (writes ?? []).filter((w) => w.channel === channel).sort(compareWrites);
    if (!mine.length) return undefined;
    if (single) {
      const last = mine.at(-1)!;
      return last.value === items[0] ? [[last.taskId, last.idx, 0]] : undefined;
    }
    const refs: WriteRef[] = [];
    let at = 0;
    for (const w of mine) {
      if (Array.isArray(w.value)) {
        for (const v of w.value) if (items[at++] !== v) return undefined;
        refs.push([w.taskId, w.idx, 1]);
      } else {
        if (items[at++] !== w.value) return undefined;
        refs.push([w.taskId, w.idx, 0]);
      }
    }
    return at === items.length ? refs : undefined;
  }

  /**
   * The blob row to store `value` of `channel` at `version`, given the version it had in the parent
   * checkpoint and the writes the parent's tasks made: a reference to a write when the value is what
   * one task wrote; the new items only (or references to the writes that added them) when the value
   * is that version's list with items added; else the whole value.
   */
  async blobFor(
    nsId: number,
    channel: string,
    version: string,
    value: unknown,
    baseVersion: string | undefined,
    parent: { id: string; writes?: CachedWrite[] } | undefined,
  ): Promise<unknown[]> {
    const key = blobKey(nsId, channel, version);
    const refsJson = (refs: WriteRef[]) =>
      Buffer.from(JSON.stringify({ checkpoint: parent!.id, refs }), "utf8");
    if (Array.isArray(value) && baseVersion !== undefined && baseVersion !== version) {
      const base = await this.readBlob(nsId, channel, baseVersion).catch(() => undefined);
      const prev = base?.value;
      if (base?.row && Array.isArray(prev) && prev.length > 0 && prev.length <= value.length) {
        if (await this.isPrefix(prev, value)) {
          const row = base.row;
          const appended = row.kind === KIND_APPEND || row.kind === KIND_APPEND_WRITES;
          const chain = appended ? row.chain + 1 : 1;
          const snapshotItems = appended ? row.snapshot_items : prev.length;
          const sinceSnapshot = value.length - snapshotItems;
          // A full copy again once the chain is long and has added half as many items as the last
          // copy held: copies at sizes growing 1.5x each time keep storage linear (at most 3x the
          // items) and a chain at most a third of the list (a fresh read decodes one row a link).
          if (!(chain >= this.minChain && 2 * sinceSnapshot >= snapshotItems)) {
            const tail = value.slice(prev.length);
            this.values.set(key, value);
            const meta = [baseVersion, chain, value.length, snapshotItems];
            const refs = parent && this.writeRefs(parent.writes, channel, tail, false);
            if (refs && JSON.stringify(tail).length > 128)
              return [
                nsId,
                channel,
                version,
                KIND_APPEND_WRITES,
                ...meta,
                "refs",
                0,
                refsJson(refs),
              ];
            const e = await this.codec.encode(tail);
            return [nsId, channel, version, KIND_APPEND, ...meta, e.type, e.zip, e.data];
          }
        }
      }
    }
    this.values.set(key, value);
    const items = Array.isArray(value) ? value.length : 0;
    const e = await this.codec.encode(value);
    // A reference costs ~100 bytes: worth it only for a larger value. A list that was empty (or
    // absent) before is the writes that made it; another value may be the one write made.
    if (parent && e.data.length > 128) {
      const fresh = baseVersion === undefined || items === 0;
      const list =
        Array.isArray(value) && fresh && this.writeRefs(parent.writes, channel, value, false);
      if (list)
        return [
          nsId,
          channel,
          version,
          KIND_APPEND_WRITES,
          null,
          0,
          items,
          items,
          "refs",
          0,
          refsJson(list),
        ];
      const single = this.writeRefs(parent.writes, channel, [value], true);
      if (single)
        return [
          nsId,
          channel,
          version,
          KIND_WRITE,
          null,
          0,
          items,
          items,
          "refs",
          0,
          refsJson(single),
        ];
    }
    return [nsId, channel, version, KIND_FULL, null, 0, items, items, e.type, e.zip, e.data];
  }

  /** Whether `prev` is the start of `next`: the same objects, else items that serialize the same. */
  private async isPrefix(prev: unknown[], next: unknown[]): Promise<boolean> {
    let same = true;
    for (let i = 0; i < prev.length; i++) {
      if (prev[i] !== next[i]) {
        same = false;
        break;
      }
    }
    if (same) return true;
    const bytes = async (v: unknown) => Buffer.from((await this.serde().dumpsTyped(v))[1]);
    for (let i = 0; i < prev.length; i++) {
      if (!(await bytes(prev[i])).equals(await bytes(next[i]))) return false;
    }
    return true;
  }
}
