/**
 * @codehop/checkpoint-postgres: LinearPostgresSaver, a LangGraph.js checkpointer for PostgreSQL
 * whose storage grows linearly with the steps of a thread (see README.md).
 */
export { LinearPostgresSaver } from "./saver.ts";
export { LINEAR_TABLES } from "./schema.ts";
export { CHECKPOINT_CORRUPT, CheckpointCorruptError, type RowPlace } from "./corrupt.ts";
