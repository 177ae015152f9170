/**
 * Stored rows the saver cannot trust (a damaged or crafted database): every decoding step that can
 * meet bad bytes fails with a {@link CheckpointCorruptError} naming the thread, table, row and what
 * is wrong — never the stored bytes, never a parser's stack — after bounded work.
 */

/** The error code of corrupt stored checkpoint data (the same as codehop's). */
export const CHECKPOINT_CORRUPT = "CODEHOP_CHECKPOINT_CORRUPT";

/**
 * codehop recognises errors carrying this marker as its own (`CodehopError.isInstance`): it prints
 * their message and code, not a stack trace. (The package imports nothing of codehop.)
 */
const CODEHOP_ERROR = Symbol.for("codehop.error");

/** Where corrupt data was met. */
export interface RowPlace {
  /** The thread whose data it is, when known. */
  thread?: string;
  /** The table of the row. */
  table: string;
  /** The row's key, as `column value` pairs (see {@link rowKey}). */
  row: string;
}

/** A stored identifier as a message shows it: quoted, control characters escaped, cut at 120. */
export function shown(value: unknown): string {
  const text = String(value);
  return JSON.stringify(text.length > 120 ? `${text.slice(0, 120)}…` : text);
}

/** `checkpoint_ns "...", checkpoint_id "..."` and the like, as an error names a row. */
export function rowKey(pairs: Record<string, unknown>): string {
  return Object.entries(pairs)
    .map(([k, v]) => `${k} ${shown(v)}`)
    .join(", ");
}

/**
 * Corrupt stored data (code {@link CHECKPOINT_CORRUPT}): the message names the thread, table, row
 * and problem and ends with the code; it holds none of the stored bytes.
 */
export class CheckpointCorruptError extends Error {
  readonly [CODEHOP_ERROR] = true;
  readonly code = CHECKPOINT_CORRUPT;
  readonly thread: string | undefined;
  readonly table: string;
  readonly row: string;
  readonly problem: string;

  constructor(where: RowPlace & { problem: string }) {
    const thread = where.thread === undefined ? "" : ` of thread ${shown(where.thread)}`;
    super(
      `Corrupt checkpoint data${thread}: table ${where.table}, row ${where.row}: ${where.problem}. [${CHECKPOINT_CORRUPT}]`,
    );
    this.name = "CheckpointCorruptError";
    this.thread = where.thread;
    this.table = where.table;
    this.row = where.row;
    this.problem = where.problem;
  }

  /** True for this error from any copy of this package (or codehop's of the same code). */
  static isInstance(value: unknown): value is CheckpointCorruptError {
    return (
      typeof value === "object" &&
      value !== null &&
      (value as { code?: unknown }).code === CHECKPOINT_CORRUPT &&
      typeof (value as { table?: unknown }).table === "string"
    );
  }
}

/** The corruption error for `where`. */
export function corrupt(where: RowPlace, problem: string): CheckpointCorruptError {
  return new CheckpointCorruptError({ ...where, problem });
}
