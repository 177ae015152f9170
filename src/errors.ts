/**
 * Stable error codes. Model-caused problems never throw: they become observations the agent can
 * act on. These errors are for framework bugs, bad configuration and unreachable endpoints, where
 * the caller (CLI, API user) must be told exactly what is wrong.
 */
export const ErrorCodes = {
  /** A required configuration value is missing or malformed (env var, CLI flag, graph config). */
  CONFIG_INVALID: "CODEHOP_CONFIG_INVALID",
  /** No model endpoint is configured. */
  MODEL_NOT_CONFIGURED: "CODEHOP_MODEL_NOT_CONFIGURED",
  /** The model endpoint failed after all retries (HTTP errors, timeouts, garbage bodies). */
  MODEL_ENDPOINT_FAILED: "CODEHOP_MODEL_ENDPOINT_FAILED",
  /** A prompt template has a missing or unknown placeholder. */
  PROMPT_TEMPLATE: "CODEHOP_PROMPT_TEMPLATE",
  /** The sandbox child process could not be started or broke its protocol. */
  SANDBOX_INTERNAL: "CODEHOP_SANDBOX_INTERNAL",
  /**
   * An authorized library (src/sandbox/libraries.ts) cannot be used in code actions: not
   * installed, native code, install scripts, ES-module-only, or it reached for `process`, `fetch`
   * or a module outside itself while loading. The message names the package and the reason.
   */
  SANDBOX_LIBRARY_REFUSED: "CODEHOP_SANDBOX_LIBRARY_REFUSED",
  /** A graph reached a state that should be impossible (a bug in codehop). */
  GRAPH_INVARIANT: "CODEHOP_GRAPH_INVARIANT",
  /** A thread id was given that has no checkpoints. */
  THREAD_NOT_FOUND: "CODEHOP_THREAD_NOT_FOUND",
  /** A checkpoint id was given that does not exist in the thread. */
  CHECKPOINT_NOT_FOUND: "CODEHOP_CHECKPOINT_NOT_FOUND",
  /** A database file (corpus, checkpoints) cannot be opened or has the wrong schema. */
  DB_INVALID: "CODEHOP_DB_INVALID",
  /**
   * Stored checkpoint or journal data is damaged (or crafted): the message names the thread, the
   * table, the row and what is wrong, never the stored bytes. Other threads stay readable.
   */
  CHECKPOINT_CORRUPT: "CODEHOP_CHECKPOINT_CORRUPT",
  /** Input data (dataset, corpus file) is unreadable as a whole (single bad records are skipped). */
  INPUT_INVALID: "CODEHOP_INPUT_INVALID",
  /**
   * A file went past a reader limit (inflated bytes, archive entries, compression ratio, XML depth or
   * entities, pages, time, memory): the message names the file, the limit and how to raise it.
   */
  INPUT_LIMIT: "CODEHOP_INPUT_LIMIT",
  /** A run was stopped by the user (Ctrl-C / abort signal); its thread is resumable. */
  RUN_INTERRUPTED: "CODEHOP_RUN_INTERRUPTED",
  /** The knowledge source (Wikipedia API) failed after retries. */
  SOURCE_UNAVAILABLE: "CODEHOP_SOURCE_UNAVAILABLE",
  /** An evaluation finished with more failed questions than its error-rate limit allows. */
  EVAL_TOO_MANY_ERRORS: "CODEHOP_EVAL_TOO_MANY_ERRORS",
  /** An MCP server could not be started or did not list its tools (src/tools/mcp.ts). */
  MCP_SERVER_FAILED: "CODEHOP_MCP_SERVER_FAILED",
  /**
   * A client of a served graph set a run-context key only the operator may set (an endpoint, a
   * path, a key ...), an unknown key, or a value outside what the operator allows
   * (src/core/client-settings.ts).
   */
  CLIENT_SETTING_REFUSED: "CODEHOP_CLIENT_SETTING_REFUSED",
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/** What each code means for a code action that meets it (every code must say: the record is exhaustive). */
interface ErrorCodeTraits {
  /**
   * Raised inside a tool during a code action (e.g. a sub-agent whose model endpoint is down), the
   * error is not the model's fault: it fails the act node after the action instead of becoming an
   * observation, so the run stops and can be resumed (finished calls are journaled). False for
   * errors the model can act on.
   */
  fatalInTool: boolean;
}

/** The traits of every error code. */
export const ERROR_CODE_TRAITS: Readonly<Record<ErrorCode, ErrorCodeTraits>> = {
  [ErrorCodes.CONFIG_INVALID]: { fatalInTool: true },
  [ErrorCodes.MODEL_NOT_CONFIGURED]: { fatalInTool: true },
  [ErrorCodes.MODEL_ENDPOINT_FAILED]: { fatalInTool: true },
  [ErrorCodes.PROMPT_TEMPLATE]: { fatalInTool: true },
  [ErrorCodes.SANDBOX_INTERNAL]: { fatalInTool: true },
  // The operator's configuration, not the model's to fix.
  [ErrorCodes.SANDBOX_LIBRARY_REFUSED]: { fatalInTool: true },
  [ErrorCodes.GRAPH_INVARIANT]: { fatalInTool: true },
  // Lookups by id (checkpoint, thread) are the caller's, never a tool's: an observation if met.
  [ErrorCodes.THREAD_NOT_FOUND]: { fatalInTool: false },
  [ErrorCodes.CHECKPOINT_NOT_FOUND]: { fatalInTool: false },
  [ErrorCodes.DB_INVALID]: { fatalInTool: true },
  // Damaged stored data is not the model's to fix: the run stops, other threads go on.
  [ErrorCodes.CHECKPOINT_CORRUPT]: { fatalInTool: true },
  // Bad input data (a file, a dataset) a tool was given: the model can pick another.
  [ErrorCodes.INPUT_INVALID]: { fatalInTool: false },
  // A hostile or oversized file: the model can skip it or ask for another.
  [ErrorCodes.INPUT_LIMIT]: { fatalInTool: false },
  // The run's own abort ends it; inside a tool it is the cut-short call's error (never journaled).
  [ErrorCodes.RUN_INTERRUPTED]: { fatalInTool: false },
  // The knowledge source also uses it for rejected queries, which the model can fix.
  [ErrorCodes.SOURCE_UNAVAILABLE]: { fatalInTool: false },
  // The outcome of a whole evaluation, never raised inside a run.
  [ErrorCodes.EVAL_TOO_MANY_ERRORS]: { fatalInTool: false },
  // Raised when a run opens its servers; a server gone during a call is that call's error.
  [ErrorCodes.MCP_SERVER_FAILED]: { fatalInTool: false },
  // Checked before a run starts, never inside one.
  [ErrorCodes.CLIENT_SETTING_REFUSED]: { fatalInTool: true },
};

/** True when `err` is a CodehopError whose code stops a run if raised inside a tool. */
export function isFatalInTool(err: unknown): err is CodehopError {
  return CodehopError.isInstance(err) && ERROR_CODE_TRAITS[err.code]?.fatalInTool === true;
}

/** Base error with a stable `code`; `isInstance` works across duplicated module copies. */
const MARKER = Symbol.for("codehop.error");

export class CodehopError extends Error {
  readonly [MARKER] = true;
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "CodehopError";
    this.code = code;
  }

  /** True for any CodehopError, even one created by another copy of this module. */
  static isInstance(value: unknown): value is CodehopError {
    return typeof value === "object" && value !== null && (value as any)[MARKER] === true;
  }
}

/** Where corrupt stored data was met (see {@link checkpointCorrupt}). */
export interface CorruptData {
  /** The thread whose data it is, when known. */
  thread?: string;
  /** The table of the row. */
  table: string;
  /** The row's key, as `column value` pairs. */
  row: string;
  /** What is wrong with it. */
  problem: string;
}

/**
 * The error for corrupt stored data (CODEHOP_CHECKPOINT_CORRUPT), worded as
 * @codehop/checkpoint-sqlite's CheckpointCorruptError (which codehop also treats as its own): the
 * thread, table, row and problem, ending with the code; no stored bytes.
 */
export function checkpointCorrupt(where: CorruptData): CodehopError {
  const thread = where.thread === undefined ? "" : ` of thread ${quoted(where.thread)}`;
  const err = new CodehopError(
    ErrorCodes.CHECKPOINT_CORRUPT,
    `Corrupt checkpoint data${thread}: table ${where.table}, row ${where.row}: ${where.problem}. [${ErrorCodes.CHECKPOINT_CORRUPT}]`,
  );
  return Object.assign(err, {
    thread: where.thread,
    table: where.table,
    row: where.row,
    problem: where.problem,
  });
}

/** A stored identifier as an error message shows it: quoted, control characters escaped, cut at 120. */
export function quoted(value: unknown): string {
  const text = String(value);
  return JSON.stringify(text.length > 120 ? `${text.slice(0, 120)}…` : text);
}
