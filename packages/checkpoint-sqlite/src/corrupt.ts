/**
 * Stored bytes the saver cannot trust: a database file may be damaged, or crafted. Every decoding
 * step that can meet bad bytes fails with a {@link CheckpointCorruptError} naming the thread, the
 * table, the row and what is wrong — never a stack of zlib or JSON internals, never the stored
 * bytes themselves — and does bounded work first: inflating stops at a bound derived from the
 * stored length (and an absolute one), chains of rows stop at the length their rows declare and
 * at a row seen twice.
 */
import { inflateRawSync } from "node:zlib";

/** The error code of corrupt stored checkpoint data (the same as codehop's). */
export const CHECKPOINT_CORRUPT = "CODEHOP_CHECKPOINT_CORRUPT";

/**
 * codehop recognises errors carrying this marker as its own (`CodehopError.isInstance`): it prints
 * their message and code, not a stack trace. (The package imports nothing of codehop.)
 */
const CODEHOP_ERROR = Symbol.for("codehop.error");

/** Where corrupt data was met. */
export interface CorruptRow {
  /** The thread whose data it is (filled in by the read that met it when the row does not say). */
  thread?: string;
  /** The table of the row. */
  table: string;
  /** The row's key, as `column value` pairs (e.g. `ns_id 3, channel "steps", version "4.1"`). */
  row: string;
  /** What is wrong with it. */
  problem: string;
}

/** A stored identifier as a message shows it: quoted, control characters escaped, cut at 120 characters. */
export function shown(value: unknown): string {
  const text = String(value);
  return JSON.stringify(text.length > 120 ? `${text.slice(0, 120)}…` : text);
}

/**
 * Corrupt stored data (code {@link CHECKPOINT_CORRUPT}). The message names the thread, table, row
 * and problem and ends with the code; it holds none of the stored bytes.
 */
export class CheckpointCorruptError extends Error {
  readonly [CODEHOP_ERROR] = true;
  readonly code = CHECKPOINT_CORRUPT;
  readonly thread: string | undefined;
  readonly table: string;
  readonly row: string;
  readonly problem: string;

  constructor(where: CorruptRow) {
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

  /** True for this error from any copy of this package. */
  static isInstance(value: unknown): value is CheckpointCorruptError {
    return (
      typeof value === "object" &&
      value !== null &&
      (value as { code?: unknown }).code === CHECKPOINT_CORRUPT &&
      typeof (value as { table?: unknown }).table === "string"
    );
  }

  /** This error naming `thread`, when it names none yet. */
  inThread(thread: string): CheckpointCorruptError {
    if (this.thread !== undefined) return this;
    return new CheckpointCorruptError({ ...this, thread });
  }
}

/** Throws a {@link CheckpointCorruptError} for `row` of `table`. */
export function corrupt(table: string, row: string, problem: string): never {
  throw new CheckpointCorruptError({ table, row, problem });
}

/**
 * Runs `decode` (a parse of stored bytes); any error it throws that is not already a corruption
 * error becomes one for `row` of `table` saying `problem` (the original message is dropped: a
 * JSON parser's message quotes the bytes it read).
 */
export async function decoding<T>(
  table: string,
  row: () => string,
  problem: string,
  decode: () => T | Promise<T>,
): Promise<T> {
  try {
    return await decode();
  } catch (err) {
    if (CheckpointCorruptError.isInstance(err)) throw err;
    return corrupt(table, row(), problem);
  }
}

/** The synchronous form of {@link decoding}. */
export function decodingSync<T>(
  table: string,
  row: () => string,
  problem: string,
  decode: () => T,
): T {
  try {
    return decode();
  } catch (err) {
    if (CheckpointCorruptError.isInstance(err)) throw err;
    return corrupt(table, row(), problem);
  }
}

/**
 * Deflate's largest ratio: a length/distance pair of two 1-bit codes copies 258 bytes, so valid
 * raw deflate data never inflates to more than 1032 times its length (plus a block's few bytes).
 */
const DEFLATE_MAX_RATIO = 1032;

/** The default absolute bound of one inflated value: 64 MiB (see `maxInflateBytes`). */
export const DEFAULT_MAX_INFLATE_BYTES = 64 * 1024 * 1024;

/**
 * Raw deflate data inflated (with `dictionary`, if given) to at most what its length allows
 * deflate to produce, and at most `maxBytes`: a deflate bomb stops at that bound instead of
 * filling memory. Invalid data or data past the bound is a {@link CheckpointCorruptError}.
 */
export function inflateBounded(
  data: Buffer,
  maxBytes: number,
  where: { table: string; row: () => string },
  dictionary?: Buffer,
): Buffer {
  const bound = Math.max(1, Math.min(maxBytes, data.length * DEFLATE_MAX_RATIO + 64));
  try {
    return inflateRawSync(
      data,
      dictionary ? { dictionary, maxOutputLength: bound } : { maxOutputLength: bound },
    );
  } catch (err) {
    const tooLarge = (err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE";
    return corrupt(
      where.table,
      where.row(),
      tooLarge
        ? `its ${data.length} deflated bytes inflate past ${bound} bytes (${bound === maxBytes ? "the bound on inflated bytes, maxInflateBytes" : "more than deflate can produce from them"})`
        : dictionary
          ? "its deflated bytes do not inflate with the dictionary its header names"
          : "its deflated bytes are not valid deflate data",
    );
  }
}

/**
 * Follows a chain of rows (a row naming the next one) with a bound: at most `max` rows, never one
 * twice. `next` returns the key of the row after `key`, or undefined at the chain's end.
 */
export class ChainGuard {
  private readonly seen = new Set<string>();
  constructor(
    private readonly max: number,
    private readonly where: { table: string; row: () => string; what: string },
  ) {}

  /** Records a step to `key`; throws when the chain loops or runs past its bound. */
  step(key: string): void {
    if (this.seen.has(key))
      corrupt(this.where.table, this.where.row(), `its ${this.where.what} loops back to itself`);
    this.seen.add(key);
    if (this.seen.size > this.max)
      corrupt(
        this.where.table,
        this.where.row(),
        `its ${this.where.what} is longer than the ${this.max} rows it can have`,
      );
  }
}
