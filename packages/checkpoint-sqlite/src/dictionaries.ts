/**
 * Rows deflated with other rows as their dictionary: a task's writes row against the thread's
 * latest rows of earlier checkpoints (they repeat the model reply and the action output written
 * before), and a delta checkpoint record against its nearest ancestors' records. Each such row
 * names its dictionary rows and carries the dictionary's CRC-32, so a dictionary row that changed
 * since is a clear error, never a misread; a row about to change releases its dependents first.
 */
import { crc32, deflateRawSync } from "node:zlib";
import { unpackWrites, type Codec, type Source, type StoredWrite } from "./codec.ts";
import type { SaverContext } from "./context.ts";
import { CheckpointCorruptError, corrupt, decodingSync, shown } from "./corrupt.ts";
import { Lru } from "./lru.ts";
import {
  T_NAMESPACES,
  T_WRITES,
  ZIP_DICTIONARY,
  ZIP_ROWID_DICTIONARY,
  type WritesRow,
} from "./schema.ts";

/** Plain rows of a thread kept in memory as dictionary candidates for the rows after them. */
const DICTIONARY_ROWS = 3;
/** Deflate's window: a dictionary longer than this contributes only its end. */
const DICTIONARY_BYTES = 32 * 1024;
/** A row is stored with a dictionary only when that makes it at most this share of plain deflate. */
const DICTIONARY_GAIN = 0.8;

/** A writes row stored plain (or deflated without a dictionary): usable as a dictionary. */
interface PlainWritesRow {
  nsId: number;
  checkpointId: string;
  taskId: string;
  rowid: number;
  raw: Buffer;
}

/**
 * Header of a writes row of format {@link ZIP_DICTIONARY}: the rows whose raw bytes, concatenated
 * (the last DICTIONARY_BYTES), are the dictionary, and their CRC-32 (a dictionary row that changed
 * since is a clear error, never a silent misread).
 */
interface DictionaryHeader {
  rows: Array<[checkpointId: string, taskId: string]>;
  crc: number;
}

/** The header of a {@link ZIP_ROWID_DICTIONARY} row: its dictionary rows, CRC and data offset. */
function rowidHeader(data: Buffer, source: Source): { rowids: number[]; crc: number; at: number } {
  if (data.length < 5 || data.length < 5 + 6 * data.readUInt8(0))
    corrupt(source.table, source.row(), "its dictionary header is cut short");
  const n = data.readUInt8(0);
  const rowids: number[] = [];
  for (let i = 0; i < n; i++) rowids.push(data.readUIntLE(1 + 6 * i, 6));
  return { rowids, crc: data.readUInt32LE(1 + 6 * n), at: 5 + 6 * n };
}

function dictionaryOf(raws: readonly Buffer[]): Buffer {
  const all = Buffer.concat(raws);
  return all.length > DICTIONARY_BYTES ? all.subarray(all.length - DICTIONARY_BYTES) : all;
}

/** What `read` returns, or undefined when the row it reads is corrupt (other errors are thrown). */
export function readable<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch (err) {
    if (CheckpointCorruptError.isInstance(err)) return undefined;
    throw err;
  }
}

// ------------------------------------------------------------------------------------------
// Checkpoint records against their ancestors' records (zip ZIP_RECORD_ANCESTORS)

/** A record deflated with its ancestors' records (oldest first) as dictionary, with its header. */
export function deflateRecord(raw: Buffer, ancestorsOldestFirst: readonly Buffer[]): Buffer {
  const dictionary = Buffer.concat(ancestorsOldestFirst);
  const packed = deflateRawSync(raw, { dictionary });
  const head = Buffer.alloc(5);
  head.writeUInt8(ancestorsOldestFirst.length, 0);
  head.writeUInt32LE(crc32(dictionary), 1);
  return Buffer.concat([head, packed]);
}

/** How many ancestors' records a record deflated with them needs. */
export function recordAncestorCount(data: Buffer, source: Source): number {
  if (data.length < 5) corrupt(source.table, source.row(), "its dictionary header is cut short");
  return data.readUInt8(0);
}

/** A record deflated with its ancestors' records (oldest first), inflated. */
export function inflateRecord(
  codec: Codec,
  data: Buffer,
  ancestorsOldestFirst: readonly Buffer[],
  source: Source,
): Buffer {
  const dictionary = Buffer.concat(ancestorsOldestFirst);
  if (crc32(dictionary) !== data.readUInt32LE(1))
    corrupt(
      source.table,
      source.row(),
      "it is stored against ancestor records that are not the ones it was deflated with (they changed since, or its header is wrong)",
    );
  return codec.inflate(data.subarray(5), source, dictionary);
}

// ------------------------------------------------------------------------------------------
// Whole records against their keyframe's record (zip ZIP_RECORD_KEYFRAME)

/** The header of a record stored against its keyframe: the keyframe, and where the data starts. */
export interface KeyframeHeader {
  /** How many generations back the keyframe is (1: the parent). */
  depth: number;
  id: string;
  crc: number;
  at: number;
}

/** A record deflated with its keyframe's record as dictionary, with its header. */
export function deflateOnKeyframe(
  raw: Buffer,
  keyframe: { id: string; depth: number; raw: Buffer },
): Buffer | undefined {
  const id = Buffer.from(keyframe.id, "utf8");
  if (id.length > 255 || keyframe.depth > 255) return undefined;
  const head = Buffer.alloc(6 + id.length);
  head.writeUInt8(keyframe.depth, 0);
  head.writeUInt8(id.length, 1);
  id.copy(head, 2);
  head.writeUInt32LE(crc32(keyframe.raw), 2 + id.length);
  return Buffer.concat([head, deflateRawSync(raw, { dictionary: keyframe.raw })]);
}

/** The header of a record stored against its keyframe, checked against the row's length. */
export function keyframeHeader(data: Buffer, source: Source): KeyframeHeader {
  if (data.length < 6 || data.length < 6 + data.readUInt8(1))
    corrupt(source.table, source.row(), "its keyframe header is cut short");
  const length = data.readUInt8(1);
  const depth = data.readUInt8(0);
  if (depth < 1 || length < 1)
    corrupt(source.table, source.row(), "its keyframe header names no earlier record");
  return {
    depth,
    id: data.toString("utf8", 2, 2 + length),
    crc: data.readUInt32LE(2 + length),
    at: 6 + length,
  };
}

/** A record stored against its keyframe, inflated with the keyframe's record bytes. */
export function inflateOnKeyframe(
  codec: Codec,
  data: Buffer,
  header: KeyframeHeader,
  keyframeRaw: Buffer,
  source: Source,
): Buffer {
  if (crc32(keyframeRaw) !== header.crc)
    corrupt(
      source.table,
      source.row(),
      "it is stored against a keyframe record that is not the one it was deflated with (it changed since, or its header is wrong)",
    );
  return codec.inflate(data.subarray(header.at), source, keyframeRaw);
}

/** The key of a writes row, as an error names it. */
export function writesRowKey(nsId: number, row: WritesRow & { checkpoint_id?: string }): string {
  const at = row.checkpoint_id === undefined ? "" : `, checkpoint_id ${shown(row.checkpoint_id)}`;
  return `row_id ${row.row_id ?? "?"} (ns_id ${nsId}${at}, task_id ${shown(row.task_id)})`;
}

// ------------------------------------------------------------------------------------------
// Task writes rows

/**
 * The writes rows of tasks: the ones queued and not written yet, reading a row (inflated, with its
 * dictionary rows when it has some), and choosing how a row is stored.
 */
export class WriteRows {
  /** Task writes not written yet, by namespace id, checkpoint id and task id. */
  readonly pending = new Map<string, StoredWrite[]>();
  /** The latest plain writes rows of each thread written by this process (dictionary candidates). */
  private readonly plainRows = new Lru<string, PlainWritesRow[]>(64);
  /** Raw bytes of writes rows read as dictionaries, by namespace, checkpoint and task id (or `#rowid`). */
  private readonly rawRows = new Lru<string, Buffer>(64);
  /** Dictionaries of format-3 writes rows and their CRC-32, by the rowids that make them. */
  private readonly dictionaries = new Lru<string, { dictionary: Buffer; crc: number }>(16);
  /**
   * The writes rows of checkpoints read ahead in one statement (list() reads many), by namespace
   * id and checkpoint id, in LangGraph's writes order; forgotten when any writes row is stored.
   */
  private readonly ahead = new Map<string, WritesRow[]>();
  /** The writes of rows unpacked, by row object (rows read ahead are read more than once). */
  private readonly unpacked = new WeakMap<WritesRow, StoredWrite[]>();

  constructor(
    private readonly ctx: SaverContext,
    private readonly codec: Codec,
  ) {}

  private source(nsId: number, row: WritesRow & { checkpoint_id?: string }): Source {
    return { table: T_WRITES, row: () => writesRowKey(nsId, row) };
  }

  /** A task's stored writes (sorted by index), or undefined when it has none. */
  taskWrites(nsId: number, checkpointId: string, taskId: string): StoredWrite[] | undefined {
    const queued = this.pending.get(`${nsId}\u0000${checkpointId}\u0000${taskId}`);
    if (queued) return queued;
    const ahead = this.ahead.get(`${nsId}\u0000${checkpointId}`);
    const row = ahead
      ? ahead.find((r) => r.task_id === taskId)
      : (this.ctx.s.getTaskWrites.get(nsId, checkpointId, taskId) as WritesRow | undefined);
    return row ? this.unpackRow(nsId, row) : undefined;
  }

  /** The writes rows of a checkpoint, in LangGraph's writes order (task path, task id). */
  checkpointRows(nsId: number, checkpointId: string): WritesRow[] {
    return (
      this.ahead.get(`${nsId}\u0000${checkpointId}`) ??
      (this.ctx.s.getWrites.all(nsId, checkpointId) as WritesRow[])
    );
  }

  /** Reads the writes rows of these checkpoints of a namespace in one statement (see `ahead`). */
  readAhead(nsId: number, checkpointIds: readonly string[]): void {
    this.ahead.clear();
    if (!checkpointIds.length) return;
    for (const id of checkpointIds) this.ahead.set(`${nsId}\u0000${id}`, []);
    const rows = this.ctx.s.writesOf.all(nsId, JSON.stringify(checkpointIds)) as Array<
      WritesRow & { checkpoint_id: string }
    >;
    for (const row of rows) this.ahead.get(`${nsId}\u0000${row.checkpoint_id}`)!.push(row);
  }

  /** Whether the writes rows of a checkpoint were read ahead. */
  hasAhead(nsId: number, checkpointId: string): boolean {
    return this.ahead.has(`${nsId}\u0000${checkpointId}`);
  }

  /** Forgets the rows read ahead (a writes row is about to change, or the read is over). */
  forgetAhead(): void {
    this.ahead.clear();
  }

  unpackRow(nsId: number, row: WritesRow): StoredWrite[] {
    // (A row read ahead is unpacked once: a list() reads it for the values that refer to it and
    // for its checkpoint's pending writes.)
    const known = this.unpacked.get(row);
    if (known) return known;
    const writes = unpackWrites(this.rawOf(nsId, row), this.source(nsId, row)).sort(
      (a, b) => a.idx - b.idx,
    );
    this.unpacked.set(row, writes);
    return writes;
  }

  /** The rows read ahead for the checkpoints that have some (see `ahead`), by checkpoint id. */
  aheadRows(nsId: number, checkpointIds: readonly string[]): Map<string, WritesRow[]> | undefined {
    const out = new Map<string, WritesRow[]>();
    for (const id of checkpointIds) {
      const rows = this.ahead.get(`${nsId}\u0000${id}`);
      if (!rows) return undefined;
      out.set(id, rows);
    }
    return out;
  }

  /** A writes row's packed bytes: as stored, inflated, or inflated with its dictionary rows. */
  rawOf(nsId: number, row: WritesRow): Buffer {
    const source = this.source(nsId, row);
    if (!Buffer.isBuffer(row.writes))
      corrupt(source.table, source.row(), "its writes are not bytes");
    if (row.zip === 0) return row.writes;
    if (row.zip === ZIP_ROWID_DICTIONARY) {
      const { rowids, crc, at } = rowidHeader(row.writes, source);
      // (Rows of a stretch of steps share their dictionary rows: built and checked once.)
      const key = rowids.join(",");
      const build = () => {
        const dictionary = dictionaryOf(rowids.map((rowid) => this.rawOfRowid(nsId, rowid)));
        const built = { dictionary, crc: crc32(dictionary) };
        this.dictionaries.set(key, built);
        return built;
      };
      let known = this.dictionaries.get(key) ?? build();
      if (known.crc !== crc) {
        // Rows this saver cached may have been rewritten or renumbered by another connection to
        // the file (a deleted thread's row ids reused): read them again before giving up.
        this.forgetRawRows((k) => rowids.some((rowid) => k === `#${rowid}`));
        known = build();
      }
      if (known.crc !== crc)
        corrupt(
          source.table,
          source.row(),
          "its writes are stored against dictionary rows that are not the ones it was deflated with (they changed since, or its header is wrong)",
        );
      return this.codec.inflate(row.writes.subarray(at), source, known.dictionary);
    }
    if (row.zip === 1) return this.codec.inflate(row.writes, source);
    if (row.zip !== ZIP_DICTIONARY)
      corrupt(source.table, source.row(), `its zip format ${row.zip} is unknown`);
    const header = decodingSync(
      source.table,
      source.row,
      "its dictionary header does not parse",
      () => {
        const headerLength = row.writes.readUInt32LE(0);
        const parsed = JSON.parse(
          row.writes.toString("utf8", 4, 4 + headerLength),
        ) as DictionaryHeader;
        const named = (r: unknown) =>
          Array.isArray(r) && typeof r[0] === "string" && typeof r[1] === "string";
        if (
          !Array.isArray(parsed.rows) ||
          !parsed.rows.every(named) ||
          typeof parsed.crc !== "number"
        )
          throw new Error("not a dictionary header");
        return { ...parsed, length: headerLength };
      },
    );
    const raws = header.rows.map(([checkpointId, taskId]) => {
      const key = `${nsId}\u0000${checkpointId}\u0000${taskId}`;
      const cached = this.rawRows.get(key);
      if (cached) return cached;
      const base = this.ctx.s.getTaskWrites.get(nsId, checkpointId, taskId) as
        WritesRow | undefined;
      if (!base || base.zip === ZIP_DICTIONARY || base.zip === ZIP_ROWID_DICTIONARY)
        corrupt(source.table, source.row(), "its writes are stored against a row that is missing");
      const raw = this.rawOf(nsId, base);
      this.rawRows.set(key, raw);
      return raw;
    });
    const dictionary = dictionaryOf(raws);
    if (crc32(dictionary) !== header.crc)
      corrupt(
        source.table,
        source.row(),
        "its writes are stored against dictionary rows that are not the ones it was deflated with (they changed since, or its header is wrong)",
      );
    return this.codec.inflate(row.writes.subarray(4 + header.length), source, dictionary);
  }

  /** Forgets the raw bytes of the writes rows `which` selects (and every dictionary built). */
  forgetRawRows(which: (key: string) => boolean): void {
    this.rawRows.deleteWhere(which);
    this.dictionaries.deleteWhere(() => true);
  }

  /**
   * After a failed commit: the rolled-back rows were offered as dictionaries while the batch was
   * packed (a later row deflated against one of them could never be read), and their rowids are
   * given out again. Forgets every candidate and every raw row.
   */
  forgetAll(): void {
    this.ahead.clear();
    this.plainRows.deleteWhere(() => true);
    this.forgetRawRows(() => true);
  }

  /** Forgets what is known of a deleted thread's rows (its namespaces' ids are `nsIds`). */
  forgetThread(thread: string, nsIds: readonly number[]): void {
    this.ahead.clear();
    for (const nsId of nsIds) this.forgetRawRows((key) => key.startsWith(`${nsId}\u0000`));
    this.plainRows.deleteWhere((key) => key === thread);
    this.forgetRawRows((key) => key.startsWith("#"));
  }

  /** The raw bytes of the writes row `rowid` (a dictionary row: stored without a dictionary). */
  private rawOfRowid(nsId: number, rowid: number): Buffer {
    const key = `#${rowid}`;
    const cached = this.rawRows.get(key);
    if (cached) return cached;
    const base = this.ctx.s.getWritesByRowid.get(rowid) as WritesRow | undefined;
    if (!base || base.zip === ZIP_DICTIONARY || base.zip === ZIP_ROWID_DICTIONARY)
      corrupt(
        T_WRITES,
        `row_id ${rowid}`,
        "it is named as a dictionary row but is missing, or is itself deflated with a dictionary",
      );
    const raw = this.rawOf(nsId, base);
    this.rawRows.set(key, raw);
    return raw;
  }

  /**
   * A task's packed writes as stored: deflated with the thread's latest plain rows of earlier
   * checkpoints (any namespace: a sub-agent's rows repeat what its caller wrote) as dictionary when
   * that is clearly smaller (a step's record repeats much of what the steps before it wrote: the
   * model's reply, the action's output), else deflated (or plain). Only plain rows serve as
   * dictionaries, so a read needs at most the rows named in the header. `candidate` is true when
   * the row is stored without a dictionary (the caller offers it once it has its rowid).
   */
  packForStorage(
    thread: string,
    nsId: number,
    checkpointId: string,
    taskId: string,
    packed: Buffer,
  ): { zip: number; data: Buffer; candidate: boolean } {
    let zip = 0;
    let data = packed;
    // (A row written again replaces what this process knew of it.)
    const plain = (this.plainRows.get(thread) ?? []).filter(
      (r) => !(r.nsId === nsId && r.checkpointId === checkpointId && r.taskId === taskId),
    );
    this.plainRows.set(thread, plain);
    if (this.codec.deflatable(packed.length)) {
      const zipped = deflateRawSync(packed);
      if (zipped.length < packed.length) [zip, data] = [1, zipped];
      const candidates = plain.filter((r) => !(r.nsId === nsId && r.checkpointId === checkpointId));
      if (candidates.length) {
        const dictionary = dictionaryOf(candidates.map((r) => r.raw));
        const header = Buffer.alloc(5 + 6 * candidates.length);
        header.writeUInt8(candidates.length, 0);
        candidates.forEach((r, i) => header.writeUIntLE(r.rowid, 1 + 6 * i, 6));
        header.writeUInt32LE(crc32(dictionary), 1 + 6 * candidates.length);
        const withDictionary = deflateRawSync(packed, { dictionary });
        if (header.length + withDictionary.length < DICTIONARY_GAIN * data.length)
          return {
            zip: ZIP_ROWID_DICTIONARY,
            data: Buffer.concat([header, withDictionary]),
            candidate: false,
          };
      }
    }
    return { zip, data, candidate: true };
  }

  /** Offers a row just stored without a dictionary as a dictionary for the thread's next rows. */
  offerDictionary(thread: string, row: PlainWritesRow): void {
    const plain = this.plainRows.get(thread) ?? [];
    plain.push(row);
    this.plainRows.set(thread, plain.slice(-DICTIONARY_ROWS));
  }

  /**
   * Before the writes row of a task is stored again with other bytes: the rows of its thread that
   * were deflated with it as (part of) their dictionary are stored again without one, so none
   * becomes unreadable (a task's row changes when it adds writes after its first ones).
   */
  releaseDependents(
    thread: string,
    nsId: number,
    checkpointId: string,
    taskId: string,
    packed: Buffer,
  ): void {
    const s = this.ctx.s;
    const old = s.getTaskWritesRow.get(nsId, checkpointId, taskId) as
      (WritesRow & { rowid: number }) | undefined;
    if (!old || old.zip === ZIP_DICTIONARY || old.zip === ZIP_ROWID_DICTIONARY) return;
    if (readable(() => this.rawOf(nsId, old))?.equals(packed)) return;
    const dependents = this.ctx.db
      .prepare(
        `SELECT w.row_id AS rowid, w.row_id, w.ns_id, w.checkpoint_id, w.task_id, w.task_path, w.zip, w.writes FROM ${T_WRITES} w
         JOIN ${T_NAMESPACES} n ON n.ns_id = w.ns_id
         WHERE n.thread_id = ? AND w.zip IN (${ZIP_DICTIONARY}, ${ZIP_ROWID_DICTIONARY})`,
      )
      .all(thread) as Array<WritesRow & { rowid: number; ns_id: number }>;
    for (const d of dependents) {
      const uses = readable(() =>
        d.zip === ZIP_ROWID_DICTIONARY
          ? rowidHeader(d.writes, this.source(d.ns_id, d)).rowids.includes(old.rowid)
          : d.ns_id === nsId &&
            decodingSync(
              T_WRITES,
              this.source(d.ns_id, d).row,
              "its dictionary header does not parse",
              () =>
                (
                  JSON.parse(
                    d.writes.toString("utf8", 4, 4 + d.writes.readUInt32LE(0)),
                  ) as DictionaryHeader
                ).rows.some(([c, t]) => c === checkpointId && t === taskId),
            ),
      );
      if (!uses) continue;
      // (A dependent that cannot be read already is left as it is: the commit goes on.)
      const raw = readable(() => this.rawOf(d.ns_id, d));
      if (!raw) continue;
      const zipped = this.codec.deflatable(raw.length) ? deflateRawSync(raw) : raw;
      const smaller = zipped.length < raw.length;
      s.setWritesZip.run(smaller ? 1 : 0, smaller ? zipped : raw, d.rowid);
    }
    this.forgetRawRows(
      (k) => k === `#${old.rowid}` || k === `${nsId}\u0000${checkpointId}\u0000${taskId}`,
    );
  }
}
