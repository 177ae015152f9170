import {
  type Checkpoint,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  TASKS,
  maxChannelVersion,
} from "@langchain/langgraph-checkpoint";
import { CheckpointCorruptError, corrupt, rowKey, shown, type RowPlace } from "./corrupt.ts";
import {
  forkSafeVersion,
  jsonContains,
  mergedWrites,
  parsedRecord,
  type TaskCall,
  unpacked,
  unpackWrites,
} from "./codec.ts";
import {
  type BlobRow,
  type CheckpointRow,
  type KnownValue,
  nsKey,
  type SaverContext,
  type StoredRecord,
  valueKey,
} from "./context.ts";
import { KIND_APPENDED, KIND_WHOLE } from "./schema.ts";

/**
 * Reading checkpoints of LinearPostgresSaver's tables: a checkpoint row with its pending writes,
 * its record decoded, and the channel values it names (chains of appends fetched in one recursive
 * query per namespace).
 */

/** Links of a chain of appends read at most (a longer chain is corrupt). */
const MAX_CHAIN = 100_000;

/** The SELECT of checkpoint rows of `ctx` matching `where`, with their pending writes. */
export function selectSql(ctx: SaverContext, where: string): string {
  const w = ctx.t.writes;
  // Pending writes come along, one array per column, in LangGraph's order (task path, task
  // id; each task's calls in order, merged when read).
  const writes = (column: string) =>
    `ARRAY(SELECT ${column} FROM ${w} x WHERE x.thread_id = c.thread_id AND x.checkpoint_ns = c.checkpoint_ns AND x.checkpoint_id = c.checkpoint_id ORDER BY task_path, task_id, call)`;
  return `SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type, c.zip, c.record,
      ${writes("task_id")} AS w_task, ${writes("task_path")} AS w_path,
      ${writes("zip")} AS w_zip, ${writes("writes")} AS w_data
      FROM ${ctx.t.checkpoints} c ${where}`;
}

const records = new WeakMap<CheckpointRow, StoredRecord>();

/** The decoded record of a checkpoint row. */
export async function recordOf(ctx: SaverContext, row: CheckpointRow): Promise<StoredRecord> {
  const cached = records.get(row);
  if (cached) return cached;
  const where = {
    thread: row.thread_id,
    table: "linear_checkpoints",
    row: rowKey({ checkpoint_ns: row.checkpoint_ns, checkpoint_id: row.checkpoint_id }),
  };
  const record = await parsedRecord(ctx, row.type, unpacked(row.zip, row.record, where), where);
  records.set(row, record);
  return record;
}

/** Tuples of rows (their values fetched together); `remember`: seed the append state. */
export async function tuples(
  ctx: SaverContext,
  rows: CheckpointRow[],
  remember: boolean,
): Promise<CheckpointTuple[]> {
  const decoded = await Promise.all(rows.map((r) => recordOf(ctx, r)));
  // The values every row needs, per namespace, fetched in one query each.
  const wanted = new Map<string, { thread: string; ns: string; keys: Map<string, string> }>();
  rows.forEach((row, i) => {
    const key = nsKey(row.thread_id, row.checkpoint_ns);
    let w = wanted.get(key);
    if (!w)
      wanted.set(key, (w = { thread: row.thread_id, ns: row.checkpoint_ns, keys: new Map() }));
    for (const [channel, version] of Object.entries(decoded[i].c.channel_versions))
      w.keys.set(`${channel}\u0000${String(version)}`, channel);
  });
  const resolved = new Map<string, Map<string, KnownValue>>();
  for (const [key, w] of wanted) resolved.set(key, await loadValues(ctx, w.thread, w.ns, w.keys));
  const out: CheckpointTuple[] = [];
  for (const [i, row] of rows.entries()) {
    const record = decoded[i];
    const values = resolved.get(nsKey(row.thread_id, row.checkpoint_ns))!;
    const channelValues: Record<string, unknown> = {};
    const current = new Map<string, KnownValue>();
    for (const [channel, v] of Object.entries(record.c.channel_versions)) {
      const known = values.get(`${channel}\u0000${String(v)}`);
      if (!known) continue;
      current.set(channel, known);
      channelValues[channel] = Array.isArray(known.value) ? known.value.slice() : known.value;
    }
    const checkpoint = {
      ...structuredClone(record.c),
      id: row.checkpoint_id,
      channel_values: channelValues,
    } as Checkpoint;
    if (remember && i === 0)
      ctx.latest.set(nsKey(row.thread_id, row.checkpoint_ns), {
        id: row.checkpoint_id,
        values: current,
      });
    if (checkpoint.v < 4 && row.parent_checkpoint_id)
      await migratePendingSends(ctx, checkpoint, row);
    const at = { thread_id: row.thread_id, checkpoint_ns: row.checkpoint_ns };
    out.push({
      config: { configurable: { ...at, checkpoint_id: row.checkpoint_id } },
      checkpoint,
      metadata: structuredClone(record.m ?? {}) as CheckpointMetadata,
      ...(row.parent_checkpoint_id
        ? { parentConfig: { configurable: { ...at, checkpoint_id: row.parent_checkpoint_id } } }
        : {}),
      pendingWrites: await pendingWrites(ctx, row),
    });
  }
  return out;
}

/**
 * The values at `keys` (channel\0version -> channel) of a namespace: from the cache, else their
 * rows and the rows their chains of appends go through, in one recursive query.
 */
async function loadValues(
  ctx: SaverContext,
  thread: string,
  ns: string,
  keys: Map<string, string>,
): Promise<Map<string, KnownValue>> {
  const out = new Map<string, KnownValue>();
  const missing: string[] = [];
  for (const key of keys.keys()) {
    const [channel, version] = key.split("\u0000");
    const cached = ctx.values.get(valueKey(thread, ns, channel, version));
    if (cached) out.set(key, cached);
    else missing.push(key);
  }
  if (!missing.length) return out;
  const channels = missing.map((k) => k.slice(0, k.indexOf("\u0000")));
  const versions = missing.map((k) => k.slice(k.indexOf("\u0000") + 1));
  const b = ctx.t.blobs;
  const columns =
    "b.channel, b.version, b.kind, b.base_version, b.chain, b.full_items, b.since_full, b.type, b.zip, b.value";
  // UNION (not UNION ALL): a row met twice ends the walk, so a chain pointing back at itself
  // ends too (and is reported below).
  const { rows } = await ctx.pool.query<BlobRow>(
    `WITH RECURSIVE chain AS (
       SELECT ${columns}
       FROM ${b} b JOIN unnest($3::text[], $4::text[]) AS w(channel, version)
         ON b.channel = w.channel AND b.version = w.version
       WHERE b.thread_id = $1 AND b.checkpoint_ns = $2
       UNION
       SELECT ${columns}
       FROM chain c JOIN ${b} b
         ON b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = c.channel AND b.version = c.base_version
       WHERE c.kind = ${KIND_APPENDED}
     ) SELECT * FROM chain`,
    [thread, ns, channels, versions],
  );
  const byKey = new Map(rows.map((r) => [`${r.channel}\u0000${r.version}`, r]));
  for (const key of missing) {
    const value = await resolve(ctx, thread, ns, key, byKey, new Set());
    if (value) out.set(key, value);
  }
  return out;
}

/** The value of row `key` (following its chain of appends); undefined: no row (empty channel). */
async function resolve(
  ctx: SaverContext,
  thread: string,
  ns: string,
  key: string,
  rows: Map<string, BlobRow>,
  seen: Set<string>,
): Promise<KnownValue | undefined> {
  const [channel, version] = key.split("\u0000");
  const cacheKey = valueKey(thread, ns, channel, version);
  const cached = ctx.values.get(cacheKey);
  if (cached) return cached;
  const row = rows.get(key);
  if (!row) return undefined;
  const where: RowPlace = {
    thread,
    table: "linear_blobs",
    row: rowKey({ checkpoint_ns: ns, channel: row.channel, version: row.version }),
  };
  if (seen.has(key) || seen.size > MAX_CHAIN)
    throw corrupt(where, "its chain of appends loops back to itself");
  seen.add(key);
  let decoded: unknown;
  try {
    decoded = await ctx.serde.loadsTyped(row.type, unpacked(row.zip, row.value, where));
  } catch (err) {
    if (CheckpointCorruptError.isInstance(err)) throw err;
    throw corrupt(where, `its ${shown(row.type)} value does not parse`);
  }
  let value: unknown;
  if (row.kind === KIND_WHOLE) value = decoded;
  else if (row.kind === KIND_APPENDED) {
    const base = await resolve(
      ctx,
      thread,
      ns,
      `${row.channel}\u0000${row.base_version}`,
      rows,
      seen,
    );
    if (!base || !Array.isArray(base.value) || !Array.isArray(decoded))
      throw corrupt(where, "its items are appended to a version that is not a stored list");
    value = base.value.concat(decoded);
  } else throw corrupt(where, `its kind ${shown(row.kind)} is unknown`);
  const known: KnownValue = {
    version: row.version,
    value,
    chain: row.chain,
    fullItems: row.full_items,
    sinceFull: row.since_full,
  };
  ctx.values.set(cacheKey, known);
  return known;
}

/** The pending writes of a row: each task's calls merged as putWrites merges them. */
export async function pendingWrites(
  ctx: SaverContext,
  row: Pick<
    CheckpointRow,
    "thread_id" | "checkpoint_ns" | "checkpoint_id" | "w_task" | "w_zip" | "w_data"
  >,
): Promise<CheckpointPendingWrite[]> {
  const where =
    (task: string) =>
    (channel?: string): RowPlace => ({
      thread: row.thread_id,
      table: "linear_writes",
      row: rowKey({
        checkpoint_ns: row.checkpoint_ns,
        checkpoint_id: row.checkpoint_id,
        task_id: task,
        ...(channel === undefined ? {} : { channel }),
      }),
    });
  const calls: TaskCall[] = (row.w_task ?? []).map((task, i) => ({
    task,
    writes: unpackWrites(unpacked(row.w_zip![i], row.w_data![i], where(task)()), where(task)()),
    where: where(task),
  }));
  return mergedWrites(ctx, calls);
}

/** Checkpoints of format v < 4 kept their pending sends in the parent's writes. */
async function migratePendingSends(
  ctx: SaverContext,
  checkpoint: Checkpoint,
  row: CheckpointRow,
): Promise<void> {
  const [parent] = (
    await ctx.pool.query<CheckpointRow>(
      selectSql(ctx, "WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = $3"),
      [row.thread_id, row.checkpoint_ns, row.parent_checkpoint_id],
    )
  ).rows;
  const sends = parent
    ? (await pendingWrites(ctx, parent)).filter(([, c]) => c === TASKS).map(([, , v]) => v)
    : [];
  checkpoint.channel_values ??= {};
  checkpoint.channel_values[TASKS] = sends;
  checkpoint.channel_versions[TASKS] =
    Object.keys(checkpoint.channel_versions).length > 0
      ? maxChannelVersion(...Object.values(checkpoint.channel_versions))
      : forkSafeVersion(undefined);
}

/**
 * list() over the first layout's tables: checkpoints matching `wheres` (conditions on the
 * checkpoint row's columns), newest first, `filter` applied to their metadata, at most `max`.
 */
export async function* listFirstLayout(
  ctx: SaverContext,
  wheres: string[],
  args: unknown[],
  filter: Record<string, unknown> | undefined,
  max: number | undefined,
): AsyncGenerator<CheckpointTuple> {
  const filtered = filter && Object.keys(filter).length > 0;
  let sql = selectSql(
    ctx,
    wheres.length ? `WHERE ${wheres.map((w) => `c.${w}`).join(" AND ")}` : "",
  );
  sql += " ORDER BY c.checkpoint_id DESC";
  if (max !== undefined && !filtered) sql += ` LIMIT ${max}`;
  const { rows } = await ctx.pool.query<CheckpointRow>(sql, args);
  // In batches: values are fetched for a batch at once (their chains shared).
  const BATCH = 64;
  for (let i = 0; i < rows.length; i += BATCH) {
    let batch = rows.slice(i, i + BATCH);
    if (filtered) {
      const kept: CheckpointRow[] = [];
      for (const row of batch)
        if (jsonContains((await recordOf(ctx, row)).m, filter)) kept.push(row);
      batch = kept;
    }
    yield* await tuples(ctx, batch, false);
  }
}
