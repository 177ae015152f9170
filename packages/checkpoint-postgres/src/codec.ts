import { randomInt } from "node:crypto";
import { deflateRawSync, inflateRawSync } from "node:zlib";
import { corrupt, type RowPlace } from "./corrupt.ts";

/**
 * Values as stored bytes: the bounded deflate every stored value goes through, a task's writes
 * packed in one value, the metadata filter of `list()`, and fork-safe channel versions.
 */

/** A value at least this large is stored deflated (when that is smaller). */
const COMPRESS_ABOVE = 128;
/** The most raw deflate data can inflate to per byte (1032:1), plus slack. */
const DEFLATE_MAX_RATIO = 1032;
/** Stored bytes never inflate past this; a larger value is stored plain. */
export const MAX_INFLATE_BYTES = 64 * 1024 * 1024;

/** `bytes` deflated when that is smaller (zip 1), else plain (zip 0). */
export function packed(bytes: Uint8Array): { zip: number; data: Buffer } {
  const plain = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (plain.length < COMPRESS_ABOVE || plain.length > MAX_INFLATE_BYTES)
    return { zip: 0, data: plain };
  const deflated = deflateRawSync(plain);
  return deflated.length < plain.length ? { zip: 1, data: deflated } : { zip: 0, data: plain };
}

/** Stored bytes as written by `packed`, inflated with a bound; bad data is a CheckpointCorruptError. */
export function unpacked(zip: number, data: Buffer | null, where: RowPlace): Buffer {
  if (!Buffer.isBuffer(data)) throw corrupt(where, "its stored value is missing");
  if (zip === 0) return data;
  if (zip !== 1) throw corrupt(where, `its format ${JSON.stringify(String(zip))} is unknown`);
  const bound = Math.min(MAX_INFLATE_BYTES, data.length * DEFLATE_MAX_RATIO + 64);
  try {
    return inflateRawSync(data, { maxOutputLength: bound });
  } catch (err) {
    const tooLarge = (err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE";
    throw corrupt(
      where,
      tooLarge
        ? `its ${data.length} deflated bytes inflate past ${bound} bytes`
        : "its deflated bytes are not valid deflate data",
    );
  }
}

/** One write of a task: its index, channel, serializer type and bytes. */
export interface PackedWrite {
  idx: number;
  channel: string;
  type: string;
  data: Uint8Array;
}

/** A task's writes as one value: a 4-byte header length, the header (JSON), then the bytes. */
export function packWrites(writes: PackedWrite[]): Buffer {
  const header = Buffer.from(
    JSON.stringify(writes.map((w) => [w.idx, w.channel, w.type, w.data.byteLength])),
  );
  const length = Buffer.alloc(4);
  length.writeUInt32BE(header.length);
  return Buffer.concat([length, header, ...writes.map((w) => w.data)]);
}

/** The writes `packWrites` packed; anything else is a CheckpointCorruptError. */
export function unpackWrites(bytes: Buffer, where: RowPlace): PackedWrite[] {
  const bad = (problem: string) => corrupt(where, problem);
  if (bytes.length < 4) throw bad("its packed writes are cut short");
  const headerLength = bytes.readUInt32BE(0);
  if (4 + headerLength > bytes.length) throw bad("its packed writes are cut short");
  let header: unknown;
  try {
    header = JSON.parse(bytes.subarray(4, 4 + headerLength).toString("utf8"));
  } catch {
    throw bad("its packed writes' header does not parse");
  }
  if (!Array.isArray(header)) throw bad("its packed writes' header is not a list");
  const out: PackedWrite[] = [];
  let at = 4 + headerLength;
  for (const entry of header) {
    if (
      !Array.isArray(entry) ||
      typeof entry[0] !== "number" ||
      typeof entry[1] !== "string" ||
      typeof entry[2] !== "string" ||
      !Number.isInteger(entry[3]) ||
      entry[3] < 0 ||
      at + entry[3] > bytes.length
    )
      throw bad("its packed writes' header does not match its bytes");
    out.push({
      idx: entry[0],
      channel: entry[1],
      type: entry[2],
      data: bytes.subarray(at, at + entry[3]),
    });
    at += entry[3];
  }
  return out;
}

/** Whether `value` contains `pattern` as Postgres's jsonb `@>` decides (list() metadata filters). */
export function jsonContains(value: unknown, pattern: unknown): boolean {
  if (Array.isArray(pattern))
    return Array.isArray(value) && pattern.every((p) => value.some((v) => jsonContains(v, p)));
  if (pattern !== null && typeof pattern === "object") {
    if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
    // (A key whose pattern is undefined is not in the JSON the official saver sends: it matches.)
    return Object.entries(pattern).every(
      ([k, p]) =>
        p === undefined ||
        (Object.hasOwn(value, k) && jsonContains((value as Record<string, unknown>)[k], p)),
    );
  }
  return value === pattern;
}

/**
 * The channel version after `current`: the next integer plus six random decimals. The official
 * savers number versions 1, 2, 3 and store a value per (thread, namespace, channel, version) with
 * ON CONFLICT DO NOTHING, so two forks of one checkpoint would both write version N+1 and the
 * second fork would read the first fork's value; random decimals keep forks apart.
 */
export function forkSafeVersion(current: number | string | undefined): number {
  const base =
    typeof current === "number" ? Math.floor(current) : current ? Math.floor(Number(current)) : 0;
  if (!Number.isFinite(base)) throw new Error(`Cannot continue channel version "${current}"`);
  return base + 1 + randomInt(1, 1_000_000) / 1_000_000;
}
