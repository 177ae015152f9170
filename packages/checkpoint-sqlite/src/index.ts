/**
 * @codehop/checkpoint-sqlite: IncrementalSqliteSaver, a LangGraph.js checkpointer for SQLite whose
 * storage grows linearly with the steps of a thread (see README.md).
 */
export { IncrementalSqliteSaver, type IncrementalSqliteSaverOptions } from "./saver.ts";
export { countRootCheckpoints } from "./thread-counts.ts";
export {
  CHECKPOINT_CORRUPT,
  CheckpointCorruptError,
  DEFAULT_MAX_INFLATE_BYTES,
  inflateBounded,
  type CorruptRow,
} from "./corrupt.ts";
