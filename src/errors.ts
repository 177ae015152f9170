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
  /** A graph reached a state that should be impossible (a bug in codehop). */
  GRAPH_INVARIANT: "CODEHOP_GRAPH_INVARIANT",
  /** A thread id was given that has no checkpoints. */
  THREAD_NOT_FOUND: "CODEHOP_THREAD_NOT_FOUND",
  /** A checkpoint id was given that does not exist in the thread. */
  CHECKPOINT_NOT_FOUND: "CODEHOP_CHECKPOINT_NOT_FOUND",
  /** A database file (corpus, checkpoints) cannot be opened or has the wrong schema. */
  DB_INVALID: "CODEHOP_DB_INVALID",
  /** Input data (dataset, corpus file) is unreadable as a whole (single bad records are skipped). */
  INPUT_INVALID: "CODEHOP_INPUT_INVALID",
  /** A run was stopped by the user (Ctrl-C / abort signal); its thread is resumable. */
  RUN_INTERRUPTED: "CODEHOP_RUN_INTERRUPTED",
  /** The knowledge source (Wikipedia API) failed after retries. */
  SOURCE_UNAVAILABLE: "CODEHOP_SOURCE_UNAVAILABLE",
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

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
