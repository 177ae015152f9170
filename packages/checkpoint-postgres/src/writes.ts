import type {
  ChannelVersions,
  Checkpoint,
  CheckpointMetadata,
  PendingWrite,
} from "@langchain/langgraph-checkpoint";
import { packed } from "./codec.ts";
import type { KnownValue, Latest, SaverContext, StoredRecord } from "./context.ts";
import { CHECKPOINT_CALL, KIND_APPENDED, KIND_WHOLE } from "./schema.ts";
import { MAX_REACH } from "./step-reads.ts";
import { type Entry, encodeStep, writesPayload } from "./step-rows.ts";

/**
 * The rows a `put` and a `putWrites` store in linear_steps: a checkpoint's row holds its record
 * and the values it changed (a list that only grew as the items it gained, pointing at the
 * parent's version), deflated against its parent's row; a task's writes of one call are a row
 * under the checkpoint's key. Each is one statement.
 */

/** A list is stored whole again after this many appends once it gained half its last whole copy. */
const MIN_CHAIN = 16;
/**
 * A value that did not change is stored again once it is this many rows up (or further than the
 * other values of the checkpoint reach): a read walks a bounded number of rows.
 */
const MIN_REACH = 16;
/** Rows deflated against their parent's in a row, at most (the next one is deflated alone). */
const MAX_DICT_CHAIN = 16;

/** What a put stores, and the state of the namespace after it. */
export interface PreparedStep {
  reach: number;
  zip: number;
  data: Buffer;
  /** The checkpoint as the namespace's latest (its values, depths and payload). */
  latest: Latest;
}

/**
 * The row of a put of `checkpoint` (a copy the caller owns): an entry for each channel in
 * `toStore` that has a value, appends when `parent` (the parent's known state) holds the list it
 * grew from; values of the parent that are too far up are stored again.
 */
export async function prepareStep(
  ctx: SaverContext,
  checkpoint: Checkpoint,
  metadata: CheckpointMetadata,
  toStore: ChannelVersions,
  parent: Latest | undefined,
): Promise<PreparedStep> {
  const values = new Map<string, KnownValue>();
  const depths = new Map<string, number>();
  const parentDepth = (channel: string) => parent?.depths?.get(channel) ?? 0;
  const entries: Omit<Entry, "bytes">[] = [];
  const bytes: Uint8Array[] = [];
  const store = async (
    channel: string,
    entry: KnownValue,
    kind: number,
    base: string | null,
    stored: unknown,
  ) => {
    const [type, data] = await ctx.serde.dumpsTyped(stored);
    entries.push({
      channel,
      version: entry.version,
      kind,
      base,
      type,
      chain: entry.chain,
      fullItems: entry.fullItems,
      sinceFull: entry.sinceFull,
    });
    bytes.push(data);
    values.set(channel, entry);
  };
  const whole = (version: string, value: unknown): KnownValue => ({
    version,
    value,
    chain: 0,
    fullItems: Array.isArray(value) ? value.length : 0,
    sinceFull: 0,
  });
  for (const [channel, v] of Object.entries(toStore)) {
    // An empty channel gets no entry: a version without one reads as empty.
    if (!Object.hasOwn(checkpoint.channel_values, channel)) continue;
    const version = String(v);
    const value = checkpoint.channel_values[channel];
    const before = parent?.values.get(channel);
    if (
      before &&
      Array.isArray(value) &&
      Array.isArray(before.value) &&
      value.length >= before.value.length &&
      (before.value as unknown[]).every((item, i) => value[i] === item) &&
      parentDepth(channel) + 1 < MAX_REACH
    ) {
      const added = value.slice(before.value.length);
      const sinceFull = before.sinceFull + added.length;
      if (before.chain < MIN_CHAIN || sinceFull < before.fullItems / 2) {
        const entry = {
          version,
          value,
          chain: before.chain + 1,
          fullItems: before.fullItems,
          sinceFull,
        };
        await store(channel, entry, KIND_APPENDED, before.version, added);
        depths.set(channel, parentDepth(channel) + 1);
        continue;
      }
    }
    await store(channel, whole(version, value), KIND_WHOLE, null, value);
    depths.set(channel, 0);
  }
  // Deflated against the parent's payload while that chain is short (a read decodes it all).
  const parentDict = parent?.dicts?.[0] ?? 0;
  const dictDepth = parent?.payload && parentDict + 1 <= MAX_DICT_CHAIN ? parentDict + 1 : 0;
  // The values the checkpoint kept from its parent, read from its rows up to a bound.
  const stored = new Set(values.keys());
  const limit = Math.max(MIN_REACH, dictDepth, ...depths.values());
  for (const [channel, known] of parent?.values ?? []) {
    if (stored.has(channel) || Object.hasOwn(toStore, channel)) continue;
    if (known.version !== String(checkpoint.channel_versions[channel])) continue;
    const depth = parentDepth(channel) + 1;
    if (depth <= limit) {
      values.set(channel, known);
      depths.set(channel, depth);
    } else if (Object.hasOwn(checkpoint.channel_values, channel)) {
      await store(channel, whole(known.version, known.value), KIND_WHOLE, null, known.value);
      depths.set(channel, 0);
    }
  }
  const { channel_values: _values, id: _id, ...rest } = checkpoint;
  const [type, record] = await ctx.serde.dumpsTyped({ c: rest, m: metadata } as StoredRecord);
  const payload = encodeStep(type, record, entries, bytes);
  const { zip, data } = packed(payload, dictDepth ? parent?.payload : undefined);
  // A read walks up to the deepest row a value needs and decodes every row on the way: each
  // with the chain of payloads it is deflated against. Along a chain, rows back plus the row's
  // chain length is constant, so the deepest row's chain is the farthest.
  const deepest = Math.max(0, ...depths.values());
  const dicts = [zip === 2 ? dictDepth : 0, ...(parent?.dicts ?? [])];
  const reach = Math.max(dicts[0], deepest + (dicts[deepest] ?? MAX_DICT_CHAIN));
  return {
    reach,
    zip,
    data,
    latest: { id: checkpoint.id, values, depths, payload, dicts: dicts.slice(0, reach + 1) },
  };
}

/** Stores a prepared put: one row (a put of the same checkpoint again replaces it). */
export async function storeStep(
  ctx: SaverContext,
  at: { thread: string; ns: string; id: string; parentId: string | undefined },
  step: PreparedStep,
): Promise<void> {
  await ctx.pool.query(
    `INSERT INTO ${ctx.t.steps} (call, reach, zip, thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, data)
     VALUES (${CHECKPOINT_CALL}, $1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, call) DO UPDATE
       SET reach = EXCLUDED.reach, zip = EXCLUDED.zip,
           parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, data = EXCLUDED.data`,
    [step.reach, step.zip, at.thread, at.ns, at.id, at.parentId ?? null, step.data],
  );
}

/**
 * Stores a task's writes of one `putWrites` call as one row, deflated against its checkpoint's
 * payload when this process has it (`checkpoint`). Its `call` is the time in microseconds (the
 * order of a task's calls; reads merge them: special writes replace, others never overwrite).
 */
export async function storeStepWrites(
  ctx: SaverContext,
  at: { thread: string; ns: string; id: string },
  writes: PendingWrite[],
  taskId: string,
  taskPath: string,
  checkpoint: Buffer | undefined,
): Promise<void> {
  const { zip, data } = packed(await writesPayload(ctx, writes, taskId, taskPath), checkpoint);
  // Two calls in one microsecond: the second takes the next free number.
  await ctx.pool.query(
    `INSERT INTO ${ctx.t.steps} (call, reach, zip, thread_id, checkpoint_ns, checkpoint_id, data)
     SELECT greatest((extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
                     coalesce(max(call), 0) + 1), 0, $1, $2, $3, $4, $5
     FROM ${ctx.t.steps} WHERE thread_id = $2 AND checkpoint_ns = $3 AND checkpoint_id = $4`,
    [zip, at.thread, at.ns, at.id, data],
  );
}
