import {
  type ChannelVersions,
  type Checkpoint,
  type CheckpointMetadata,
  type PendingWrite,
  WRITES_IDX_MAP,
} from "@langchain/langgraph-checkpoint";
import { packed, packWrites } from "./codec.ts";
import type { KnownValue, SaverContext, StoredRecord } from "./context.ts";
import { KIND_APPENDED, KIND_WHOLE } from "./schema.ts";

/**
 * The rows a `put` and a `putWrites` store: changed channels only, a list that only grew as the
 * items it gained (pointing at the parent's version), the record of the checkpoint, a task's
 * writes packed in one row. Each is one statement.
 */

/** A list is stored whole again after this many appends once it gained half its last whole copy. */
const MIN_CHAIN = 16;

/** The columns of linear_blobs rows of one put, one array per column (for `unnest`). */
interface BlobColumns {
  channel: string[];
  version: string[];
  kind: number[];
  base: (string | null)[];
  chain: number[];
  fullItems: number[];
  sinceFull: number[];
  type: string[];
  zip: number[];
  value: Buffer[];
}

/** What a put stores, and the channel values the namespace has after it. */
export interface PreparedPut {
  blobs: BlobColumns;
  record: { type: string; zip: number; data: Buffer };
  /** The checkpoint's values this process now knows (by channel), for the next put's appends. */
  current: Map<string, KnownValue>;
}

/**
 * The rows of a put of `checkpoint` (a copy the caller owns): a row for each channel in
 * `toStore` that has a value, stored as appends when `known` (the parent's values) holds the
 * list it grew from.
 */
export async function preparePut(
  ctx: SaverContext,
  checkpoint: Checkpoint,
  metadata: CheckpointMetadata,
  toStore: ChannelVersions,
  known: Map<string, KnownValue> | undefined,
): Promise<PreparedPut> {
  const current = new Map<string, KnownValue>();
  for (const [channel, entry] of known ?? [])
    if (
      !Object.hasOwn(toStore, channel) &&
      entry.version === String(checkpoint.channel_versions[channel])
    )
      current.set(channel, entry);
  const blobs: BlobColumns = {
    channel: [],
    version: [],
    kind: [],
    base: [],
    chain: [],
    fullItems: [],
    sinceFull: [],
    type: [],
    zip: [],
    value: [],
  };
  for (const [channel, v] of Object.entries(toStore)) {
    // An empty channel gets no row: a version without one reads as empty.
    if (!Object.hasOwn(checkpoint.channel_values, channel)) continue;
    const version = String(v);
    const value = checkpoint.channel_values[channel];
    const before = known?.get(channel);
    let entry: KnownValue = { version, value, chain: 0, fullItems: 0, sinceFull: 0 };
    let stored: unknown = value;
    let kind = KIND_WHOLE;
    let base: string | null = null;
    if (
      before &&
      Array.isArray(value) &&
      Array.isArray(before.value) &&
      value.length >= before.value.length &&
      (before.value as unknown[]).every((item, i) => value[i] === item)
    ) {
      const added = value.slice(before.value.length);
      const sinceFull = before.sinceFull + added.length;
      if (before.chain < MIN_CHAIN || sinceFull < before.fullItems / 2) {
        entry = { version, value, chain: before.chain + 1, fullItems: before.fullItems, sinceFull };
        stored = added;
        kind = KIND_APPENDED;
        base = before.version;
      }
    }
    if (kind === KIND_WHOLE && Array.isArray(value)) entry.fullItems = value.length;
    const [type, bytes] = await ctx.serde.dumpsTyped(stored);
    const { zip, data } = packed(bytes);
    blobs.channel.push(channel);
    blobs.version.push(version);
    blobs.kind.push(kind);
    blobs.base.push(base);
    blobs.chain.push(entry.chain);
    blobs.fullItems.push(entry.fullItems);
    blobs.sinceFull.push(entry.sinceFull);
    blobs.type.push(type);
    blobs.zip.push(zip);
    blobs.value.push(data);
    current.set(channel, entry);
  }
  const { channel_values: _values, id: _id, ...rest } = checkpoint;
  const [type, bytes] = await ctx.serde.dumpsTyped({ c: rest, m: metadata } as StoredRecord);
  return { blobs, record: { type, ...packed(bytes) }, current };
}

/** Stores a prepared put: its value rows and its checkpoint row commit together (one statement). */
export async function storePut(
  ctx: SaverContext,
  at: { thread: string; ns: string; id: string; parentId: string | undefined },
  put: PreparedPut,
): Promise<void> {
  const { blobs, record } = put;
  await ctx.pool.query(
    `WITH blobs AS (
       INSERT INTO ${ctx.t.blobs} (thread_id, checkpoint_ns, channel, version, kind, base_version, chain, full_items, since_full, type, zip, value)
       SELECT $1, $2, * FROM unnest($6::text[], $7::text[], $8::smallint[], $9::text[], $10::int[], $11::int[], $12::int[], $13::text[], $14::smallint[], $15::bytea[])
       ON CONFLICT DO NOTHING
     )
     INSERT INTO ${ctx.t.checkpoints} (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, zip, record)
     VALUES ($1, $2, $3, $4, $5, $16, $17)
     ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE
       SET parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, type = EXCLUDED.type,
           zip = EXCLUDED.zip, record = EXCLUDED.record`,
    [
      at.thread,
      at.ns,
      at.id,
      at.parentId ?? null,
      record.type,
      blobs.channel,
      blobs.version,
      blobs.kind,
      blobs.base,
      blobs.chain,
      blobs.fullItems,
      blobs.sinceFull,
      blobs.type,
      blobs.zip,
      blobs.value,
      record.zip,
      record.data,
    ],
  );
}

/**
 * Stores a task's writes of one `putWrites` call as one row. Reads merge a task's calls (special
 * writes replace, others never overwrite), which spares reading the task's earlier writes here.
 */
export async function storeWrites(
  ctx: SaverContext,
  at: { thread: string; ns: string; id: string },
  writes: PendingWrite[],
  taskId: string,
  taskPath: string,
): Promise<void> {
  const encoded = await Promise.all(
    writes.map(async ([channel, value], i) => {
      const [type, data] = await ctx.serde.dumpsTyped(value);
      return { idx: WRITES_IDX_MAP[channel] ?? i, channel, type, data };
    }),
  );
  const { zip, data } = packed(packWrites(encoded));
  await ctx.pool.query(
    `INSERT INTO ${ctx.t.writes} (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, zip, writes)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [at.thread, at.ns, at.id, taskId, taskPath, zip, data],
  );
}
