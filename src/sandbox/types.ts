/**
 * Public contract of the code-action sandbox (implementation: src/sandbox/*).
 * The agent core (src/nodes/act.ts) depends only on these types.
 */

/** JSON value as stored in the variables snapshot. */
export type JsonValue =
  null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * State carried from one action to the next and checkpointed in graph state, so a resumed run on a
 * fresh process gets its variables back.
 */
export interface VariablesSnapshot {
  /** JSON-serializable top-level values by name. */
  values: Record<string, JsonValue>;
  /**
   * Source text of top-level function and class declarations (and of `const f = () => ...` style
   * function bindings), re-installed before the next action so helpers defined in step 1 still
   * work in step 3 — also after a resume.
   */
  declarations: Record<string, string>;
  /**
   * Names whose values could not be carried over, with the reason (e.g. "Map is not JSON-serializable");
   * kept until the name is declared again. Also names whose value is `undefined` ("value is undefined"),
   * which are carried over as undefined.
   */
  unserializable: Record<string, string>;
}

/** Error reported to the model: no host stack frames, paths or config. */
export interface GuestError {
  /** "SyntaxError", "TypeError", "ToolError", "TimeoutError", "MemoryError", ... */
  name: string;
  message: string;
  /** 1-based line in the guest's code, when known. */
  line: number | null;
  /** 1-based column, when known (syntax errors). */
  column?: number | null;
}

/** Outcome of one code action. Field names match `npm run sandbox`'s JSON lines. */
export interface ActionResult {
  /** False when the action threw, timed out, or the sandbox process died. */
  ok: boolean;
  /** Captured console.log / print output (capped, head+tail kept with a visible marker). */
  logs: string;
  /** The value passed to final_answer(), or null. */
  finalAnswer: unknown;
  /** True iff final_answer() was called (even with null/undefined). */
  isFinalAnswer: boolean;
  error: GuestError | null;
  /** JSON values of top-level bindings after the action (= snapshot.values). */
  variables: Record<string, JsonValue>;
  /** Full snapshot to start the next action from. */
  snapshot: VariablesSnapshot;
  /** Number of tool calls the action made. */
  toolCalls: number;
  /** Wall time from run() to the result, including any wait for a free process. */
  durationMs: number;
  /**
   * REPL echo: the value of the code's last top-level expression statement (or of a top-level
   * `return`), formatted like console.log and capped; null when there is none or it is undefined,
   * and for statements that only print or answer (`print(...)`, `console.log(...)`, `final_answer(...)`).
   * Not part of `npm run sandbox`'s JSON lines.
   */
  lastValue?: string | null;
  /**
   * Names this action left holding a value that cannot be carried over to the next action (Map,
   * class instance, NaN, too large, ...), with the note also found in `snapshot.unserializable`.
   * Unlike the snapshot, it leaves out notes an earlier action made. In the next action such a name
   * is unbound: using it throws a ReferenceError that quotes the note. Empty when there are none.
   */
  notCarriedOver?: Record<string, string>;
}

/** Host implementation of a tool as seen by the sandbox: raw guest args (already copied) in, JSON out. */
export type HostToolFn = (
  args: unknown[],
  ctx: { callIndex: number; signal: AbortSignal },
) => Promise<unknown>;

/** Hard limits; every one is a named constant with a default (see src/sandbox/limits.ts). */
export interface SandboxLimits {
  /** Wall-clock time per action; on expiry the child is SIGKILLed and replaced. Default 30_000. */
  timeoutMs: number;
  /** V8 old-space heap per child process (--max-old-space-size). */
  maxHeapMb: number;
  /** Captured console output per action (characters). */
  maxOutputChars: number;
  /** Tool calls per action. */
  maxToolCalls: number;
  /** Concurrent in-flight tool calls per action. */
  maxConcurrentToolCalls: number;
  /** Serialized size of one tool argument list / tool result / final answer (bytes). */
  maxValueBytes: number;
  /** Nesting depth of values crossing the boundary. */
  maxValueDepth: number;
}

/** One code action request. */
export interface RunActionRequest {
  /** The model's JavaScript (may use top-level await). */
  code: string;
  /** Tools by guest-visible name. */
  tools: Record<string, HostToolFn>;
  /** Snapshot from the previous action (omit for the first action). */
  snapshot?: VariablesSnapshot;
  /** Per-action limit overrides. */
  limits?: Partial<SandboxLimits>;
  /**
   * Cancels the action (e.g. the graph run was cancelled): its process is killed and the result
   * reports an `AbortError`. Tool calls in flight see their own `ctx.signal` abort.
   */
  signal?: AbortSignal;
}

/** A pool of warm, locked-down child processes that run code actions. */
export interface CodeSandbox {
  run(request: RunActionRequest): Promise<ActionResult>;
  /** Kills all children. */
  close(): Promise<void>;
}
