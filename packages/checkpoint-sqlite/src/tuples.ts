/**
 * A checkpoint tuple from a checkpoint row: of this saver's tables (its record, its version maps,
 * its channel values, its pending writes) or of the official SqliteSaver's (read as that saver
 * stores them), with the pending sends of checkpoints of format < 4 migrated.
 */
import {
  type Checkpoint,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type SerializerProtocol,
  TASKS,
  maxChannelVersion,
} from "@langchain/langgraph-checkpoint";
import type { ChannelValues } from "./chains.ts";
import type { Codec, Source } from "./codec.ts";
import { corrupt, decoding, shown } from "./corrupt.ts";
import type { WriteRows } from "./dictionaries.ts";
import type { Lru } from "./lru.ts";
import { recordSource, type Records } from "./records.ts";
import {
  KIND_EMPTY,
  LEGACY_CHECKPOINTS,
  LEGACY_WRITES,
  METADATA_IN_RECORD,
  type CheckpointRow,
  type Statements,
} from "./schema.ts";

/** The parts of the saver a read uses. */
export interface TupleParts {
  readonly s: Statements;
  serde(): SerializerProtocol;
  readonly codec: Codec;
  readonly records: Records;
  readonly channels: ChannelValues;
  readonly writeRows: WriteRows;
  /** The channel values of the latest checkpoint put per namespace id (see the saver). */
  readonly latestValues: Lru<number, Map<string, { version: string; value: unknown }>>;
  /** A new channel version (the saver's getNextVersion). */
  nextVersion(): number | string;
}

/** A row of the official saver's checkpoints table, as an error names it. */
function legacySource(row: CheckpointRow): Source {
  return {
    table: LEGACY_CHECKPOINTS,
    row: () =>
      `thread_id ${shown(row.thread_id)}, checkpoint_ns ${shown(row.checkpoint_ns)}, checkpoint_id ${shown(row.checkpoint_id)}`,
  };
}

/** A row of the official saver's writes table, as an error names it. */
function legacyWriteSource(
  row: CheckpointRow,
  checkpointId: string,
  w: { task_id: string; idx: number },
): Source {
  return {
    table: LEGACY_WRITES,
    row: () =>
      `thread_id ${shown(row.thread_id)}, checkpoint_ns ${shown(row.checkpoint_ns)}, checkpoint_id ${shown(checkpointId)}, task_id ${shown(w.task_id)}, idx ${w.idx}`,
  };
}

/** A value of the official saver's rows, parsed by the serializer (stored plain). */
function legacyValue(p: TupleParts, type: string | null, value: unknown, source: Source) {
  return decoding(source.table, source.row, "its value does not parse", () =>
    p.serde().loadsTyped(type ?? "json", (value ?? "") as string | Uint8Array),
  );
}

const isMap = (v: unknown) => typeof v === "object" && v !== null && !Array.isArray(v);

/** Reads checkpoint tuples from rows. */
export class TupleReader {
  constructor(private readonly p: TupleParts) {}

  async tupleFromRow(row: CheckpointRow): Promise<CheckpointTuple> {
    const ns = row.checkpoint_ns;
    let checkpoint: Checkpoint;
    let metadata: CheckpointMetadata;
    let pendingWrites: CheckpointPendingWrite[];
    if (row.legacy) {
      const source = legacySource(row);
      checkpoint = (await legacyValue(this.p, row.type, row.checkpoint, source)) as Checkpoint;
      if (!isMap(checkpoint))
        corrupt(source.table, source.row(), "its checkpoint is not an object");
      metadata = (await legacyValue(this.p, row.type, row.metadata, source)) as CheckpointMetadata;
      const writes = this.p.s.legacyWrites!.all(row.thread_id, ns, row.checkpoint_id) as Array<{
        task_id: string;
        idx: number;
        channel: string;
        type: string | null;
        value: Buffer | null;
      }>;
      pendingWrites = await Promise.all(
        writes.map(
          async (w) =>
            [
              w.task_id,
              w.channel,
              await legacyValue(
                this.p,
                w.type,
                w.value,
                legacyWriteSource(row, row.checkpoint_id, w),
              ),
            ] as CheckpointPendingWrite,
        ),
      );
    } else {
      const source = recordSource(row.ns_id!, row.checkpoint_id);
      const nsId = row.ns_id!;
      const {
        base: _base,
        cv: _cv,
        vs: _vs,
        iv: _iv,
        m: inRecord,
        ...stored
      } = (await this.p.records.recordOf(nsId, row)).stored;
      const versions = await this.p.records.versionsFrom(
        nsId,
        row.checkpoint_id,
        { base: _base, cv: _cv, vs: _vs, iv: _iv, ...stored },
        row.parent_checkpoint_id,
      );
      stored.id = row.checkpoint_id;
      // Copies: LangGraph changes a loaded checkpoint's maps in place, and these are cached.
      stored.channel_versions = { ...versions.channel_versions };
      stored.versions_seen = Object.fromEntries(
        Object.entries(versions.versions_seen).map(([node, seen]) => [
          node,
          isMap(seen) ? { ...seen } : structuredClone(seen),
        ]),
      );
      const channelValues: Record<string, unknown> = {};
      const latest = this.p.latestValues.get(nsId);
      for (const [channel, version] of Object.entries(stored.channel_versions ?? {})) {
        const known = latest?.get(channel);
        if (known && known.version === String(version)) {
          channelValues[channel] = known.value;
          continue;
        }
        const inline = versions.inline[channel];
        if (inline && inline[0] === String(version)) {
          channelValues[channel] = await this.p.channels.readInline(nsId, inline, source);
          continue;
        }
        const blob = await this.p.channels.readBlob(nsId, channel, String(version));
        if (blob.found && blob.row?.kind !== KIND_EMPTY) channelValues[channel] = blob.value;
      }
      checkpoint = { ...stored, channel_values: channelValues } as Checkpoint;
      metadata =
        row.metadata === METADATA_IN_RECORD
          ? (structuredClone(inRecord) as CheckpointMetadata)
          : ((await decoding(source.table, source.row, "its metadata does not parse", () =>
              this.p.serde().loadsTyped("json", row.metadata),
            )) as CheckpointMetadata);
      // (Decoded together: one parse for the checkpoint's writes.)
      const writes = this.p.writeRows
        .checkpointRows(nsId, row.checkpoint_id)
        .flatMap((w) =>
          this.p.writeRows.unpackRow(nsId, w).map((one) => ({ task: w.task_id, one })),
        );
      const values = await this.p.codec.decodeWrites(
        writes.map((w) => w.one),
        source,
      );
      pendingWrites = writes.map(
        ({ task, one }, i) => [task, one.channel, values[i]] as CheckpointPendingWrite,
      );
    }
    if (typeof checkpoint.v !== "number") {
      const source = row.legacy ? legacySource(row) : recordSource(row.ns_id!, row.checkpoint_id);
      corrupt(source.table, source.row(), "its checkpoint has no format version");
    }
    if (checkpoint.v < 4 && row.parent_checkpoint_id)
      await this.migratePendingSends(checkpoint, row, row.parent_checkpoint_id);
    return {
      config: {
        configurable: {
          thread_id: row.thread_id,
          checkpoint_ns: ns,
          checkpoint_id: row.checkpoint_id,
        },
      },
      checkpoint,
      metadata,
      ...(row.parent_checkpoint_id
        ? {
            parentConfig: {
              configurable: {
                thread_id: row.thread_id,
                checkpoint_ns: ns,
                checkpoint_id: row.parent_checkpoint_id,
              },
            },
          }
        : {}),
      pendingWrites,
    };
  }

  /** Checkpoints of format v < 4 kept their pending sends in the parent's writes. */
  private async migratePendingSends(
    checkpoint: Checkpoint,
    row: CheckpointRow,
    parentId: string,
  ): Promise<void> {
    const fromNew: unknown[] = [];
    if (row.ns_id !== undefined)
      for (const w of this.p.writeRows.checkpointRows(row.ns_id, parentId))
        for (const one of this.p.writeRows.unpackRow(row.ns_id, w))
          if (one.channel === TASKS)
            fromNew.push(
              await this.p.codec.decode(one.type, 0, one.data, one.source ?? legacySource(row)),
            );
    const sends = fromNew.length
      ? fromNew
      : await Promise.all(
          (
            (this.p.s.legacySends?.all(row.thread_id, row.checkpoint_ns, parentId) ?? []) as Array<{
              task_id: string;
              idx: number;
              type: string | null;
              value: Buffer | null;
            }>
          ).map((w) => legacyValue(this.p, w.type, w.value, legacyWriteSource(row, parentId, w))),
        );
    checkpoint.channel_values ??= {};
    checkpoint.channel_values[TASKS] = sends;
    checkpoint.channel_versions[TASKS] =
      Object.keys(checkpoint.channel_versions).length > 0
        ? maxChannelVersion(...Object.values(checkpoint.channel_versions))
        : this.p.nextVersion();
  }
}
