/**
 * Checkpoint records: the checkpoint without its values, whole, deflated with one earlier record
 * of its lineage (its keyframe, stored alone) as dictionary when that is smaller, so a record reads
 * from its row and its keyframe's only. Rows of earlier versions hold their version maps as the
 * change from their parent's (a chain of deltas, deflated with their ancestors' records): they
 * read as before.
 */
import { deflateRawSync } from "node:zlib";
import type {
  ChannelVersions,
  Checkpoint,
  SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import {
  fromStoredInline,
  load,
  toStoredInline,
  type Codec,
  type InlineValue,
  type Source,
} from "./codec.ts";
import type { SaverContext } from "./context.ts";
import { corrupt, decoding, shown } from "./corrupt.ts";
import {
  deflateOnKeyframe,
  inflateOnKeyframe,
  inflateRecord,
  keyframeHeader,
  readable,
  recordAncestorCount,
} from "./dictionaries.ts";
import { Lru } from "./lru.ts";
import {
  T_CHECKPOINTS,
  ZIP_RECORD_ANCESTORS,
  ZIP_RECORD_KEYFRAME,
  type CheckpointRow,
} from "./schema.ts";

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
 * `base` of a record of earlier versions whose version maps are stored as the change from its
 * parent (the row's): `cv`, channels with a new version; `vs`, per node, the versions it saw that
 * changed. (Earlier still, `base` named the parent's id.)
 */
const BASE_IS_PARENT = 1;
/** Rows of earlier versions were deflated with up to this many ancestors' records. */
const RECORD_ANCESTORS = 3;
/**
 * A record is deflated against a keyframe at most this many generations back; the next one is
 * stored alone and is the keyframe of the ones after it. (Measured on the checkpoint bench: a
 * record against a keyframe 16 steps back is ~1.3x one against its parent; stored alone, ~4x.)
 */
const KEYFRAME_SPAN = 16;
/**
 * A read follows at most this many records back (version maps and dictionaries of rows of
 * earlier versions, which wrote a whole record at least every 9 rows): only corrupt rows go deeper.
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

/** A checkpoint row's record bytes and its parent's id. */
interface RawRecord {
  raw: Buffer;
  parentId: string | null;
}

/**
 * A checkpoint row's record, decoded: raw bytes, parsed, its parent id, whether its row stores it
 * alone (zip 0 or 1: a keyframe for the records after it), or else the keyframe it is stored
 * against.
 */
export interface RecordEntry {
  raw: Buffer;
  stored: Record<string, any>;
  parentId: string | null;
  alone: boolean;
  keyframe?: { id: string; depth: number };
}

/**
 * What a checkpoint row stores besides its values: the checkpoint without its id (the row's key),
 * its version maps whole, and the small channel values still current (`inline`, see InlineValue).
 */
export function storedRecord(
  checkpoint: Omit<Checkpoint, "channel_values">,
  parentId: string | undefined,
  inline: Record<string, InlineValue>,
): Record<string, unknown> {
  const { id: _id, ...rest } = checkpoint;
  const keys = Object.keys(inline);
  if (!keys.length) return rest;
  return {
    ...rest,
    iv: Object.fromEntries(keys.map((k) => [k, toStoredInline(inline[k]!, parentId)])),
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
   * A checkpoint record as stored: deflated with its keyframe's record as dictionary (the parent's
   * keyframe, or the parent when it is stored alone, up to {@link KEYFRAME_SPAN} generations back)
   * when that is smaller, else as values are stored (deflated when that is smaller): the keyframe
   * of the records after it.
   */
  async encode(
    nsId: number,
    record: Record<string, unknown>,
    parentId: string | undefined,
  ): Promise<{
    type: string;
    zip: number;
    data: Buffer;
    raw: Buffer;
    keyframe?: { id: string; depth: number };
  }> {
    const [type, bytes] = await this.serde().dumpsTyped(record);
    const raw = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let zip = 0;
    let data = raw;
    if (this.codec.deflatable(raw.length)) {
      const packed = deflateRawSync(raw);
      if (packed.length < raw.length) [zip, data] = [1, packed];
    }
    const keyframe =
      parentId && raw.length <= this.codec.maxInflateBytes
        ? await this.keyframeFor(nsId, parentId)
        : undefined;
    if (keyframe) {
      const packed = deflateOnKeyframe(raw, keyframe);
      if (packed && packed.length < data.length)
        return {
          type,
          zip: ZIP_RECORD_KEYFRAME,
          data: packed,
          raw: Buffer.from(raw),
          keyframe: { id: keyframe.id, depth: keyframe.depth },
        };
    }
    return { type, zip, data: zip === 0 ? Buffer.from(raw) : data, raw: Buffer.from(raw) };
  }

  /**
   * The keyframe a child of `parentId` is stored against: the parent when its row stores it
   * alone, else the parent's keyframe while it is fewer than {@link KEYFRAME_SPAN} generations back
   * (undefined: the child is stored alone). A keyframe that does not read is none.
   */
  private async keyframeFor(
    nsId: number,
    parentId: string,
  ): Promise<{ id: string; depth: number; raw: Buffer } | undefined> {
    const parent = await this.recordById(nsId, parentId).catch(() => undefined);
    if (!parent) return undefined;
    if (parent.alone) return { id: parentId, depth: 1, raw: parent.raw };
    const kf = parent.keyframe;
    if (!kf || kf.depth >= KEYFRAME_SPAN) return undefined;
    const entry = await this.recordById(nsId, kf.id).catch(() => undefined);
    return entry?.alone ? { id: kf.id, depth: kf.depth + 1, raw: entry.raw } : undefined;
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
      load(this.serde(), row.type ?? "json", raw),
    )) as Record<string, any>;
    if (!isMap(stored)) corrupt(source.table, source.row(), "its record is not an object");
    const entry: RecordEntry = {
      raw,
      stored,
      parentId: row.parent_checkpoint_id,
      alone: row.zip === 0 || row.zip === 1,
    };
    if (row.zip === ZIP_RECORD_KEYFRAME) {
      const { id, depth } = keyframeHeader(row.checkpoint, source);
      entry.keyframe = { id, depth };
    }
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
    if (row.zip === ZIP_RECORD_KEYFRAME) return this.rawOnKeyframe(nsId, row, fromRows, seen);
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

  /** The record bytes of a row stored against its keyframe (a row stored alone, read first). */
  private rawOnKeyframe(
    nsId: number,
    row: CheckpointRow,
    fromRows: boolean,
    seen: { get(id: string): RawRecord | undefined; set(id: string, r: RawRecord): void },
  ): Buffer {
    const source = recordSource(nsId, row.checkpoint_id);
    const header = keyframeHeader(row.checkpoint, source);
    if (header.id === row.checkpoint_id)
      corrupt(source.table, source.row(), "its keyframe record is itself");
    let raw =
      seen.get(header.id)?.raw ??
      (fromRows ? undefined : this.records.get(`${nsId}\u0000${header.id}`)?.raw);
    if (!raw) {
      const keyframe = fromRows
        ? (this.ctx.s.getCheckpoint.get(nsId, header.id) as CheckpointRow | undefined)
        : this.row(nsId, header.id);
      if (!keyframe || (keyframe.zip !== 0 && keyframe.zip !== 1))
        corrupt(
          source.table,
          source.row(),
          `its keyframe record ${shown(header.id)} is missing, or is not stored alone`,
        );
      raw = this.rawRecordOf(nsId, keyframe, fromRows, seen);
      seen.set(header.id, { raw, parentId: keyframe.parent_checkpoint_id });
    }
    return inflateOnKeyframe(this.codec, row.checkpoint, header, raw, source);
  }

  /**
   * Before checkpoint `id` is stored again (its record may change): the records deflated with it
   * in their dictionary (the descendants stored against it as their keyframe, up to
   * {@link KEYFRAME_SPAN} generations; rows of earlier versions: up to {@link RECORD_ANCESTORS}
   * generations deflated with their ancestors) are stored again alone, so none becomes unreadable.
   */
  releaseDependents(nsId: number, id: string): void {
    // (Rows read before are stored again below: read them again.)
    this.rows.deleteWhere((key) => key.startsWith(`${nsId}\u0000`));
    const children = this.ctx.db.prepare(
      `SELECT c.*, c.ns_id AS ns_id FROM ${T_CHECKPOINTS} c
       WHERE c.ns_id = ? AND c.parent_checkpoint_id IN (SELECT value FROM json_each(?))`,
    );
    let frontier = [id];
    for (let depth = 0; depth < KEYFRAME_SPAN && frontier.length; depth++) {
      const found = children.all(nsId, JSON.stringify(frontier)) as CheckpointRow[];
      frontier = [];
      for (const child of found) {
        const source = recordSource(nsId, child.checkpoint_id);
        const onIt =
          child.zip === ZIP_RECORD_KEYFRAME &&
          readable(() => keyframeHeader(child.checkpoint, source))?.id === id;
        const ancestral = child.zip === ZIP_RECORD_ANCESTORS && depth < RECORD_ANCESTORS;
        // (A record is stored against `id` only when its parent is `id` or is stored against it:
        // past the generations earlier versions' rows reach, the walk follows those only.)
        if (onIt || depth < RECORD_ANCESTORS - 1) frontier.push(child.checkpoint_id);
        if (!onIt && !ancestral) continue;
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
