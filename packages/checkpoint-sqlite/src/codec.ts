/**
 * How values are stored as bytes: serialized by LangGraph's serializer and deflated when large; a
 * task's writes packed into one value; small channel values kept inline in checkpoint records.
 */
import { crc32, deflateRawSync } from "node:zlib";
import {
  type ChannelVersions,
  JsonPlusSerializer,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import { CheckpointCorruptError, corrupt, decoding, inflateBounded, shown } from "./corrupt.ts";
import { Lru } from "./lru.ts";

/** Where stored bytes come from: a table and its row's key (computed only for an error message). */
export interface Source {
  table: string;
  row: () => string;
}

/**
 * Stored bytes as the serializer reads them: JSON as a string (Buffer's UTF-8 decoding is several
 * times faster than the TextDecoder the serializer would use on bytes), other types as bytes.
 */
export function serialized(type: string, raw: Buffer): string | Uint8Array {
  return type === "json"
    ? raw.toString("utf8")
    : new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength);
}

/**
 * Whether `serde` reads JSON exactly as LangGraph's JsonPlusSerializer does (the saver's default):
 * then JSON text with no revivable record in it parses with JSON.parse alone (see {@link load}).
 */
function isPlainJsonPlus(serde: SerializerProtocol): serde is JsonPlusSerializer {
  const s = serde as JsonPlusSerializer & { _loads?: unknown };
  return (
    s instanceof JsonPlusSerializer &&
    s.loadsTyped === JsonPlusSerializer.prototype.loadsTyped &&
    s._loads === (JsonPlusSerializer.prototype as unknown as { _loads: unknown })._loads
  );
}

/**
 * Stored bytes parsed by the serializer. With JsonPlusSerializer, JSON whose text has no `"lc"`
 * key nor string (what marks the records its reviver turns into messages, Sets, undefined...), no
 * `\u` escape (a key spelled with one) and no `__proto__` key parses with JSON.parse alone: the
 * reviver would return the same values, after awaiting a promise per value (9x JSON.parse's time
 * on a 100 KB list of strings; a fresh read of a long thread is mostly that).
 */
export function load(serde: SerializerProtocol, type: string, raw: Buffer | string): unknown {
  if (type === "json" && isPlainJsonPlus(serde)) {
    const text = typeof raw === "string" ? raw : raw.toString("utf8");
    if (!text.includes('"lc"') && !text.includes("\\u") && !text.includes('"__proto__"'))
      return JSON.parse(text);
    return serde.loadsTyped(type, text);
  }
  return serde.loadsTyped(type, typeof raw === "string" ? raw : serialized(type, raw));
}

/** JSON punctuation for the batched decode of {@link Codec.decodeWrites}: `[`, `,`, `]`. */
const OPEN = Buffer.of(0x5b);
const COMMA = Buffer.of(0x2c);
const CLOSE = Buffer.of(0x5d);
const EMPTY = Buffer.alloc(0);

/** One stored write of a task: its index, channel and serialized value (and its row, once read). */
export interface StoredWrite {
  idx: number;
  channel: string;
  type: string;
  data: Buffer;
  source?: Source;
}

/**
 * A task's writes in one row: count, then per write its index, channel, type and bytes (lengths as
 * unsigned 32-bit ints). One row per task instead of per write keeps the keys out of the table
 * (LangGraph writes a handful of channels per task) and lets deflate work across the values.
 */
export function packWrites(writes: readonly StoredWrite[]): Buffer {
  const parts: Buffer[] = [];
  const head = Buffer.alloc(4);
  head.writeUInt32LE(writes.length);
  parts.push(head);
  for (const w of writes) {
    const channel = Buffer.from(w.channel, "utf8");
    const type = Buffer.from(w.type, "utf8");
    const meta = Buffer.alloc(16);
    meta.writeInt32LE(w.idx, 0);
    meta.writeUInt32LE(channel.length, 4);
    meta.writeUInt32LE(type.length, 8);
    meta.writeUInt32LE(w.data.length, 12);
    parts.push(meta, channel, type, w.data);
  }
  return Buffer.concat(parts);
}

/** A task's packed writes (see {@link packWrites}); every length is checked against the bytes. */
export function unpackWrites(buf: Buffer, source: Source): StoredWrite[] {
  const bad = (what: string) => corrupt(source.table, source.row(), `its packed writes ${what}`);
  if (buf.length < 4) bad("are shorter than their header");
  const out: StoredWrite[] = [];
  const count = buf.readUInt32LE(0);
  // (Each write takes at least its 16 bytes of lengths: a count past that is not a count.)
  if (count > (buf.length - 4) / 16) bad(`claim ${count} writes in ${buf.length} bytes`);
  let at = 4;
  for (let i = 0; i < count; i++) {
    if (at + 16 > buf.length) bad(`end inside write ${i}`);
    const idx = buf.readInt32LE(at);
    const channelLength = buf.readUInt32LE(at + 4);
    const typeLength = buf.readUInt32LE(at + 8);
    const dataLength = buf.readUInt32LE(at + 12);
    at += 16;
    if (at + channelLength + typeLength + dataLength > buf.length)
      bad(`give write ${i} more bytes than they hold`);
    const channel = buf.toString("utf8", at, at + channelLength);
    at += channelLength;
    const type = buf.toString("utf8", at, at + typeLength);
    at += typeLength;
    out.push({ idx, channel, type, data: buf.subarray(at, at + dataLength), source });
    at += dataLength;
  }
  return out;
}

/** A task write as stored by putWrites, kept in memory to spot channel values that are writes. */
export interface CachedWrite {
  taskPath: string;
  taskId: string;
  idx: number;
  channel: string;
  value: unknown;
}

/** The same order as LangGraph's writesSortKey: task path, task id, index. */
export function compareWrites(a: CachedWrite, b: CachedWrite): number {
  if (a.taskPath !== b.taskPath) return a.taskPath < b.taskPath ? -1 : 1;
  if (a.taskId !== b.taskId) return a.taskId < b.taskId ? -1 : 1;
  return a.idx - b.idx;
}

/** A reference to a stored write: task id, index, and 1 when its value (a list) is spread. */
export type WriteRef = [taskId: string, idx: number, spread: 0 | 1];

/**
 * A small channel value kept in the checkpoint record instead of a blob row of its own (a row costs
 * ~40 bytes of keys and columns; the record is deflated with its neighbours): `[version, 0, JSON
 * text]`, or `[version, 1, checkpoint id, task id, index]` for the value one task of that checkpoint
 * wrote.
 */
export type InlineValue = [string, 0, string] | [string, 1, string, string, number];

/**
 * An inline value as a record stores it (key `iv`, by channel): without its version (the record's
 * version of the channel) and, for a write of the record's parent, without the checkpoint id.
 */
export type StoredInline = [0, string] | [1, string, number] | [1, string, number, string];

export function toStoredInline(entry: InlineValue, parentId: string | undefined): StoredInline {
  if (entry[1] === 0) return [0, entry[2]];
  return entry[2] === parentId ? [1, entry[3], entry[4]] : [1, entry[3], entry[4], entry[2]];
}

/**
 * The inline values of a stored record, given its versions of the channels and its parent (`source`:
 * the record's row, named by the error a malformed entry raises).
 */
export function fromStoredInline(
  iv: Record<string, StoredInline> | undefined,
  versions: ChannelVersions,
  parentId: string | null,
  source: Source,
): Record<string, InlineValue> {
  const out: Record<string, InlineValue> = {};
  if (iv !== undefined && (typeof iv !== "object" || iv === null))
    corrupt(source.table, source.row(), "its inline values are not an object");
  for (const [channel, e] of Object.entries(iv ?? {})) {
    const version = String(versions[channel]);
    if (Array.isArray(e) && e[0] === 0 && typeof e[1] === "string")
      out[channel] = [version, 0, e[1]];
    else if (
      Array.isArray(e) &&
      e[0] === 1 &&
      typeof e[1] === "string" &&
      typeof e[2] === "number"
    ) {
      const checkpoint = e[3] ?? parentId;
      if (typeof checkpoint !== "string")
        corrupt(
          source.table,
          source.row(),
          `its inline write of ${shown(channel)} has no checkpoint`,
        );
      out[channel] = [version, 1, checkpoint, e[1], e[2]];
    } else
      corrupt(source.table, source.row(), `its inline value of ${shown(channel)} is malformed`);
  }
  return out;
}

/**
 * JSON values stored in fewer bytes than this (deflated or not) are kept in the checkpoint record
 * (see InlineValue), as text of at most INLINE_RAW_MAX bytes (the record is deflated as a whole).
 */
export const INLINE_BELOW = 128;
export const INLINE_RAW_MAX = 1024;

/** Stored bytes whose inflating failed, remembered by content (a bomb costs its bound once). */
const FAILED_INFLATES = 64;

/**
 * Values through the saver's serializer, deflated when at least `compressAbove` bytes (and at most
 * `maxInflateBytes`: a larger value is stored plain, so reading it never needs more than the
 * bound) and smaller so; stored bytes read back with bounded work, every failure a
 * {@link CheckpointCorruptError}.
 */
export class Codec {
  /**
   * Failed inflates by stored length, then row and CRC-32 of the bytes and dictionary (only bytes
   * of a length that failed before are hashed: a good read pays nothing for this).
   */
  private readonly failed = new Lru<number, Map<string, CheckpointCorruptError>>(FAILED_INFLATES);

  constructor(
    private readonly serde: () => SerializerProtocol,
    readonly compressAbove: number,
    readonly maxInflateBytes: number,
  ) {}

  /** Whether raw bytes of this length are stored deflated (when that is smaller). */
  deflatable(length: number): boolean {
    return length >= this.compressAbove && length <= this.maxInflateBytes;
  }

  /** Stored deflate data inflated, bounded (see `inflateBounded`); a failure is remembered. */
  inflate(data: Buffer, source: Source, dictionary?: Buffer): Buffer {
    const sameLength = this.failed.get(data.length);
    const key = () =>
      `${source.table}\u0000${source.row()}\u0000${crc32(data)}\u0000${dictionary ? crc32(dictionary) : ""}`;
    const known = sameLength?.get(key());
    if (known) throw known;
    try {
      return inflateBounded(data, this.maxInflateBytes, source, dictionary);
    } catch (err) {
      if (CheckpointCorruptError.isInstance(err))
        this.failed.set(data.length, (sameLength ?? new Map()).set(key(), err));
      throw err;
    }
  }

  async encode(value: unknown): Promise<{ type: string; zip: number; data: Buffer }> {
    const [type, bytes] = await this.serde().dumpsTyped(value);
    const raw = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (this.deflatable(raw.length)) {
      const packed = deflateRawSync(raw);
      if (packed.length < raw.length) return { type, zip: 1, data: packed };
    }
    return { type, zip: 0, data: Buffer.from(raw) };
  }

  /** A stored value: inflated when `zip` is 1, then parsed by the serializer. */
  async decode(type: string, zip: number, data: Buffer | null, source: Source): Promise<unknown> {
    if (data === null) return undefined;
    if (zip !== 0 && zip !== 1)
      corrupt(source.table, source.row(), `its zip format ${zip} is unknown`);
    const raw = zip ? this.inflate(data, source) : data;
    return decoding(source.table, source.row, `its ${shown(type)} value does not parse`, () =>
      load(this.serde(), type, raw),
    );
  }

  /** A JSON value stored as text (an inline value of a record), parsed by the serializer. */
  async decodeText(text: string, source: Source): Promise<unknown> {
    return decoding(source.table, source.row, `its "json" value does not parse`, () =>
      load(this.serde(), "json", text),
    );
  }

  /**
   * The values of stored writes. With LangGraph's JSON serializer, writes of type "json" are
   * parsed as one JSON array (one call instead of one per write: the same values); when that
   * fails, one by one, so the error names the write's row.
   */
  async decodeWrites(writes: StoredWrite[], fallback: Source): Promise<unknown[]> {
    const serde = this.serde();
    if (
      writes.length > 1 &&
      serde instanceof JsonPlusSerializer &&
      writes.every((w) => w.type === "json" && w.data.length > 0)
    ) {
      const parts: Buffer[] = [OPEN];
      for (const [i, w] of writes.entries()) parts.push(i ? COMMA : EMPTY, w.data);
      parts.push(CLOSE);
      const all = Buffer.concat(parts);
      try {
        const values = (await load(serde, "json", all)) as unknown[];
        if (Array.isArray(values) && values.length === writes.length) return values;
      } catch {
        // One of them is bad (or bytes of two of them made one value): find which, below.
      }
    }
    return Promise.all(writes.map((w) => this.decode(w.type, 0, w.data, w.source ?? fallback)));
  }
}
