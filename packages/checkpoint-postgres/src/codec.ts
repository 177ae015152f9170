import { randomInt } from "node:crypto";
import { deflateRawSync, inflateRawSync } from "node:zlib";
import { type CheckpointPendingWrite, WRITES_IDX_MAP } from "@langchain/langgraph-checkpoint";
import { corrupt, type RowPlace, shown } from "./corrupt.ts";
import type { SaverContext, StoredRecord } from "./context.ts";

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

/** Deflate's window: only this much of a preset dictionary's end is used. */
const WINDOW = 32 * 1024;

/**
 * `bytes` deflated when that is smaller (zip 1), else plain (zip 0). With `dictionary` (bytes the
 * reader has too: the parent checkpoint's payload) it is deflated against them (zip 2) when that
 * is smaller still: a step repeats most of what its parent held (the same keys, versions, similar
 * records), which deflate then stores as references.
 */
export function packed(bytes: Uint8Array, dictionary?: Buffer): { zip: number; data: Buffer } {
  const plain = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (plain.length > MAX_INFLATE_BYTES) return { zip: 0, data: plain };
  let best = { zip: 0, data: plain };
  if (dictionary?.length) {
    const against = deflateRawSync(plain, { dictionary: dictionary.subarray(-WINDOW) });
    if (against.length < best.data.length) best = { zip: 2, data: against };
  }
  if (plain.length >= COMPRESS_ABOVE) {
    const deflated = deflateRawSync(plain);
    if (deflated.length < best.data.length) best = { zip: 1, data: deflated };
  }
  return best;
}

/**
 * Stored bytes as written by `packed` (zip 2 needs the same `dictionary`), inflated with a bound;
 * bad data is a CheckpointCorruptError.
 */
export function unpacked(
  zip: number,
  data: Buffer | null,
  where: RowPlace,
  dictionary?: Buffer,
): Buffer {
  if (!Buffer.isBuffer(data)) throw corrupt(where, "its stored value is missing");
  if (zip === 0) return data;
  if (zip !== 1 && zip !== 2)
    throw corrupt(where, `its format ${JSON.stringify(String(zip))} is unknown`);
  if (zip === 2 && !dictionary)
    throw corrupt(where, "it is deflated against a row that is not stored");
  const bound = Math.min(MAX_INFLATE_BYTES, data.length * DEFLATE_MAX_RATIO + 64);
  try {
    return inflateRawSync(data, {
      maxOutputLength: bound,
      ...(zip === 2 ? { dictionary: dictionary!.subarray(-WINDOW) } : {}),
    });
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

/**
 * A header (JSON, holding what the parts are) and binary parts as one value: a 4-byte header
 * length, the header, then the parts, whose lengths the header lists last.
 */
export function packParts(header: unknown[], parts: Uint8Array[]): Buffer {
  const json = Buffer.from(JSON.stringify([...header, parts.map((p) => p.byteLength)]));
  const length = Buffer.alloc(4);
  length.writeUInt32BE(json.length);
  return Buffer.concat([length, json, ...parts]);
}

/** The header and parts `packParts` packed; anything else is a CheckpointCorruptError. */
export function unpackParts(
  bytes: Buffer,
  where: RowPlace,
): { header: unknown[]; parts: Buffer[] } {
  const bad = () => corrupt(where, "its payload does not match its header");
  if (bytes.length < 4) throw bad();
  const length = bytes.readUInt32BE(0);
  if (4 + length > bytes.length) throw bad();
  let header: unknown;
  try {
    header = JSON.parse(bytes.subarray(4, 4 + length).toString("utf8"));
  } catch {
    throw bad();
  }
  const lengths = Array.isArray(header) ? header.at(-1) : undefined;
  if (!Array.isArray(lengths)) throw bad();
  const parts: Buffer[] = [];
  let at = 4 + length;
  for (const n of lengths) {
    if (!Number.isInteger(n) || n < 0 || at + n > bytes.length) throw bad();
    parts.push(bytes.subarray(at, at + n));
    at += n;
  }
  return { header: (header as unknown[]).slice(0, -1), parts };
}

/** A stored checkpoint record parsed (`bytes` of serializer type `type`), or a CheckpointCorruptError. */
export async function parsedRecord(
  ctx: SaverContext,
  type: string,
  bytes: Uint8Array,
  where: RowPlace,
): Promise<StoredRecord> {
  let record: StoredRecord;
  try {
    record = (await ctx.serde.loadsTyped(type, bytes)) as StoredRecord;
  } catch {
    throw corrupt(where, "its checkpoint does not parse");
  }
  if (
    typeof record !== "object" ||
    record === null ||
    typeof record.c !== "object" ||
    record.c === null ||
    typeof record.c.v !== "number" ||
    typeof record.c.channel_versions !== "object" ||
    record.c.channel_versions === null
  )
    throw corrupt(where, "its checkpoint is not a checkpoint record");
  return record;
}

/** One putWrites call of a task as stored, and where (for corruption errors). */
export interface TaskCall {
  task: string;
  writes: PackedWrite[];
  where: (channel?: string) => RowPlace;
}

/**
 * A checkpoint's pending writes from its tasks' putWrites calls (sorted by task path, task and
 * call): each task's calls merged as putWrites merges them (special writes replace, others never
 * overwrite), each task's writes by index.
 */
export async function mergedWrites(
  ctx: SaverContext,
  calls: TaskCall[],
): Promise<CheckpointPendingWrite[]> {
  const out: CheckpointPendingWrite[] = [];
  let i = 0;
  while (i < calls.length) {
    const task = calls[i].task;
    const byIdx = new Map<number, { w: PackedWrite; call: TaskCall }>();
    for (; i < calls.length && calls[i].task === task; i++) {
      const { writes } = calls[i];
      const replace = writes.every((w) => w.channel in WRITES_IDX_MAP);
      for (const w of writes)
        if (replace || !byIdx.has(w.idx)) byIdx.set(w.idx, { w, call: calls[i] });
    }
    for (const { w, call } of [...byIdx.values()].sort((a, b) => a.w.idx - b.w.idx)) {
      let value: unknown;
      try {
        value = await ctx.serde.loadsTyped(w.type, w.data);
      } catch {
        throw corrupt(call.where(w.channel), `its ${shown(w.type)} value does not parse`);
      }
      out.push([task, w.channel, value]);
    }
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
