import type {
  Checkpoint,
  CheckpointMetadata,
  SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import type pg from "pg";
import type { tableNames } from "./schema.ts";

/** What the saver's parts (reads.ts, writes.ts, saver.ts) share. */
export interface SaverContext {
  readonly pool: pg.Pool;
  /** The qualified table names. */
  readonly t: ReturnType<typeof tableNames>;
  readonly serde: SerializerProtocol;
  /** Decoded values by thread, namespace, channel and version (see {@link valueKey}). */
  readonly values: Lru<string, KnownValue>;
  /** Each namespace's latest checkpoint this process put or read (by thread\0namespace). */
  readonly latest: Lru<string, Latest>;
  /**
   * Payloads of the checkpoints this process put or read lately (by thread\0namespace\0id): a
   * task's writes are deflated against their checkpoint's (LangGraph may store them after the
   * next checkpoint).
   */
  readonly payloads: Lru<string, Buffer>;
  /** A read query; on a schema without the tables yet, they are created first. */
  read<R extends pg.QueryResultRow>(sql: string, args: unknown[]): Promise<pg.QueryResult<R>>;
}

/** A row of linear_checkpoints with its pending writes (arrays in the writes' order). */
export interface CheckpointRow {
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  parent_checkpoint_id: string | null;
  type: string;
  zip: number;
  record: Buffer;
  w_task: string[] | null;
  w_path: string[] | null;
  w_zip: number[] | null;
  w_data: Buffer[] | null;
}

/** A row of linear_blobs. */
export interface BlobRow {
  channel: string;
  version: string;
  kind: number;
  base_version: string | null;
  chain: number;
  full_items: number;
  since_full: number;
  type: string;
  zip: number;
  value: Buffer;
}

/** The stored record of a checkpoint: the checkpoint without its values and id, and its metadata. */
export interface StoredRecord {
  c: Omit<Checkpoint, "channel_values" | "id">;
  m: CheckpointMetadata;
}

/** What the saver remembers of a channel's value in a namespace (to store appends only). */
export interface KnownValue {
  version: string;
  value: unknown;
  chain: number;
  fullItems: number;
  sinceFull: number;
}

/** A namespace's latest checkpoint this process put or read, and its channel values by channel. */
export interface Latest {
  id: string;
  values: Map<string, KnownValue>;
  /**
   * Rows of linear_steps each channel's value needs, counted back from this checkpoint (0: its
   * own row); absent for a checkpoint of an earlier layout.
   */
  depths?: Map<string, number>;
  /** Its linear_steps row's payload (what a child's row is deflated against). */
  payload?: Buffer;
  /**
   * How many rows back the chain of payloads each row is deflated against goes, for this row
   * (index 0) and the ancestors a read of it walks (index: rows back).
   */
  dicts?: number[];
}

/** The key of a namespace in the caches. */
export const nsKey = (thread: string, ns: string) => `${thread}\u0000${ns}`;

/** The key of a channel's value at a version in {@link SaverContext.values}. */
export const valueKey = (thread: string, ns: string, channel: string, version: string) =>
  `${thread}\u0000${ns}\u0000${channel}\u0000${version}`;

/** A small least-recently-used map (the saver's caches). */
export class Lru<K, V> {
  private readonly map = new Map<K, V>();
  constructor(private readonly capacity: number) {}
  get(key: K): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }
  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value as K);
  }
  delete(key: K): void {
    this.map.delete(key);
  }
  deleteWhere(test: (key: K) => boolean): void {
    for (const key of [...this.map.keys()]) if (test(key)) this.map.delete(key);
  }
}
