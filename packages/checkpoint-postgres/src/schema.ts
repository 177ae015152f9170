/**
 * The tables of LinearPostgresSaver, beside the official saver's `checkpoints`,
 * `checkpoint_blobs` and `checkpoint_writes` in the same schema.
 */

/**
 * Its tables: `linear_steps` (the layout it writes), then the three of its first layout (read when
 * a schema has them; never created any more).
 */
export const LINEAR_TABLES = [
  "linear_steps",
  "linear_checkpoints",
  "linear_blobs",
  "linear_writes",
] as const;

/** `linear_steps` rows: `call` 0 is a checkpoint; a task's writes of one putWrites call are > 0. */
export const CHECKPOINT_CALL = 0;

/** Blob row kinds: a whole value, or the items a list gained since `base_version`. */
export const KIND_WHOLE = 0;
export const KIND_APPENDED = 1;

/** The qualified names of the tables of `schema`. */
export function tableNames(schema: string) {
  const s = quoteIdent(schema);
  return {
    steps: `${s}.linear_steps`,
    checkpoints: `${s}.linear_checkpoints`,
    blobs: `${s}.linear_blobs`,
    writes: `${s}.linear_writes`,
  };
}

/** `name` as a quoted SQL identifier. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * The statements creating the table of `schema` (idempotent): one table, one index. A checkpoint
 * is one row (its record and the values it changed, in one payload), a putWrites call another row
 * under the same key prefix: a checkpoint and its pending writes are one index range. Fixed-width
 * columns first (no alignment padding); the payload is deflated here already, so EXTERNAL spares
 * PostgreSQL another compression attempt.
 */
export function tablesSql(schema: string): string {
  const s = quoteIdent(schema);
  return `
CREATE SCHEMA IF NOT EXISTS ${s};
CREATE TABLE IF NOT EXISTS ${s}.linear_steps (
  call bigint NOT NULL,
  reach integer NOT NULL,
  zip smallint NOT NULL,
  thread_id text NOT NULL,
  checkpoint_ns text NOT NULL,
  checkpoint_id text NOT NULL,
  parent_checkpoint_id text,
  data bytea NOT NULL,
  PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, call)
);
ALTER TABLE ${s}.linear_steps ALTER COLUMN data SET STORAGE EXTERNAL;`;
}
