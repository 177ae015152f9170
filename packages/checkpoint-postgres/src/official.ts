import type { RunnableConfig } from "@langchain/core/runnables";
import type {
  Checkpoint,
  CheckpointListOptions,
  CheckpointTuple,
} from "@langchain/langgraph-checkpoint";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import type pg from "pg";
import { CheckpointCorruptError, shown } from "./corrupt.ts";
import { forkSafeVersion } from "./codec.ts";
import { quoteIdent } from "./schema.ts";

/** `err`, when it is a corruption error, naming `thread` and, before its row, `rowPrefix`. */
function located(err: unknown, thread: string | undefined, rowPrefix = ""): unknown {
  if (!CheckpointCorruptError.isInstance(err)) return err;
  return new CheckpointCorruptError({
    thread: err.thread ?? thread,
    table: err.table,
    row: rowPrefix && !err.row.startsWith(rowPrefix) ? `${rowPrefix}, ${err.row}` : err.row,
    problem: err.problem,
  });
}

const text = new TextDecoder();

/**
 * LangGraph's official Postgres checkpointer (@langchain/langgraph-checkpoint-postgres, its
 * layout and tables) with three additions:
 *
 * - **Fork-safe channel versions** (see `forkSafeVersion`): two forks of one checkpoint never
 *   share a version, so the second fork never reads the first fork's value.
 * - **Root checkpoint counts** per thread (`rootCheckpointCounts`), for thread listings.
 * - **Corrupt rows as {@link CheckpointCorruptError}**: a stored value or write the serializer
 *   cannot read names the thread, table and row, not a JSON parser's message quoting the bytes.
 *
 * LinearPostgresSaver reads schemas of this layout through it. It never ends the pool it was given.
 */
export class ForkSafePostgresSaver extends PostgresSaver {
  constructor(
    private readonly connections: pg.Pool,
    private readonly schemaName: string,
  ) {
    super(connections, undefined, { schema: schemaName });
  }

  /** The next integer plus six random decimals (see the class comment). */
  override getNextVersion(current: number | string | undefined): number {
    return forkSafeVersion(current);
  }

  /** Root-graph checkpoints per thread (all threads, or one). */
  async rootCheckpointCounts(threadId?: string): Promise<Map<string, number>> {
    const where = threadId === undefined ? "" : "AND thread_id = $1";
    const { rows } = await this.connections.query<{ thread_id: string; n: string }>(
      `SELECT thread_id, count(*) AS n FROM ${quoteIdent(this.schemaName)}.checkpoints
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
    const row = `checkpoint_id ${shown(id)}`;
    if (typeof checkpoint !== "object" || checkpoint === null || typeof id !== "string")
      throw new CheckpointCorruptError({
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
        row: `channel ${shown(channel)}`,
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
          row: `task_id ${shown(task)}, channel ${shown(name)}`,
        }),
      ]);
    }
    return out;
  }

  /** A stored value through the serializer; one it cannot read is a CheckpointCorruptError. */
  private async decoded(
    type: string,
    value: Uint8Array,
    where: { table: string; row: string },
  ): Promise<unknown> {
    try {
      return await this.serde.loadsTyped(type, value);
    } catch {
      throw new CheckpointCorruptError({
        ...where,
        problem: `its ${shown(type)} value does not parse`,
      });
    }
  }

  /** The pool is the caller's (it may be shared): closing it is theirs. */
  override async end(): Promise<void> {}
}
