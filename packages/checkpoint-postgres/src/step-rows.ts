import { type PendingWrite, WRITES_IDX_MAP } from "@langchain/langgraph-checkpoint";
import { corrupt, rowKey, type RowPlace } from "./corrupt.ts";
import { type PackedWrite, packParts, parsedRecord, unpacked, unpackParts } from "./codec.ts";
import type { SaverContext, StoredRecord } from "./context.ts";
import { CHECKPOINT_CALL, KIND_APPENDED, KIND_WHOLE } from "./schema.ts";

/**
 * The rows of `linear_steps` and their payloads. A checkpoint row's payload is its record (the
 * checkpoint without values nor id, and its metadata) and an entry per channel value stored with
 * it (a whole value, or the items a list gained since `base`); a writes row's payload is one
 * putWrites call of a task. Payloads are deflated, a checkpoint's against its parent's payload and
 * a writes row's against its checkpoint's (zip 2) when that is smaller.
 */

/** A row of linear_steps as read (`call` is a bigint: a string). */
export interface StepRow {
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  call: string;
  parent_checkpoint_id: string | null;
  reach: number;
  zip: number;
  data: Buffer;
}

/** The columns a read selects, in the table's order. */
export const STEP_COLUMNS =
  "call, reach, zip, thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, data";

/** A channel value stored in a checkpoint row. */
export interface Entry {
  channel: string;
  version: string;
  kind: number;
  /** The version the items were appended to (KIND_APPENDED). */
  base: string | null;
  type: string;
  /** Appends since the last whole copy, that copy's item count, items appended since it. */
  chain: number;
  fullItems: number;
  sinceFull: number;
  bytes: Buffer;
}

/** A checkpoint row decoded. */
export interface Step {
  row: StepRow;
  /** Its payload, inflated (what its children and its writes are deflated against). */
  payload: Buffer;
  recordType: string;
  recordBytes: Buffer;
  /** Its record, once parsed (see {@link stepRecord}). */
  record?: StoredRecord;
  /** Its entries by `channel\0version`. */
  entries: Map<string, Entry>;
  /** How many rows back its payload's chain of deflate dictionaries goes. */
  dictDepth: number;
}

/** The key of an entry in {@link Step.entries}. */
export const entryKey = (channel: string, version: string) => `${channel}\u0000${version}`;

/** Where a row of linear_steps is, for corruption errors. */
export function stepPlace(
  row: Pick<StepRow, "thread_id" | "checkpoint_ns" | "checkpoint_id">,
  call?: string,
): RowPlace {
  return {
    thread: row.thread_id,
    table: "linear_steps",
    row: rowKey({
      checkpoint_ns: row.checkpoint_ns,
      checkpoint_id: row.checkpoint_id,
      ...(call === undefined || call === String(CHECKPOINT_CALL) ? {} : { call }),
    }),
  };
}

/** A checkpoint row's payload. */
export function encodeStep(
  recordType: string,
  record: Uint8Array,
  entries: Omit<Entry, "bytes">[],
  bytes: Uint8Array[],
): Buffer {
  return packParts(
    [
      recordType,
      entries.map((e) => [
        e.channel,
        e.version,
        e.kind,
        e.base,
        e.type,
        e.chain,
        e.fullItems,
        e.sinceFull,
      ]),
    ],
    [record, ...bytes],
  );
}

/** A checkpoint row decoded (`parentPayload`: its parent's, when it is deflated against it). */
export async function decodeStep(
  ctx: SaverContext,
  row: StepRow,
  parent: Step | undefined,
): Promise<Step> {
  const where = stepPlace(row);
  const payload = unpacked(row.zip, row.data, where, parent?.payload);
  const { header, parts } = unpackParts(payload, where);
  const [recordType, metas] = header as [unknown, unknown];
  if (typeof recordType !== "string" || !Array.isArray(metas) || parts.length !== metas.length + 1)
    throw corrupt(where, "its payload does not match its header");
  const entries = new Map<string, Entry>();
  metas.forEach((m: unknown, i) => {
    const [channel, version, kind, base, type, chain, fullItems, sinceFull] = Array.isArray(m)
      ? m
      : [];
    if (
      typeof channel !== "string" ||
      typeof version !== "string" ||
      (kind !== KIND_WHOLE && kind !== KIND_APPENDED) ||
      (kind === KIND_APPENDED && typeof base !== "string") ||
      typeof type !== "string" ||
      ![chain, fullItems, sinceFull].every(Number.isInteger)
    )
      throw corrupt(where, `its value entry ${i} is not a value entry`);
    entries.set(entryKey(channel, version), {
      channel,
      version,
      kind,
      base: kind === KIND_APPENDED ? base : null,
      type,
      chain,
      fullItems,
      sinceFull,
      bytes: parts[i + 1],
    });
  });
  const dictDepth = row.zip === 2 ? (parent?.dictDepth ?? 0) + 1 : 0;
  return { row, payload, recordType, recordBytes: parts[0], entries, dictDepth };
}

/** The record of a decoded checkpoint row (parsed once: a read walks rows whose records it never needs). */
export async function stepRecord(ctx: SaverContext, step: Step): Promise<StoredRecord> {
  if (step.record) return step.record;
  const record = await parsedRecord(ctx, step.recordType, step.recordBytes, stepPlace(step.row));
  step.record = record;
  return record;
}

/** A task's writes of one putWrites call, as a row's payload. */
export async function writesPayload(
  ctx: SaverContext,
  writes: PendingWrite[],
  taskId: string,
  taskPath: string,
): Promise<Buffer> {
  const encoded = await Promise.all(
    writes.map(async ([channel, value], i) => {
      const [type, data] = await ctx.serde.dumpsTyped(value);
      return { idx: WRITES_IDX_MAP[channel] ?? i, channel, type, data };
    }),
  );
  return packParts(
    [taskId, taskPath, encoded.map((w) => [w.idx, w.channel, w.type])],
    encoded.map((w) => w.data),
  );
}

/** A writes row decoded: its task, task path and writes (`checkpoint`: the payload it may be deflated against). */
export function decodeWrites(
  row: StepRow,
  checkpoint: Buffer | undefined,
): { task: string; path: string; call: bigint; writes: PackedWrite[] } {
  const where = stepPlace(row, row.call);
  const { header, parts } = unpackParts(unpacked(row.zip, row.data, where, checkpoint), where);
  const [task, path, metas] = header as [unknown, unknown, unknown];
  if (
    typeof task !== "string" ||
    typeof path !== "string" ||
    !Array.isArray(metas) ||
    metas.length !== parts.length
  )
    throw corrupt(where, "its packed writes' header does not match its bytes");
  const writes = metas.map((m: unknown, i): PackedWrite => {
    const [idx, channel, type] = Array.isArray(m) ? m : [];
    if (typeof idx !== "number" || typeof channel !== "string" || typeof type !== "string")
      throw corrupt(where, "its packed writes' header does not match its bytes");
    return { idx, channel, type, data: parts[i] };
  });
  return { task, path, call: BigInt(row.call), writes };
}
