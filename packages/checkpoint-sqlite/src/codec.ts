/**
 * How values are stored as bytes: serialized by LangGraph's serializer and deflated when large; a
 * task's writes packed into one value; small channel values kept inline in checkpoint records.
 */
import { deflateRawSync, inflateRawSync } from "node:zlib";
import {
  type ChannelVersions,
  JsonPlusSerializer,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";

/**
 * Stored bytes as the serializer reads them: JSON as a string (Buffer's UTF-8 decoding is several
 * times faster than the TextDecoder the serializer would use on bytes), other types as bytes.
 */
export function serialized(type: string, raw: Buffer): string | Uint8Array {
  return type === "json"
    ? raw.toString("utf8")
    : new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength);
}

/** JSON punctuation for the batched decode of {@link Codec.decodeWrites}: `[`, `,`, `]`. */
const OPEN = Buffer.of(0x5b);
const COMMA = Buffer.of(0x2c);
const CLOSE = Buffer.of(0x5d);
const EMPTY = Buffer.alloc(0);

/** One stored write of a task: its index, channel and serialized value. */
export interface StoredWrite {
  idx: number;
  channel: string;
  type: string;
  data: Buffer;
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

export function unpackWrites(buf: Buffer): StoredWrite[] {
  const out: StoredWrite[] = [];
  const count = buf.readUInt32LE(0);
  let at = 4;
  for (let i = 0; i < count; i++) {
    const idx = buf.readInt32LE(at);
    const channelLength = buf.readUInt32LE(at + 4);
    const typeLength = buf.readUInt32LE(at + 8);
    const dataLength = buf.readUInt32LE(at + 12);
    at += 16;
    const channel = buf.toString("utf8", at, at + channelLength);
    at += channelLength;
    const type = buf.toString("utf8", at, at + typeLength);
    at += typeLength;
    out.push({ idx, channel, type, data: buf.subarray(at, at + dataLength) });
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

/** The inline values of a stored record, given its versions of the channels and its parent. */
export function fromStoredInline(
  iv: Record<string, StoredInline> | undefined,
  versions: ChannelVersions,
  parentId: string | null,
): Record<string, InlineValue> {
  const out: Record<string, InlineValue> = {};
  for (const [channel, e] of Object.entries(iv ?? {})) {
    const version = String(versions[channel]);
    if (e[0] === 0) out[channel] = [version, 0, e[1]];
    else {
      const checkpoint = e[3] ?? parentId;
      if (typeof checkpoint !== "string")
        throw new Error(
          `IncrementalSqliteSaver: an inline write of "${channel}" has no checkpoint`,
        );
      out[channel] = [version, 1, checkpoint, e[1], e[2]];
    }
  }
  return out;
}

/**
 * JSON values stored in fewer bytes than this (deflated or not) are kept in the checkpoint record
 * (see InlineValue), as text of at most INLINE_RAW_MAX bytes (the record is deflated as a whole).
 */
export const INLINE_BELOW = 128;
export const INLINE_RAW_MAX = 1024;

/** Values through the saver's serializer, deflated when at least `compressAbove` bytes and smaller so. */
export class Codec {
  constructor(
    private readonly serde: () => SerializerProtocol,
    readonly compressAbove: number,
  ) {}

  async encode(value: unknown): Promise<{ type: string; zip: number; data: Buffer }> {
    const [type, bytes] = await this.serde().dumpsTyped(value);
    const raw = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (raw.length >= this.compressAbove) {
      const packed = deflateRawSync(raw);
      if (packed.length < raw.length) return { type, zip: 1, data: packed };
    }
    return { type, zip: 0, data: Buffer.from(raw) };
  }

  async decode(type: string, zip: number, data: Buffer | null): Promise<unknown> {
    if (data === null) return undefined;
    const raw = zip ? inflateRawSync(data) : data;
    return this.serde().loadsTyped(type, serialized(type, raw));
  }

  /**
   * The values of stored writes. With LangGraph's JSON serializer, writes of type "json" are
   * parsed as one JSON array (one call instead of one per write: the same values).
   */
  async decodeWrites(writes: StoredWrite[]): Promise<unknown[]> {
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
      return (await serde.loadsTyped("json", serialized("json", all))) as unknown[];
    }
    return Promise.all(writes.map((w) => this.decode(w.type, 0, w.data)));
  }
}
