import {
  type Checkpoint,
  type CheckpointMetadata,
  type CheckpointTuple,
  TASKS,
  maxChannelVersion,
} from "@langchain/langgraph-checkpoint";
import { corrupt, shown } from "./corrupt.ts";
import { forkSafeVersion, mergedWrites } from "./codec.ts";
import { type KnownValue, nsKey, type SaverContext, valueKey } from "./context.ts";
import { CHECKPOINT_CALL, KIND_WHOLE } from "./schema.ts";
import {
  decodeStep,
  decodeWrites,
  entryKey,
  STEP_COLUMNS,
  type Step,
  type StepRow,
  stepPlace,
  stepRecord,
} from "./step-rows.ts";

/**
 * Reading linear_steps: a checkpoint row, the ancestors its values need (its `reach`: a whole
 * copy and the appends since, values stored a few steps back, the rows its payload is deflated
 * against) and its writes, in one statement; values resolved by walking up from the row.
 */

/** No read walks further up than this (a writer never needs more: see step-writes.ts). */
export const MAX_REACH = 10_000;

/** The rows of one thread and namespace a read fetched, decoded when first needed. */
export class StepSet {
  readonly rows = new Map<string, StepRow>();
  readonly writes = new Map<string, StepRow[]>();
  private readonly decoded = new Map<string, Promise<Step>>();
  /** Values resolved by this set (channel\0version), beside the saver's LRU. */
  private readonly memo = new Map<string, KnownValue>();

  constructor(
    private readonly ctx: SaverContext,
    readonly thread: string,
    readonly ns: string,
  ) {}

  add(row: StepRow): void {
    if (row.call === String(CHECKPOINT_CALL)) this.rows.set(row.checkpoint_id, row);
    else {
      const list = this.writes.get(row.checkpoint_id) ?? [];
      list.push(row);
      this.writes.set(row.checkpoint_id, list);
    }
  }

  /** The decoded checkpoint `id` (undefined: not fetched); its deflate parents first. */
  async step(id: string): Promise<Step | undefined> {
    const done = this.decoded.get(id);
    if (done) return done;
    const row = this.rows.get(id);
    if (!row) return undefined;
    const chain = [row];
    const seen = new Set([id]);
    for (let r = row; r.zip === 2 && r.parent_checkpoint_id;) {
      const parentId = r.parent_checkpoint_id;
      if (this.decoded.has(parentId)) break;
      const parent = this.rows.get(parentId);
      if (!parent) break;
      if (seen.has(parentId)) throw corrupt(stepPlace(r), "its parent chain loops back to itself");
      seen.add(parentId);
      chain.push(parent);
      r = parent;
    }
    for (const r of chain.reverse()) {
      const parentId = r.parent_checkpoint_id;
      const parent = r.zip === 2 && parentId ? await this.decoded.get(parentId) : undefined;
      const decoding = decodeStep(this.ctx, r, parent);
      this.decoded.set(r.checkpoint_id, decoding);
      await decoding;
    }
    return this.decoded.get(id);
  }

  /**
   * The value of `channel` at `version` in checkpoint `start` (undefined: the channel is empty):
   * the nearest row up from it holding that version; appended items on top of the version they
   * were appended to, further up. Rows up to `start`'s reach only.
   */
  async value(start: Step, channel: string, version: string): Promise<KnownValue | undefined> {
    const found: { entry: NonNullable<ReturnType<Step["entries"]["get"]>>; at: Step }[] = [];
    let want = version;
    let base: KnownValue | undefined;
    let at: Step | undefined = start;
    for (let steps = 0; at && steps <= Math.min(start.row.reach, MAX_REACH); steps++) {
      base = this.known(channel, want);
      if (base) break;
      const entry = at.entries.get(entryKey(channel, want));
      if (entry) {
        found.push({ entry, at });
        if (entry.kind === KIND_WHOLE) break;
        want = entry.base!;
      }
      at = at.row.parent_checkpoint_id ? await this.step(at.row.parent_checkpoint_id) : undefined;
    }
    if (!found.length) return base;
    let value = base;
    for (const { entry, at } of found.reverse()) {
      const where = stepPlace(at.row);
      let decoded: unknown;
      try {
        decoded = await this.ctx.serde.loadsTyped(entry.type, entry.bytes);
      } catch {
        throw corrupt(where, `its ${shown(entry.channel)} value does not parse`);
      }
      if (entry.kind !== KIND_WHOLE) {
        if (!value || !Array.isArray(value.value) || !Array.isArray(decoded))
          throw corrupt(
            where,
            `its ${shown(entry.channel)} items are appended to a version that is not a stored list`,
          );
        decoded = value.value.concat(decoded);
      }
      value = {
        version: entry.version,
        value: decoded,
        chain: entry.chain,
        fullItems: entry.fullItems,
        sinceFull: entry.sinceFull,
      };
      this.memo.set(entryKey(channel, entry.version), value);
      this.ctx.values.set(valueKey(this.thread, this.ns, channel, entry.version), value);
    }
    return value;
  }

  private known(channel: string, version: string): KnownValue | undefined {
    return (
      this.memo.get(entryKey(channel, version)) ??
      this.ctx.values.get(valueKey(this.thread, this.ns, channel, version))
    );
  }

  /** Rows back from `start` to the oldest row the value of `channel` at `version` needs. */
  async depth(start: Step, channel: string, version: string): Promise<number> {
    let want = version;
    let deepest = 0;
    let at: Step | undefined = start;
    for (let steps = 0; at && steps <= Math.min(start.row.reach, MAX_REACH); steps++) {
      const entry = at.entries.get(entryKey(channel, want));
      if (entry) {
        deepest = steps;
        if (entry.kind === KIND_WHOLE) break;
        want = entry.base!;
      }
      at = at.row.parent_checkpoint_id ? await this.step(at.row.parent_checkpoint_id) : undefined;
    }
    return deepest;
  }

  /** Checkpoint `id`'s pending writes, in LangGraph's order (task path, task, calls merged). */
  async pendingWrites(id: string) {
    const rows = this.writes.get(id) ?? [];
    if (!rows.length) return [];
    const payload = (await this.step(id))?.payload;
    const calls = rows.map((row) => {
      const place = stepPlace(row, row.call);
      return {
        ...decodeWrites(row, payload),
        where: (channel?: string) =>
          channel === undefined
            ? place
            : { ...place, row: `${place.row}, channel ${shown(channel)}` },
      };
    });
    calls.sort((a, b) =>
      a.path !== b.path
        ? a.path < b.path
          ? -1
          : 1
        : a.task !== b.task
          ? a.task < b.task
            ? -1
            : 1
          : a.call < b.call
            ? -1
            : a.call > b.call
              ? 1
              : 0,
    );
    return mergedWrites(this.ctx, calls);
  }

  /**
   * Checkpoint `id` as a tuple (undefined: not fetched). `remember`: it becomes the namespace's
   * latest known checkpoint (a put of its child stores appends against it).
   */
  async tuple(
    id: string,
    remember: boolean,
    parentWrites: (parentId: string) => Promise<StepSet>,
  ): Promise<CheckpointTuple | undefined> {
    const step = await this.step(id);
    if (!step) return undefined;
    const { row } = step;
    const record = await stepRecord(this.ctx, step);
    const channelValues: Record<string, unknown> = {};
    const current = new Map<string, KnownValue>();
    for (const [channel, v] of Object.entries(record.c.channel_versions)) {
      const known = await this.value(step, channel, String(v));
      if (!known) continue;
      current.set(channel, known);
      channelValues[channel] = Array.isArray(known.value) ? known.value.slice() : known.value;
    }
    const checkpoint = {
      ...structuredClone(record.c),
      id,
      channel_values: channelValues,
    } as Checkpoint;
    if (remember) {
      const depths = new Map<string, number>();
      for (const [channel, known] of current)
        depths.set(channel, await this.depth(step, channel, known.version));
      this.ctx.payloads.set(`${nsKey(this.thread, this.ns)}\u0000${id}`, step.payload);
      const dicts: number[] = [];
      for (let at: Step | undefined = step; at && dicts.length <= row.reach;) {
        dicts.push(at.dictDepth);
        const parentId: string | null = at.row.parent_checkpoint_id;
        at = parentId && this.rows.has(parentId) ? await this.step(parentId) : undefined;
      }
      this.ctx.latest.set(nsKey(this.thread, this.ns), {
        id,
        values: current,
        depths,
        payload: step.payload,
        dicts,
      });
    }
    if (checkpoint.v < 4 && row.parent_checkpoint_id) {
      // Checkpoints of format < 4 kept their pending sends in the parent's writes.
      const parent = row.parent_checkpoint_id;
      const set = this.writes.has(parent) ? this : await parentWrites(parent);
      const sends = (await set.pendingWrites(parent))
        .filter(([, c]) => c === TASKS)
        .map(([, , v]) => v);
      checkpoint.channel_values[TASKS] = sends;
      checkpoint.channel_versions[TASKS] =
        Object.keys(checkpoint.channel_versions).length > 0
          ? maxChannelVersion(...Object.values(checkpoint.channel_versions))
          : forkSafeVersion(undefined);
    }
    const at = { thread_id: this.thread, checkpoint_ns: this.ns };
    return {
      config: { configurable: { ...at, checkpoint_id: id } },
      checkpoint,
      metadata: structuredClone(record.m ?? {}) as CheckpointMetadata,
      ...(row.parent_checkpoint_id
        ? { parentConfig: { configurable: { ...at, checkpoint_id: row.parent_checkpoint_id } } }
        : {}),
      pendingWrites: await this.pendingWrites(id),
    };
  }

  /**
   * Ancestors the fetched checkpoints need that were not fetched: id -> rows still needed above
   * it (for {@link fetchAncestors}).
   */
  missingAncestors(): Map<string, number> {
    const missing = new Map<string, number>();
    for (const row of this.rows.values()) {
      let at = row;
      for (let d = 0; d < Math.min(row.reach, MAX_REACH) && at.parent_checkpoint_id; d++) {
        const parent = this.rows.get(at.parent_checkpoint_id);
        if (!parent) {
          const left = row.reach - d - 1;
          if (left > (missing.get(at.parent_checkpoint_id) ?? -1))
            missing.set(at.parent_checkpoint_id, left);
          break;
        }
        at = parent;
      }
    }
    return missing;
  }
}

/** `STEP_COLUMNS` of table alias `alias`. */
const columnsOf = (alias: string) =>
  STEP_COLUMNS.split(", ")
    .map((col) => `${alias}.${col}`)
    .join(", ");

/**
 * The recursive CTE `up`: checkpoint rows from `start` (a FROM clause naming alias `s` and a
 * column `left_`: the rows still needed above) up their parent chains, `left_` rows each; `n`
 * counts the rows walked (bounded: a crafted chain loops at most MAX_REACH times).
 */
function walkUp(ctx: SaverContext, start: string): string {
  const s = ctx.t.steps;
  return `RECURSIVE up AS (
      SELECT ${columnsOf("s")}, left_, 0 AS n FROM ${start}
      UNION ALL
      SELECT ${columnsOf("p")}, up.left_ - 1, up.n + 1
      FROM up JOIN ${s} p ON p.thread_id = $1 AND p.checkpoint_ns = $2 AND p.call = ${CHECKPOINT_CALL}
        AND p.checkpoint_id = up.parent_checkpoint_id
      WHERE up.left_ > 0 AND up.n < ${MAX_REACH}
    )`;
}

/** The statement reading one checkpoint (by id, or the namespace's latest) with what it needs. */
export function stepSql(ctx: SaverContext, byId: boolean): string {
  const s = ctx.t.steps;
  const pick = byId
    ? "$3::text"
    : `(SELECT checkpoint_id FROM ${s} WHERE thread_id = $1 AND checkpoint_ns = $2 AND call = ${CHECKPOINT_CALL}
       ORDER BY checkpoint_id DESC LIMIT 1)`;
  const start = `(SELECT *, reach AS left_ FROM ${s} WHERE thread_id = $1 AND checkpoint_ns = $2
      AND call = ${CHECKPOINT_CALL} AND checkpoint_id = ${pick}) s`;
  return `WITH ${walkUp(ctx, start)}
    SELECT ${STEP_COLUMNS}, n FROM up
    UNION ALL
    SELECT ${STEP_COLUMNS}, -1 FROM ${s}
    WHERE thread_id = $1 AND checkpoint_ns = $2 AND call > ${CHECKPOINT_CALL}
      AND checkpoint_id = (SELECT checkpoint_id FROM up WHERE n = 0)`;
}

/** Fetches into `set` the ancestors {@link StepSet.missingAncestors} names (one statement). */
export async function fetchAncestors(ctx: SaverContext, set: StepSet): Promise<void> {
  const missing = set.missingAncestors();
  if (!missing.size) return;
  const start = `(SELECT x.*, w.left_ FROM unnest($3::text[], $4::int[]) AS w(id, left_)
      JOIN ${ctx.t.steps} x ON x.thread_id = $1 AND x.checkpoint_ns = $2 AND x.call = ${CHECKPOINT_CALL}
        AND x.checkpoint_id = w.id) s`;
  const { rows } = await ctx.pool.query<StepRow>(
    `WITH ${walkUp(ctx, start)} SELECT DISTINCT ON (checkpoint_id) ${STEP_COLUMNS} FROM up`,
    [set.thread, set.ns, [...missing.keys()], [...missing.values()]],
  );
  for (const row of rows) if (!set.rows.has(row.checkpoint_id)) set.add(row);
}

/** The writes rows of checkpoints `ids` of a namespace, in a set of their own. */
export async function writesOf(
  ctx: SaverContext,
  thread: string,
  ns: string,
  ids: string[],
): Promise<StepSet> {
  const set = new StepSet(ctx, thread, ns);
  const { rows } = await ctx.read<StepRow>(
    `SELECT ${STEP_COLUMNS} FROM ${ctx.t.steps}
     WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = ANY($3) ORDER BY call`,
    [thread, ns, ids],
  );
  for (const row of rows) set.add(row);
  return set;
}
