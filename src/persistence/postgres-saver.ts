import { randomInt } from "node:crypto";
import type { RunnableConfig } from "@langchain/core/runnables";
import type {
  Checkpoint,
  CheckpointListOptions,
  CheckpointTuple,
} from "@langchain/langgraph-checkpoint";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import type pg from "pg";
import {
  checkpointCorrupt,
  CodehopError,
  ErrorCodes,
  quoted,
  type CorruptData,
} from "../errors.ts";

/** The fields a corruption error carries (see checkpointCorrupt). */
type Corrupt = CodehopError & CorruptData;

const isCorrupt = (err: unknown): err is Corrupt =>
  CodehopError.isInstance(err) && err.code === ErrorCodes.CHECKPOINT_CORRUPT && "table" in err;

/** `err`, when it is a corruption error, naming `thread` and, before its row, `rowPrefix`. */
function located(err: unknown, thread: string | undefined, rowPrefix = ""): unknown {
  if (!isCorrupt(err)) return err;
  return checkpointCorrupt({
    thread: err.thread ?? thread,
    table: err.table,
    row: rowPrefix && !err.row.startsWith(rowPrefix) ? `${rowPrefix}, ${err.row}` : err.row,
    problem: err.problem,
  });
}

const text = new TextDecoder();

/**
 * LangGraph's official Postgres checkpointer (@langchain/langgraph-checkpoint-postgres) with two
 * additions codehop needs:
 *
 * - **Fork-safe channel versions.** The official saver keeps a channel's value per
 *   `(thread, namespace, channel, version)` and inserts with ON CONFLICT DO NOTHING, while the
 *   base class numbers versions 1, 2, 3 ...: two forks of one checkpoint (`codehop replay`, an
 *   edited state) both write version N+1 of a channel, and the second fork silently reads the
 *   first fork's value. Versions here are the next integer plus a random fraction (as in
 *   IncrementalSqliteSaver), so forks never share a version.
 * - **Root checkpoint counts** per thread, for thread listings.
 * - **Corrupt rows as codehop errors.** A stored value or write the serializer cannot read is
 *   CODEHOP_CHECKPOINT_CORRUPT naming the thread, table and row, not a JSON parser's message
 *   quoting the stored bytes (other threads read as before).
 *
 * codehop serve's checkpointer is LinearPostgresSaver (postgres-linear-saver.ts) since issue 23:
 * this saver's layout writes a list channel whole at every step (quadratic), which made reads of
 * long threads slow (bench/postgres-saver.bench.ts). It stays to read schemas written in its
 * layout (LinearPostgresSaver reads through it) and for users who want the official layout.
 */
export class CodehopPostgresSaver extends PostgresSaver {
  constructor(
    private readonly connections: pg.Pool,
    private readonly schemaName: string,
  ) {
    super(connections, undefined, { schema: schemaName });
  }

  /** The next integer plus six random decimals (see the class comment). */
  override getNextVersion(current: number | string | undefined): number {
    const base =
      typeof current === "number" ? Math.floor(current) : current ? Math.floor(Number(current)) : 0;
    if (!Number.isFinite(base)) throw new Error(`Cannot continue channel version "${current}"`);
    return base + 1 + randomInt(1, 1_000_000) / 1_000_000;
  }

  /** Root-graph checkpoints per thread (all threads, or one). */
  async rootCheckpointCounts(threadId?: string): Promise<Map<string, number>> {
    const where = threadId === undefined ? "" : "AND thread_id = $1";
    const { rows } = await this.connections.query<{ thread_id: string; n: string }>(
      `SELECT thread_id, count(*) AS n FROM "${this.schemaName}".checkpoints
       WHERE checkpoint_ns = '' ${where} GROUP BY thread_id`,
      threadId === undefined ? [] : [threadId],
    );
    return new Map(rows.map((r) => [r.thread_id, Number(r.n)]));
  }

  override async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    try {
      return await super.getTuple(config);
    } catch (err) {
      throw located(err, config.configurable?.thread_id);
    }
  }

  override async *list(
    config: RunnableConfig,
    options?: CheckpointListOptions,
  ): AsyncGenerator<CheckpointTuple> {
    try {
      yield* super.list(config, options);
    } catch (err) {
      throw located(err, config.configurable?.thread_id);
    }
  }

  protected override async _loadCheckpoint(
    checkpoint: Omit<Checkpoint, "pending_sends" | "channel_values">,
    channelValues: [Uint8Array, Uint8Array, Uint8Array][],
  ): Promise<Checkpoint> {
    const id = (checkpoint as { id?: unknown } | null)?.id;
    const row = `checkpoint_id ${quoted(id)}`;
    if (typeof checkpoint !== "object" || checkpoint === null || typeof id !== "string")
      throw checkpointCorrupt({
        table: "checkpoints",
        row,
        problem: "its checkpoint is not an object with an id",
      });
    try {
      return await super._loadCheckpoint(checkpoint, channelValues);
    } catch (err) {
      throw located(err, undefined, row);
    }
  }

  /** Each channel value decoded on its own, so a bad one is named (table checkpoint_blobs). */
  protected override async _loadBlobs(
    blobValues: [Uint8Array, Uint8Array, Uint8Array][],
  ): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {};
    for (const [k, t, v] of blobValues ?? []) {
      const type = text.decode(t);
      if (type === "empty") continue;
      const channel = text.decode(k);
      out[channel] = await this.decoded(type, v, {
        table: "checkpoint_blobs",
        row: `channel ${quoted(channel)}`,
      });
    }
    return out;
  }

  /** Each pending write decoded on its own, so a bad one is named (table checkpoint_writes). */
  protected override async _loadWrites(
    writes: [Uint8Array, Uint8Array, Uint8Array, Uint8Array][],
  ): Promise<[string, string, unknown][]> {
    const out: [string, string, unknown][] = [];
    for (const [tid, channel, t, v] of writes ?? []) {
      const [task, name] = [text.decode(tid), text.decode(channel)];
      out.push([
        task,
        name,
        await this.decoded(text.decode(t), v, {
          table: "checkpoint_writes",
          row: `task_id ${quoted(task)}, channel ${quoted(name)}`,
        }),
      ]);
    }
    return out;
  }

  /** A stored value through the serializer; one it cannot read is CODEHOP_CHECKPOINT_CORRUPT. */
  private async decoded(
    type: string,
    value: Uint8Array,
    where: { table: string; row: string },
  ): Promise<unknown> {
    try {
      return await this.serde.loadsTyped(type, value);
    } catch {
      throw checkpointCorrupt({ ...where, problem: `its ${quoted(type)} value does not parse` });
    }
  }

  /** The pool is the adapter's (shared with the journal and registry): closing it is theirs. */
  override async end(): Promise<void> {}
}
