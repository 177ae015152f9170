/**
 * Reading every stored row of a thread to find what is damaged (`codehop check` uses it): each
 * checkpoint whole, every value row, every writes row (with its dictionary rows) and the official
 * saver's rows, one error per damaged row.
 */
import type { ChannelValues } from "./chains.ts";
import type { Codec } from "./codec.ts";
import type { SaverContext } from "./context.ts";
import { CheckpointCorruptError } from "./corrupt.ts";
import type { WriteRows } from "./dictionaries.ts";
import {
  LEGACY_CHECKPOINTS,
  T_BLOBS,
  T_NAMESPACES,
  T_WRITES,
  type CheckpointRow,
  type WritesRow,
} from "./schema.ts";
import type { TupleReader } from "./tuples.ts";

/** The parts of the saver a verification reads through. */
export interface VerifyParts {
  readonly ctx: SaverContext;
  readonly codec: Codec;
  readonly reader: TupleReader;
  readonly channels: ChannelValues;
  readonly writeRows: WriteRows;
}

/** Every corrupt row of `threadId` (empty when it reads back whole), each error naming the thread. */
export async function verifyThread(
  p: VerifyParts,
  threadId: string,
): Promise<CheckpointCorruptError[]> {
  const { db, s } = p.ctx;
  p.ctx.flush();
  const found = new Map<string, CheckpointCorruptError>();
  const check = async (read: () => unknown) => {
    try {
      await read();
    } catch (err) {
      if (!CheckpointCorruptError.isInstance(err)) throw err;
      const e = err.inThread(threadId);
      // (A damaged row met through several checkpoints is one problem.)
      found.set(`${e.table}\u0000${e.row}\u0000${e.problem}`, e);
    }
  };
  const namespaces = db
    .prepare(`SELECT ns_id FROM ${T_NAMESPACES} WHERE thread_id = ?`)
    .all(threadId) as Array<{ ns_id: number }>;
  for (const { ns_id: nsId } of namespaces) {
    for (const row of db
      .prepare(`${s.select} WHERE c.ns_id = ? ORDER BY c.checkpoint_id`)
      .all(nsId) as CheckpointRow[])
      await check(() => p.reader.tupleFromRow(row));
    for (const { channel, version } of db
      .prepare(`SELECT channel, version FROM ${T_BLOBS} WHERE ns_id = ?`)
      .all(nsId) as Array<{ channel: string; version: string }>)
      await check(() => p.channels.readBlob(nsId, channel, version));
    for (const row of db
      .prepare(
        `SELECT row_id, checkpoint_id, task_id, task_path, zip, writes FROM ${T_WRITES} WHERE ns_id = ?`,
      )
      .all(nsId) as WritesRow[])
      await check(async () => {
        for (const w of p.writeRows.unpackRow(nsId, row))
          await p.codec.decode(w.type, 0, w.data, w.source!);
      });
  }
  if (s.legacy)
    for (const row of db
      .prepare(
        `SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata
         FROM ${LEGACY_CHECKPOINTS} WHERE thread_id = ? ORDER BY checkpoint_id`,
      )
      .all(threadId) as CheckpointRow[])
      await check(() => p.reader.tupleFromRow({ ...row, legacy: true }));
  return [...found.values()];
}
