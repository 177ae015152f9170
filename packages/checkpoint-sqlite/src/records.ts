/**
 * Checkpoint records: the checkpoint without its values, stored with its version maps as the
 * change from its parent's (a chain of at most {@link MAX_VERSIONS_CHAIN} such changes, then whole
 * again) and deflated with its ancestors' records as dictionary when that is smaller.
 */
import { deflateRawSync } from "node:zlib";
import type {
  ChannelVersions,
  Checkpoint,
  SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import {
  fromStoredInline,
  serialized,
  toStoredInline,
  type Codec,
  type InlineValue,
  type Source,
} from "./codec.ts";
import type { SaverContext } from "./context.ts";
import { corrupt, decoding, shown } from "./corrupt.ts";
import { deflateRecord, inflateRecord, readable, recordAncestorCount } from "./dictionaries.ts";
import { Lru } from "./lru.ts";
import { T_CHECKPOINTS, ZIP_RECORD_ANCESTORS, type CheckpointRow } from "./schema.ts";

/**
 * Channel versions and versions seen of a checkpoint, whole, and how many deltas led to them;
 * `inline`: the values kept in records along the way (an entry counts only while its version is
 * the channel's version).
 */
export interface Versions {
  channel_versions: ChannelVersions;
  versions_seen: Record<string, ChannelVersions>;
  chain: number;
  inline: Record<string, InlineValue>;
}

/**
 * A checkpoint row stores its version maps as the change from its parent (`base`: the parent's
 * id; `cv`: channels with a new version; `vs`: per node, the versions it saw that changed) at most
 * this many times in a row, then whole again (bounds a read to this many rows).
 */
const MAX_VERSIONS_CHAIN = 8;
/** `base` of a record whose version maps are stored as the change from its parent (the row's). */
const BASE_IS_PARENT = 1;
/** At most this many ancestors (never past the whole record that starts a delta chain). */
const RECORD_ANCESTORS = 3;
/**
 * A read follows at most this many records back (version maps, dictionaries): the saver writes a
 * whole record at least every {@link MAX_VERSIONS_CHAIN} + 1 rows, so only corrupt rows go deeper.
 */
const MAX_RECORD_DEPTH = 64;

/** A checkpoint row, as an error names it. */
export function recordSource(nsId: number, checkpointId: string): Source {
  return {
    table: T_CHECKPOINTS,
    row: () => `ns_id ${nsId}, checkpoint_id ${shown(checkpointId)}`,
  };
}

const isMap = (v: unknown) => typeof v === "object" && v !== null && !Array.isArray(v);

/** Whether every key of `before` is in `after` (maps that only grew or changed). */
function keepsKeys(before: object, after: object): boolean {
  for (const k of Object.keys(before)) if (!Object.hasOwn(after, k)) return false;
  return true;
}

/** A checkpoint row's record bytes and its parent's id. */
interface RawRecord {
  raw: Buffer;
  parentId: string | null;
}

/** A checkpoint row's record, decoded: raw bytes, parsed, its parent id, and whether it is whole. */
export interface RecordEntry {
  raw: Buffer;
  stored: Record<string, any>;
  parentId: string | null;
  whole: boolean;
}

/**
 * What a checkpoint row stores besides its values: the checkpoint without its id (the row's key)
 * and, when its parent's maps are known and it only added to them, its version maps as the
 * change from the parent (see {@link MAX_VERSIONS_CHAIN}).
 */
export function storedRecord(
  checkpoint: Omit<Checkpoint, "channel_values">,
  parentId: string | undefined,
  parent: Versions | undefined,
  inline: { added: Record<string, InlineValue>; current: Record<string, InlineValue> },
): Record<string, unknown> {
  const { id: _id, channel_versions, versions_seen, ...rest } = checkpoint;
  // A whole record holds every inline value still current; a delta only the ones it adds.
  const iv = (entries: Record<string, InlineValue>) => {
    const keys = Object.keys(entries);
    if (!keys.length) return {};
    return {
      iv: Object.fromEntries(keys.map((k) => [k, toStoredInline(entries[k]!, parentId)])),
    };
  };
  const whole = () => ({ ...rest, channel_versions, versions_seen, ...iv(inline.current) });
  if (
    parentId === undefined ||
    parent === undefined ||
    parent.chain >= MAX_VERSIONS_CHAIN ||
    !keepsKeys(parent.channel_versions, channel_versions) ||
    !keepsKeys(parent.versions_seen, versions_seen)
  )
    return whole();
  const cv: ChannelVersions = {};
  for (const [channel, version] of Object.entries(channel_versions))
    if (parent.channel_versions[channel] !== version) cv[channel] = version;
  const vs: Record<string, ChannelVersions> = {};
  for (const [node, seen] of Object.entries(versions_seen)) {
    const before = parent.versions_seen[node] ?? {};
    if (!keepsKeys(before, seen)) return whole();
    const changed: ChannelVersions = {};
    for (const [channel, version] of Object.entries(seen))
      if (before[channel] !== version) changed[channel] = version;
    if (Object.keys(changed).length || !Object.hasOwn(parent.versions_seen, node))
      vs[node] = changed;
  }
  return {
    ...rest,
    base: BASE_IS_PARENT,
    cv,
    vs,
    ...iv(inline.added),
  };
}

/** Reading and storing checkpoint records, with the caches of decoded records and version maps. */
export class Records {
  /** Decoded checkpoint records, by namespace id and checkpoint id (the ancestors a record needs). */
  private readonly records = new Lru<string, RecordEntry>(256);
  /** Decoded record bytes of ancestors read as dictionaries, by namespace id and checkpoint id. */
  private readonly recordBytes = new Lru<string, RawRecord>(256);
  /** Resolved version maps of delta-encoded checkpoints, by namespace id and checkpoint id. */
  private readonly versionMaps = new Lru<string, Versions>(256);
  /**
   * Checkpoint rows list() read (see {@link prime}), by namespace id and checkpoint id: the
   * records it needs, without a statement each.
   */
  private readonly rows = new Lru<string, CheckpointRow>(512);

  constructor(
    private readonly ctx: SaverContext,
    private readonly serde: () => SerializerProtocol,
    private readonly codec: Codec,
  ) {}

  /**
   * A checkpoint record as stored: a delta record deflated with its nearest ancestors' records as
   * dictionary when that is smaller, else as values are stored (deflated when that is smaller).
   */
  async encode(
    nsId: number,
    record: Record<string, unknown>,
    parentId: string | undefined,
  ): Promise<{ type: string; zip: number; data: Buffer; raw: Buffer }> {
    const [type, bytes] = await this.serde().dumpsTyped(record);
    const raw = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let zip = 0;
    let data = raw;
    if (this.codec.deflatable(raw.length)) {
      const packed = deflateRawSync(raw);
      if (packed.length < raw.length) [zip, data] = [1, packed];
    }
    if ("base" in record && parentId && raw.length <= this.codec.maxInflateBytes) {
      const raws = (await this.ancestors(nsId, parentId, RECORD_ANCESTORS)).map((a) => a.raw);
      if (raws.length) {
        const packed = deflateRecord(raw, [...raws].reverse());
        if (packed.length < data.length) [zip, data] = [ZIP_RECORD_ANCESTORS, packed];
      }
    }
    return { type, zip, data: zip === 0 ? Buffer.from(raw) : data, raw: Buffer.from(raw) };
  }

  /**
   * Keeps the rows list() fetched together (a row's ancestors, whose records reading it needs, are
   * mostly among them) for the records it reads next.
   */
  prime(rows: readonly CheckpointRow[]): void {
    for (const row of rows)
      if (!row.legacy && row.ns_id !== undefined)
        this.rows.set(`${row.ns_id}\u0000${row.checkpoint_id}`, row);
  }

  /** A checkpoint row of this saver's tables: primed, or read. */
  private row(nsId: number, id: string): CheckpointRow | undefined {
    return (
      this.rows.get(`${nsId}\u0000${id}`) ??
      (this.ctx.s.getCheckpoint.get(nsId, id) as CheckpointRow | undefined)
    );
  }

  /**
   * Remembers the record a put just made (its row is written later, with the queue): its bytes, as
   * the dictionary of the next records, and the record itself.
   */
  remember(nsId: number, id: string, entry: RecordEntry, metadata: unknown): void {
    const recordKey = `${nsId}\u0000${id}`;
    this.rows.delete(recordKey);
    this.recordBytes.set(recordKey, { raw: entry.raw, parentId: entry.parentId });
    this.records.delete(recordKey);
    try {
      // (A copy of the metadata: the caller's object may change after put.)
      this.records.set(recordKey, {
        ...entry,
        stored: { ...entry.stored, m: structuredClone(metadata) },
      });
    } catch {
      // Metadata structuredClone cannot copy: read back from the row when needed.
    }
  }

  /** Remembers the resolved version maps of a checkpoint just put. */
  rememberVersions(nsId: number, id: string, versions: Versions): void {
    this.versionMaps.set(`${nsId}\u0000${id}`, versions);
  }

  /** After a failed commit: a rolled-back put's record is not the row's. */
  forgetAll(): void {
    this.rows.deleteWhere(() => true);
    this.records.deleteWhere(() => true);
    this.recordBytes.deleteWhere(() => true);
  }

  /** Forgets what is known of a deleted namespace. */
  forgetNamespace(nsId: number): void {
    this.versionMaps.deleteWhere((key) => key.startsWith(`${nsId}\u0000`));
    this.rows.deleteWhere((key) => key.startsWith(`${nsId}\u0000`));
    this.records.deleteWhere((key) => key.startsWith(`${nsId}\u0000`));
    this.recordBytes.deleteWhere((key) => key.startsWith(`${nsId}\u0000`));
  }

  /** The record of a stored checkpoint row of this saver's tables, decoded (cached). */
  async recordOf(nsId: number, row: CheckpointRow): Promise<RecordEntry> {
    const key = `${nsId}\u0000${row.checkpoint_id}`;
    const cached = this.records.get(key);
    if (cached) return cached;
    // (Its bytes may be known already: read as the dictionary of a record after it.)
    const raw = this.recordBytes.get(key)?.raw ?? this.rawRecordOf(nsId, row, false);
    const source = recordSource(nsId, row.checkpoint_id);
    const stored = (await decoding(source.table, source.row, "its record does not parse", () =>
      this.serde().loadsTyped(row.type ?? "json", serialized(row.type ?? "json", raw)),
    )) as Record<string, any>;
    if (!isMap(stored)) corrupt(source.table, source.row(), "its record is not an object");
    const entry = {
      raw,
      stored,
      parentId: row.parent_checkpoint_id,
      whole: stored.base === undefined,
    };
    this.records.set(key, entry);
    return entry;
  }

  /**
   * A checkpoint row's record bytes: as stored, inflated, or inflated with its ancestors' records
   * (from the cache, or with `fromRows` from their rows only).
   */
  private rawRecordOf(
    nsId: number,
    row: CheckpointRow,
    fromRows: boolean,
    seen: { get(id: string): RawRecord | undefined; set(id: string, r: RawRecord): void } = fromRows
      ? new Map<string, RawRecord>()
      : this.rawRecords(nsId),
    path = new Set<string>(),
  ): Buffer {
    const source = recordSource(nsId, row.checkpoint_id);
    if (!Buffer.isBuffer(row.checkpoint))
      corrupt(source.table, source.row(), "its record is not bytes");
    if (row.zip === 0) return row.checkpoint;
    if (row.zip === 1) return this.codec.inflate(row.checkpoint, source);
    if (row.zip !== ZIP_RECORD_ANCESTORS)
      corrupt(source.table, source.row(), `its zip format ${row.zip} is unknown`);
    // Its ancestors may be deflated against theirs in turn: never one twice, never too deep.
    if (path.has(row.checkpoint_id))
      corrupt(source.table, source.row(), "its chain of parent records loops back to it");
    if (path.size >= MAX_RECORD_DEPTH)
      corrupt(
        source.table,
        source.row(),
        `its record is deflated against ancestors more than ${MAX_RECORD_DEPTH} records deep`,
      );
    path.add(row.checkpoint_id);
    try {
      const count = recordAncestorCount(row.checkpoint, source);
      const raws: Buffer[] = [];
      let id = row.parent_checkpoint_id;
      while (id && raws.length < count) {
        // (Ancestors share ancestors: each is decoded once per read.)
        const known =
          seen.get(id) ?? (fromRows ? undefined : this.records.get(`${nsId}\u0000${id}`));
        if (known) {
          raws.unshift(known.raw);
          id = known.parentId;
          continue;
        }
        const parent = fromRows
          ? (this.ctx.s.getCheckpoint.get(nsId, id) as CheckpointRow | undefined)
          : this.row(nsId, id);
        if (!parent) break;
        const raw = this.rawRecordOf(nsId, parent, fromRows, seen, path);
        seen.set(id, { raw, parentId: parent.parent_checkpoint_id });
        raws.unshift(raw);
        id = parent.parent_checkpoint_id;
      }
      if (raws.length !== count)
        corrupt(
          source.table,
          source.row(),
          `its record is deflated against ${count} ancestor records, and ${raws.length} exist`,
        );
      return inflateRecord(this.codec, row.checkpoint, raws, source);
    } finally {
      path.delete(row.checkpoint_id);
    }
  }

  /**
   * Before checkpoint `id` is stored again (its record may change): the records deflated with it
   * in their dictionary (its descendants up to {@link RECORD_ANCESTORS} generations) are stored
   * again without one, so none becomes unreadable.
   */
  releaseDependents(nsId: number, id: string): void {
    // (Rows read before are stored again below: read them again.)
    this.rows.deleteWhere((key) => key.startsWith(`${nsId}\u0000`));
    let frontier = [id];
    for (let depth = 0; depth < RECORD_ANCESTORS && frontier.length; depth++) {
      const children = this.ctx.db
        .prepare(
          `SELECT c.*, c.ns_id AS ns_id FROM ${T_CHECKPOINTS} c
           WHERE c.ns_id = ? AND c.parent_checkpoint_id IN (SELECT value FROM json_each(?))`,
        )
        .all(nsId, JSON.stringify(frontier)) as CheckpointRow[];
      for (const child of children) {
        if (child.zip !== ZIP_RECORD_ANCESTORS) continue;
        // (A child that cannot be read already is left as it is: the commit goes on.)
        const raw = readable(() => this.rawRecordOf(nsId, child, true));
        if (!raw) continue;
        const zipped = this.codec.deflatable(raw.length) ? deflateRawSync(raw) : raw;
        const smaller = zipped.length < raw.length;
        this.ctx.s.setCheckpointZip.run(
          smaller ? 1 : 0,
          smaller ? zipped : raw,
          nsId,
          child.checkpoint_id,
        );
      }
      frontier = children.map((c) => c.checkpoint_id);
    }
  }

  /** The cache of decoded record bytes of a namespace, by checkpoint id. */
  private rawRecords(nsId: number) {
    return {
      get: (id: string) => this.recordBytes.get(`${nsId}\u0000${id}`),
      set: (id: string, r: RawRecord) => this.recordBytes.set(`${nsId}\u0000${id}`, r),
    };
  }

  /** The record of checkpoint `id` of a namespace (undefined when there is no such row). */
  private async recordById(nsId: number, id: string): Promise<RecordEntry | undefined> {
    const cached = this.records.get(`${nsId}\u0000${id}`);
    if (cached) return cached;
    this.ctx.flush();
    const row = this.row(nsId, id);
    return row ? this.recordOf(nsId, row) : undefined;
  }

  /**
   * Up to `count` records from `parentId` back (nearest first), never past the whole record that
   * starts a delta chain (so a record's dictionary never reaches outside its chain).
   */
  private async ancestors(nsId: number, parentId: string | null, count: number) {
    const out: RecordEntry[] = [];
    let id = parentId;
    while (id && out.length < count) {
      const entry = await this.recordById(nsId, id);
      if (!entry) break;
      out.push(entry);
      if (entry.whole) break;
      id = entry.parentId;
    }
    return out;
  }

  /**
   * The whole version maps of a stored checkpoint record: its own, or (delta-encoded, `base` set)
   * its base checkpoint's with its changes applied. The chain of changes is followed to its whole
   * record, never through one record twice nor more than {@link MAX_RECORD_DEPTH} deep.
   */
  async versionsFrom(
    nsId: number,
    id: string,
    stored: Record<string, any>,
    parentId: string | null,
    path = new Set<string>(),
  ): Promise<Versions> {
    const source = recordSource(nsId, id);
    const bad = (problem: string): never => corrupt(source.table, source.row(), problem);
    // `base`: 1 for the parent (records written since), or the base checkpoint's id (earlier ones).
    const baseId = stored.base === BASE_IS_PARENT ? parentId : stored.base;
    if (
      stored.base !== undefined &&
      stored.base !== BASE_IS_PARENT &&
      typeof stored.base !== "string"
    )
      bad("its version maps name a base that is not a checkpoint");
    if (typeof baseId !== "string") {
      if (stored.base !== undefined)
        bad("its version maps are changes from a parent it does not have");
      for (const key of ["channel_versions", "versions_seen"])
        if (stored[key] !== undefined && !isMap(stored[key])) bad(`its ${key} is not an object`);
      return {
        channel_versions: stored.channel_versions ?? {},
        versions_seen: stored.versions_seen ?? {},
        chain: 0,
        inline: fromStoredInline(stored.iv, stored.channel_versions ?? {}, parentId, source),
      };
    }
    const key = `${nsId}\u0000${id}`;
    const cached = this.versionMaps.get(key);
    if (cached) return cached;
    for (const k of ["cv", "vs"])
      if (stored[k] !== undefined && !isMap(stored[k])) bad(`its ${k} is not an object`);
    if (path.has(id) || baseId === id) bad("its chain of version-map changes loops back to it");
    if (path.size >= MAX_RECORD_DEPTH)
      bad(`its version maps are changes more than ${MAX_RECORD_DEPTH} records deep`);
    path.add(id);
    const baseRecord = await this.recordById(nsId, baseId);
    if (!baseRecord)
      return bad(`its version maps are changes from checkpoint ${shown(baseId)}, which is missing`);
    const base = await this.versionsFrom(
      nsId,
      baseId,
      baseRecord.stored,
      baseRecord.parentId,
      path,
    );
    const seen: Record<string, ChannelVersions> = { ...base.versions_seen };
    for (const [node, changed] of Object.entries(
      (stored.vs ?? {}) as Record<string, ChannelVersions>,
    ))
      seen[node] = { ...seen[node], ...changed };
    const versions: Versions = {
      channel_versions: { ...base.channel_versions, ...stored.cv },
      versions_seen: seen,
      chain: base.chain + 1,
      inline: {
        ...base.inline,
        ...fromStoredInline(stored.iv, stored.cv ?? {}, parentId, source),
      },
    };
    this.versionMaps.set(key, versions);
    return versions;
  }
}
