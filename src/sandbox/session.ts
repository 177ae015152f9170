/**
 * The host side of one code action: builds the wrapper (transform.ts), takes a child from the pool,
 * hands it the action, serves its tool calls (copied as JSON, concurrency- and count-limited),
 * enforces the wall-clock deadline with SIGKILL, checks every message the child sends, and turns
 * whatever happened into an {@link ActionResult} with a JSON variables snapshot.
 *
 * Why this file is long: one action's host side is one state machine — {@link runAction} starts
 * it, and ActionSession's handlers (child messages, tool calls, the deadline, the child's exit)
 * share its fields; the checks of what the child sends already live in snapshot.ts.
 */
import { setMaxListeners } from "node:events";
import { IDLE_GRACE_MS, MAX_CODE_CHARS, type SandboxCapabilities } from "./limits.ts";
import {
  AcquireRefused,
  currentActionScope,
  newActionScope,
  type AcquireOptions,
  type ActionScope,
  type ChildPool,
} from "./pool.ts";
import type { ChildSpec } from "./child-launch.ts";
import type { SandboxChild } from "./child-process.ts";
import type { ChildMessage } from "./child-protocol.ts";
import { encodeRunLine, overBytes, TOTAL_ARGS_FACTOR, utf8Bytes } from "./child/protocol.mjs";
import { sanitizeErrorMessage } from "./sanitize.ts";
import {
  acceptSnapshot,
  assembleSnapshot,
  isSettled,
  noteName,
  ProtocolViolation,
  valueJson,
} from "./snapshot.ts";
import { buildAction, type BuiltAction } from "./transform.ts";
import type { PreparedLibrary } from "./libraries.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";

import {
  RESERVED_GLOBALS,
  type ActionResult,
  type GuestError,
  type HostToolFn,
  type RunActionRequest,
  type SandboxLimits,
  type VariablesSnapshot,
} from "./contract.ts";

/** A start that failed because an authorized library was refused at load. */
function isLibraryRefusal(err: unknown): boolean {
  return CodehopError.isInstance(err) && err.code === ErrorCodes.SANDBOX_LIBRARY_REFUSED;
}

/** Signals of a process that crashed (as opposed to one we killed or that exited). */
const CRASH_SIGNALS: ReadonlySet<string> = new Set([
  "SIGSEGV",
  "SIGBUS",
  "SIGILL",
  "SIGFPE",
  "SIGABRT",
  "SIGTRAP",
  "SIGSYS",
]);

/** Stack positions of an error the host looks at (the child sends at most 20). */
const MAX_FRAMES = 20;
/** Longest error message accepted from a child (it caps at 2,000 plus a hint). */
const MAX_ERROR_MESSAGE_CHARS = 2_600;
/** A child whose heap holds more than this share of its limit after an action is retired. */
const RETIRE_HEAP_SHARE = 0.5;

const ABORTED: GuestError = {
  name: "AbortError",
  message: "The action was cancelled by the host",
  line: null,
};

export { emptySnapshot } from "./snapshot.ts";

let nextActionId = 1;
/** Numbers the one-action sessions of actions run without a session. */
let nextOneOffSession = 1;

function failed(
  started: number,
  previous: VariablesSnapshot,
  error: GuestError,
  logs = "",
): ActionResult {
  return {
    ok: false,
    logs,
    finalAnswer: null,
    isFinalAnswer: false,
    error,
    variables: previous.values,
    snapshot: previous,
    toolCalls: 0,
    durationMs: performance.now() - started,
    lastValue: null,
    notCarriedOver: {},
  };
}

/**
 * Runs one action on a child of `pool` (never throws for anything the guest did).
 */
export async function runAction(
  pool: ChildPool,
  spec: ChildSpec,
  request: RunActionRequest,
  limits: SandboxLimits,
  capabilities: SandboxCapabilities,
  libraries: readonly PreparedLibrary[] = [],
): Promise<ActionResult> {
  const started = performance.now();
  const previous = acceptSnapshot(request.snapshot, limits);
  const code = request.code;
  if (typeof code !== "string") {
    return failed(started, previous, {
      name: "TypeError",
      message: "The action's code must be a string",
      line: null,
    });
  }
  if (code.length > MAX_CODE_CHARS) {
    return failed(started, previous, {
      name: "RangeError",
      message: `The code is too long (${code.length} characters; the limit is ${MAX_CODE_CHARS})`,
      line: null,
    });
  }
  const tools = request.tools ?? {};
  const toolNames = Object.keys(tools);
  // Authorized libraries are globals too, with `require` (see libraries.ts).
  const libraryGlobals = libraries.length ? [...libraries.map((l) => l.global), "require"] : [];
  const shadowable = new Set([...RESERVED_GLOBALS, ...toolNames, ...libraryGlobals]);
  // Every reserved global is there except the capabilities turned off.
  const available = new Set([...RESERVED_GLOBALS, ...toolNames, ...libraryGlobals]);
  if (!capabilities.intl) available.delete("Intl");
  if (!capabilities.floatArrays) {
    available.delete("Float32Array");
    available.delete("Float64Array");
  }
  const built = buildAction(
    code,
    previous,
    shadowable,
    available,
    libraries.map((l) => l.name),
  );
  if ("error" in built) return failed(started, previous, built.error);
  const signal = request.signal;
  if (signal?.aborted) return failed(started, previous, { ...ABORTED });

  const scope = newActionScope();
  let child: SandboxChild;
  try {
    // Without a session the action is a session of its own: its process is retired afterwards.
    child = await readyChild(pool, spec, {
      scope,
      signal,
      session:
        typeof request.session === "string" ? request.session : `\0one-off:${nextOneOffSession++}`,
      singleUse: typeof request.session !== "string",
    });
  } catch (err) {
    if (!(err instanceof AcquireRefused)) throw err;
    if (err.reason === "aborted") return failed(started, previous, { ...ABORTED });
    return failed(started, previous, {
      name: "SandboxBusyError",
      message: err.message,
      line: null,
    });
  }
  if (signal?.aborted) {
    pool.release(child);
    return failed(started, previous, { ...ABORTED });
  }
  const id = nextActionId++;
  return new Promise<ActionResult>((resolve) => {
    const session = new ActionSession(
      pool,
      id,
      scope,
      child,
      built,
      tools,
      limits,
      previous,
      shadowable,
      started,
      resolve,
    );
    const onAbort = () => session.cancel();
    signal?.addEventListener("abort", onAbort, { once: true });
    session.onFinish = () => signal?.removeEventListener("abort", onAbort);
    session.start(capabilities);
  });
}

/**
 * A started child for `spec`. A child that fails to start (a transient fork failure, or an
 * address-space limit too small for this machine's Node — the pool then raises it) is replaced,
 * up to 3 attempts; after that run() rejects with CODEHOP_SANDBOX_INTERNAL.
 */
async function readyChild(
  pool: ChildPool,
  spec: ChildSpec,
  options: AcquireOptions,
): Promise<SandboxChild> {
  const asked = performance.now();
  for (let attempt = 1; ; attempt++) {
    const child = await pool.acquire(spec, options);
    try {
      await child.ready;
      pool.noteWait(performance.now() - asked);
      return child;
    } catch (err) {
      child.kill("failed to start");
      await child.exited; // lets the pool learn from how it died before the next attempt
      // A refused library is refused again by every process: no retry.
      if (attempt >= STARTUP_ATTEMPTS || isLibraryRefusal(err)) throw err;
    }
  }
}

const STARTUP_ATTEMPTS = 3;

interface QueuedCall {
  callIndex: number;
  tool: string;
  args: unknown[];
}

/** Host-side state of one action running in one child. */
class ActionSession {
  private ended = false;
  private head = "";
  private readonly abort = new AbortController();
  private timer: NodeJS.Timeout | null = null;
  private running = 0;
  private calls = 0;
  private argBytes = 0;
  private readonly queue: QueuedCall[] = [];
  private released = false;

  constructor(
    private readonly pool: ChildPool,
    private readonly id: number,
    private readonly scope: ActionScope,
    private readonly child: SandboxChild,
    private readonly built: BuiltAction,
    private readonly tools: Record<string, HostToolFn>,
    private readonly limits: SandboxLimits,
    private readonly previous: VariablesSnapshot,
    private readonly shadowable: ReadonlySet<string>,
    private readonly started: number,
    private readonly resolve: (r: ActionResult) => void,
  ) {
    // Every tool call in flight gets this signal and may listen on it (fetch does, once per
    // request): up to maxConcurrentToolCalls calls at once, so more than Node's default of 10
    // listeners is expected, not a leak worth warning about.
    setMaxListeners(Math.max(10, 4 * limits.maxConcurrentToolCalls), this.abort.signal);
  }

  start(capabilities: SandboxCapabilities): void {
    if (this.ended) return;
    this.child.onMessage = (msg) => this.onMessage(msg);
    this.child.onExit = (exit) => this.onExit(exit);
    this.timer = setTimeout(
      () => this.afterPendingIo(() => !this.ended && this.child.kill("timeout")),
      this.limits.timeoutMs,
    );
    // Notes by the name they are about (a quoted key unquoted), for the child's ReferenceError hints.
    const unserializable: Record<string, string> = Object.create(null);
    for (const [k, v] of Object.entries(this.previous.unserializable))
      if (typeof v === "string") unserializable[noteName(k)] = v;
    // Values this child already holds for its session (the same frozen objects) are not sent
    // again; the others are, as the JSON text the host has for them.
    const held = this.child.kept;
    const keep: string[] = [];
    const restore: [string, string][] = [];
    for (const [name, value] of Object.entries(this.built.restoreValues)) {
      if (held.has(name) && held.get(name) === value && isSettled(value)) keep.push(name);
      else restore.push([name, valueJson(value)]);
    }
    this.child.kept = new Map(); // until this action's report says what it holds
    this.child.sendLine(
      encodeRunLine(
        {
          t: "run",
          id: this.id,
          source: this.built.source,
          names: this.built.names,
          keep,
          mentioned: this.built.names.filter((n) => this.built.mentioned.has(n)),
          tools: Object.keys(this.tools),
          unserializable,
          limits: this.limits,
          capabilities,
        },
        restore,
      ),
    );
  }

  /** Called when the action ended, whichever way (cleanup hook for the caller). */
  onFinish: (() => void) | null = null;

  /** The caller's AbortSignal fired: stop the action now (the exit handler reports AbortError). */
  cancel(): void {
    if (!this.ended) this.child.kill("aborted");
  }

  private onMessage(msg: ChildMessage): void {
    if (msg.id !== this.id) return; // stale message from an earlier action of a reused child
    switch (msg.t) {
      case "log":
        if (
          !this.ended &&
          typeof msg.text === "string" &&
          this.head.length < this.limits.maxOutputChars
        ) {
          this.head += msg.text.slice(0, this.limits.maxOutputChars - this.head.length);
        }
        return;
      case "call":
        this.onCall(msg);
        return;
      case "done":
        this.onDone(msg);
        return;
      case "idle":
        // A process whose heap grew this much (e.g. a filled Symbol.for registry, which nothing
        // can empty) would make the session's next action run out of memory: replace it.
        if (
          typeof msg.heapUsed !== "number" ||
          msg.heapUsed > RETIRE_HEAP_SHARE * this.limits.maxHeapMb * 1024 * 1024
        )
          this.child.retire = true;
        if (this.ended) this.releaseChild();
        return;
      default:
        return;
    }
  }

  private onCall(msg: ChildMessage): void {
    // The child reported the action's end: it makes no further calls (its guest's are refused).
    if (this.ended) return this.protocolError();
    const callIndex = msg.callIndex;
    const tool = msg.tool;
    if (
      typeof callIndex !== "number" ||
      typeof tool !== "string" ||
      typeof msg.argsJson !== "string"
    )
      return this.protocolError();
    if (callIndex !== this.calls) return this.protocolError(); // indexes are assigned in order by the child
    this.calls++;
    this.argBytes += utf8Bytes(msg.argsJson); // UTF-8 bytes, as the child counts them
    // The child enforces these caps itself; a child that exceeds them is broken or compromised.
    if (
      this.calls > this.limits.maxToolCalls ||
      this.argBytes > this.limits.maxValueBytes * TOTAL_ARGS_FACTOR
    ) {
      return this.protocolError();
    }
    if (!Object.hasOwn(this.tools, tool)) {
      this.child.send({
        t: "result",
        id: this.id,
        callIndex,
        ok: false,
        message: `Tool call refused: ${tool}`,
      });
      return;
    }
    let args: unknown;
    try {
      args = JSON.parse(msg.argsJson);
    } catch {
      return this.protocolError();
    }
    if (!Array.isArray(args)) return this.protocolError();
    this.queue.push({ callIndex, tool, args });
    this.pump();
  }

  /** Starts queued calls in call order while under the concurrency limit. */
  private pump(): void {
    while (
      !this.ended &&
      this.running < this.limits.maxConcurrentToolCalls &&
      this.queue.length > 0
    ) {
      const call = this.queue.shift()!;
      this.running++;
      void this.invoke(call).finally(() => {
        this.running--;
        this.pump();
      });
    }
  }

  private async invoke({ callIndex, tool, args }: QueuedCall): Promise<void> {
    let reply: { ok: true; json?: string } | { ok: false; message: string };
    try {
      // The scope tells actions started by this call (a sub-agent's steps) that this action waits.
      const value = await currentActionScope.run(this.scope, () =>
        this.tools[tool](args, { callIndex, signal: this.abort.signal }),
      );
      reply = this.encodeResult(tool, value);
    } catch (err) {
      reply = { ok: false, message: sanitizeErrorMessage(err) };
    }
    if (this.ended) return; // calls after the action ended are dropped, never delivered
    this.child.send({ t: "result", id: this.id, callIndex, ...reply });
  }

  private encodeResult(
    tool: string,
    value: unknown,
  ): { ok: true; json?: string } | { ok: false; message: string } {
    if (value === undefined) return { ok: true };
    let json: string | undefined;
    try {
      json = JSON.stringify(value);
    } catch {
      return { ok: false, message: `${tool}() returned a value that is not JSON-serializable` };
    }
    if (json === undefined) return { ok: true };
    if (overBytes(json, this.limits.maxValueBytes)) {
      return {
        ok: false,
        message: `${tool}() returned too much data (${utf8Bytes(json)} bytes; the limit is ${this.limits.maxValueBytes})`,
      };
    }
    return { ok: true, json };
  }

  /**
   * Runs `fn` after messages that already arrived have been read. Timers run before I/O in Node's
   * event loop, so after the host itself was busy, a deadline could otherwise fire while the
   * child's `done` / `idle` sits unread in the pipe (setImmediate runs after the poll phase).
   */
  private afterPendingIo(fn: () => void): void {
    setImmediate(fn);
  }

  private protocolError(): void {
    this.child.kill("protocol");
  }

  private onDone(msg: ChildMessage): void {
    // One outcome per action: a second report is never recorded, and the child that sent it is
    // not trusted with the session's next action.
    if (this.ended) return this.protocolError();
    const error = this.toGuestError(msg.error);
    let finalAnswer: unknown = null;
    const isFinal = msg.isFinal === true;
    if (isFinal && typeof msg.finalJson === "string") {
      // The child caps the answer at maxValueBytes; more is a broken or compromised child.
      if (overBytes(msg.finalJson, this.limits.maxValueBytes)) return this.protocolError();
      try {
        finalAnswer = JSON.parse(msg.finalJson);
      } catch {
        return this.protocolError();
      }
    }
    const dropped = typeof msg.dropped === "number" ? msg.dropped : 0;
    const tail = typeof msg.tail === "string" ? msg.tail.slice(-this.limits.maxOutputChars) : "";
    const logs =
      dropped > 0
        ? `${this.head}\n... [${dropped} characters of output truncated] ...\n${tail}`
        : this.head + tail;
    let assembled;
    try {
      assembled = assembleSnapshot({
        built: this.built,
        previous: this.previous,
        shadowable: this.shadowable,
        bindings: msg.bindings,
        limits: this.limits,
      });
    } catch (err) {
      if (err instanceof ProtocolViolation) return this.protocolError();
      throw err;
    }
    const { snapshot, notCarriedOver } = assembled;
    // What the child holds now: the values it reported (new or the same) that were carried over.
    const reports = msg.bindings as Record<string, { kind?: unknown }>;
    for (const [name, value] of Object.entries(snapshot.values)) {
      const kind = Object.hasOwn(reports, name) ? reports[name]?.kind : undefined;
      if (kind === "value" || kind === "same") this.child.kept.set(name, value);
    }
    this.finish({
      ok: error === null,
      logs,
      finalAnswer,
      isFinalAnswer: isFinal,
      error,
      variables: snapshot.values,
      snapshot,
      // Counted here, from the calls the host served: never what the child claims.
      toolCalls: this.calls,
      durationMs: performance.now() - this.started,
      lastValue: typeof msg.lastValue === "string" ? msg.lastValue.slice(0, 2_100) : null,
      notCarriedOver,
    });
    // The child must report `idle` soon (guest code still spinning after final_answer doesn't).
    this.pool.markFinishing(this.child);
    setTimeout(
      () =>
        this.afterPendingIo(() => !this.released && this.child.kill("busy after the action ended")),
      IDLE_GRACE_MS,
    ).unref();
  }

  /** The child's error report, checked and mapped to guest lines. */
  private toGuestError(raw: unknown): GuestError | null {
    if (raw === null || raw === undefined) return null;
    const e = raw as { name?: unknown; message?: unknown; frames?: unknown; compile?: unknown };
    let line: number | null = null;
    if (Array.isArray(e.frames)) {
      for (const f of e.frames.slice(0, MAX_FRAMES)) {
        if (Array.isArray(f) && typeof f[0] === "number" && typeof f[1] === "number") {
          line = this.built.mapLine(f[0], f[1] - 1);
          if (line !== null) break;
        }
      }
    }
    let message = typeof e.message === "string" ? e.message.slice(0, MAX_ERROR_MESSAGE_CHARS) : "";
    // SES's source checks report a position in the generated wrapper: translate it. (Only for
    // the wrapper itself: the same text from a guest's eval() refers to the eval'd source.)
    const rejected = e.compile === true && /^(.*) at <unknown>:(\d+)(\.?.*)$/s.exec(message);
    if (rejected) {
      const guestLine = this.built.mapLine(Number(rejected[2]), Number.MAX_SAFE_INTEGER);
      if (line === null) line = guestLine;
      message = `${rejected[1]}${guestLine === null ? "" : ` on line ${guestLine}`}${rejected[3]}`;
    }
    const name = typeof e.name === "string" && e.name ? e.name.slice(0, 100) : "Error";
    return { name, message, line };
  }

  private onExit(exit: { code: number | null; signal: NodeJS.Signals | null }): void {
    if (this.timer) clearTimeout(this.timer);
    this.released = true;
    if (this.ended) return;
    const reason = this.child.killedBy;
    let error: GuestError;
    if (reason === "aborted") {
      error = { ...ABORTED };
    } else if (reason === "timeout") {
      error = {
        name: "TimeoutError",
        message: `The action did not finish within ${this.limits.timeoutMs} ms and was stopped (infinite loop or too much work?)`,
        line: null,
      };
    } else if (
      /heap out of memory|Allocation failed|out of memory|invalid size error|invalid array length/i.test(
        this.child.stderrTail,
      )
    ) {
      // V8 aborts the process (no catchable error) when the heap limit or an internal size limit
      // is hit, and says so on stderr.
      error = {
        name: "MemoryError",
        message: `The action ran out of memory (limit ${this.limits.maxHeapMb} MB heap) or built a value too large for JavaScript, and was stopped`,
        line: null,
      };
    } else if (
      (exit.signal !== null && CRASH_SIGNALS.has(exit.signal)) ||
      exit.code === 134 ||
      exit.code === 139
    ) {
      // A crash in native code (not a memory limit: V8 would have said so).
      error = {
        name: "SandboxError",
        message: `The sandbox process crashed (${exit.signal ?? `code ${exit.code}`}) and was replaced; nothing of this action was kept`,
        line: null,
      };
    } else if (reason === "protocol") {
      error = {
        name: "SandboxError",
        message: "The sandbox process broke its protocol and was stopped",
        line: null,
      };
    } else {
      error = {
        name: "SandboxError",
        message: `The sandbox process exited unexpectedly (${exit.signal ?? `code ${exit.code}`})`,
        line: null,
      };
    }
    const logs =
      this.head.length > 0
        ? `${this.head}\n... [output after this point was lost: the action was stopped]`
        : "";
    this.finish({ ...failed(this.started, this.previous, error, logs), toolCalls: this.calls });
  }

  private finish(result: ActionResult): void {
    if (this.ended) return;
    this.ended = true;
    this.onFinish?.();
    if (this.timer) clearTimeout(this.timer);
    this.abort.abort(); // in-flight tool calls are told the action is over
    this.queue.length = 0;
    this.resolve(result);
  }

  private releaseChild(): void {
    if (this.released) return;
    this.released = true;
    this.child.onMessage = null;
    this.pool.release(this.child);
  }
}
