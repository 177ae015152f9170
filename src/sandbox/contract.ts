/**
 * The sandbox contract: everything the agent core knows about running code actions. A backend (the
 * SES child-process pool in src/sandbox/index.ts is one) implements {@link CodeSandbox}; the core
 * imports only this module — the types, the tool-name rule and the capability lines of the prompt —
 * so another backend touches no core file. This module imports nothing.
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
  /** Serialized size of one tool argument list / tool result / final answer (JSON, UTF-8 bytes). */
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
  /**
   * The agent run this action belongs to (any string; the agent core uses the thread, the agent's
   * checkpoint namespace and its task epochs). Actions of one session may share whatever a backend
   * keeps between actions (a process, the values it already holds); actions of different sessions,
   * or without a session, never share anything (docs/sandbox.md, threat model).
   */
  session?: string;
}

/** A pool of warm, locked-down child processes that run code actions. */
export interface CodeSandbox {
  run(request: RunActionRequest): Promise<ActionResult>;
  /** Kills all children. */
  close(): Promise<void>;
  /**
   * Optional hint: an action of `session` is coming soon (the agent core calls it when a step's
   * model call starts). A backend may get ready for it ahead of time, e.g. start the process the
   * session will use while the model thinks. Never required for correctness; never throws.
   */
  prepare?(session: string): void;
  /**
   * Optional hint: `session`'s agent run is over (it answered or stopped), so whatever the backend
   * keeps for it may go. A later action of the same session still runs (from its snapshot, like a
   * resumed run). Never throws.
   */
  endSession?(session: string): void;
  /**
   * Optional: lines the system prompt's `{{capabilities}}` gets in addition to the standard ones,
   * for what this backend adds (the authorized libraries, src/sandbox/libraries.ts).
   */
  readonly guestCapabilities?: readonly string[];
}

/**
 * Globals every backend gives guest code: the standard built-ins of a JavaScript realm plus what
 * the contract adds (`final_answer`, `console`, `print`). A tool may not take one of these names.
 */
export const GUEST_STANDARD_GLOBALS: ReadonlySet<string> = new Set([
  "Infinity",
  "NaN",
  "undefined",
  "isFinite",
  "isNaN",
  "parseFloat",
  "parseInt",
  "decodeURI",
  "decodeURIComponent",
  "encodeURI",
  "encodeURIComponent",
  "Array",
  "ArrayBuffer",
  "BigInt",
  "BigInt64Array",
  "BigUint64Array",
  "Boolean",
  "DataView",
  "EvalError",
  "Int8Array",
  "Int16Array",
  "Int32Array",
  "Map",
  "Number",
  "Object",
  "Promise",
  "Proxy",
  "RangeError",
  "ReferenceError",
  "Set",
  "String",
  "SyntaxError",
  "TypeError",
  "Uint8Array",
  "Uint8ClampedArray",
  "Uint16Array",
  "Uint32Array",
  "URIError",
  "WeakMap",
  "WeakSet",
  "AggregateError",
  "JSON",
  "Reflect",
  "Date",
  "Error",
  "RegExp",
  "Symbol",
  "Math",
  "globalThis",
  "arguments",
]);

/**
 * Names in the guest's global scope: the standard globals and what the sandbox adds. Tools may not
 * use them, and guest variables with these names are not carried to the next action (a
 * `const Date = "today"` must not break `new Date()` three steps later).
 */
export const RESERVED_GLOBALS: ReadonlySet<string> = new Set([
  ...GUEST_STANDARD_GLOBALS,
  "console",
  "print",
  "final_answer",
  "TextEncoder",
  "TextDecoder",
  "escape",
  "unescape",
  "Function",
  "eval",
  "Compartment",
  "harden",
  "lockdown",
  "Intl",
  "Float32Array",
  "Float64Array",
]);

/** Words that can never be binding names in strict-mode code. */
const STRICT_RESERVED: ReadonlySet<string> = new Set(
  (
    "break case catch class const continue debugger default delete do else export extends finally " +
    "for function if import in instanceof new return super switch this throw try typeof var void " +
    "while with yield let static implements interface package private protected public await enum " +
    "null true false arguments eval"
  ).split(" "),
);

/** An IdentifierName without escapes (ECMAScript ID_Start / ID_Continue). */
const IDENTIFIER = /^[\p{ID_Start}$_][\p{ID_Continue}$\u200C\u200D]*$/u;

/**
 * True if `name` can be declared as a strict-mode binding and used as a plain object key
 * (validates snapshot keys and tool names): `__proto__` is a binding name JavaScript accepts, but
 * as a key of the snapshot's objects it would set their prototype instead.
 */
export function isBindableName(name: string): boolean {
  return (
    typeof name === "string" &&
    name.length > 0 &&
    name.length <= 200 &&
    IDENTIFIER.test(name) &&
    !STRICT_RESERVED.has(name) &&
    name !== "__proto__"
  );
}

/**
 * The tool-name rule of every backend: why `name` cannot be a tool the guest calls, or null when it
 * can (a strict-mode binding name that is not one of the guest's globals).
 */
export function toolNameProblem(name: string): string | null {
  if (RESERVED_GLOBALS.has(name))
    return `tool name "${name}" is reserved: guest code already has a global of that name`;
  if (!isBindableName(name))
    return `tool name "${name}" is reserved: it cannot be a variable name in strict-mode JavaScript`;
  return null;
}

/** What guest code can do, one line each, for the `{{capabilities}}` of an agent's system prompt. */
export const GUEST_CAPABILITIES: readonly string[] = [
  "top-level await; await several tool calls at once with Promise.all([...])",
  "console.log(...) to see values (printed output becomes your next observation)",
  "final_answer(value) to finish with an answer",
  "JSON, Math, String/Array/Object/RegExp/Map/Set methods",
  "variables and functions you define at top level are kept for later steps",
  "Date, Intl and Math.random() work; there is no network, no file system, no require/import/fetch — use the tools below",
];
