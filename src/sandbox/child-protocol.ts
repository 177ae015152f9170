/**
 * The host's side of the protocol with one child, below the level of actions: its output read as
 * messages (a line that is not a JSON object with a string `t` breaks the protocol), and the
 * start-up exchange — the SES code cache (only from a child asked for one, once, before `ready`),
 * `ready`, then the warm-up action — decided here as steps the child's process object applies
 * (child-process.ts). An action's messages are session.ts's. Message shapes and the framing are
 * child/protocol.mjs, shared with the child.
 */
import { DEFAULT_CAPABILITIES, DEFAULT_LIMITS } from "./limits.ts";
import {
  encodeRunLine,
  splitAttachments,
  type HostMessage,
  type LineBuffer,
} from "./child/protocol.mjs";
import { buildAction } from "./transform.ts";

/** Message from a child (already JSON-parsed; validated by the consumer). */
export type ChildMessage = { t: string; [key: string]: unknown };

/** Largest single protocol line accepted from a child (guards host memory against a broken child). */
export const MAX_LINE_CHARS = 64 * 1024 * 1024;

/**
 * The messages `chunk` completes, in order, up to the first line that breaks the protocol
 * (`broken`: a line over {@link MAX_LINE_CHARS}, not JSON, or not a message object).
 */
export function readMessages(
  lines: LineBuffer,
  chunk: string,
): { messages: ChildMessage[]; broken: boolean } {
  const complete = lines.push(chunk);
  if (complete === null) return { messages: [], broken: true };
  const messages: ChildMessage[] = [];
  for (const line of complete) {
    const { message, attachments } = splitAttachments(line);
    let msg: ChildMessage;
    try {
      msg = JSON.parse(message);
    } catch {
      return { messages, broken: true };
    }
    if (typeof msg !== "object" || msg === null || typeof msg.t !== "string")
      return { messages, broken: true };
    if (attachments.length > 0) {
      // Only a `done` carries attachments: its values, which go back where the report names them.
      if (msg.t !== "done" || !attachValues(msg, attachments)) return { messages, broken: true };
    }
    messages.push(msg);
  }
  return { messages, broken: false };
}

/**
 * Puts a `done` line's attachments back into its bindings (`{ kind: "value", attachment: i }` becomes
 * `{ kind: "value", json }`), each used once; false when they do not match.
 */
function attachValues(msg: ChildMessage, attachments: string[]): boolean {
  const bindings = msg.bindings;
  if (bindings === null || typeof bindings !== "object") return false;
  const used = new Set<number>();
  for (const report of Object.values(bindings as Record<string, unknown>)) {
    if (report === null || typeof report !== "object") continue;
    const r = report as { kind?: unknown; attachment?: unknown; json?: unknown };
    if (r.kind !== "value" || !("attachment" in r)) continue;
    const i = r.attachment;
    if (typeof i !== "number" || !Number.isInteger(i) || i < 0 || i >= attachments.length)
      return false;
    if (used.has(i)) return false;
    used.add(i);
    r.json = attachments[i];
    delete r.attachment;
  }
  return used.size === attachments.length;
}

/**
 * The action every child runs, through the protocol, before it counts as ready: a child's first
 * action otherwise pays ~10 ms more than later ones (V8 compiles and tunes the action path: the
 * run message, the wrapper, a tool call and its result, logging, the variables report). It leaves
 * a small value (the copy's path). A large value's copy is not warmed up: that cost every run's
 * process 20-40 ms of CPU for ~25 ms less in a first action that leaves ~1 MB (docs/sandbox.md,
 * "How a child starts"). It runs framework code only, with no session (action id 0,
 * which no real action has), in a compartment of its own as every action does; its values are not
 * kept (the host's record of what the child holds stays empty, so the first real action restores
 * nothing from it).
 */
const WARMUP_CODE =
  'const r = await warmup("a", { n: 1, list: [1, "x"] });\nconst lines = [r, `${r.length}`].map((x) => JSON.stringify(x));\nconsole.log(lines.join(" "), { n: lines.length });\nconst records = [{ id: 1, name: "item 1", score: 0.5, tags: ["x", "y"], ok: true }];';
const WARMUP_ID = 0;
let warmupLine: string | undefined;

/** The warm-up action's `run` line (built once). */
export function warmupRunLine(): string {
  if (warmupLine) return warmupLine;
  const built = buildAction(WARMUP_CODE, undefined);
  if ("error" in built) throw new Error(`sandbox warm-up action: ${built.error.message}`);
  warmupLine = encodeRunLine(
    {
      t: "run",
      id: WARMUP_ID,
      source: built.source,
      names: built.names,
      keep: [],
      mentioned: built.names.filter((n) => built.mentioned.has(n)),
      tools: ["warmup"],
      unserializable: {},
      limits: { ...DEFAULT_LIMITS },
      capabilities: { ...DEFAULT_CAPABILITIES },
    },
    [],
  );
  return warmupLine;
}

/** Whether a child loaded SES with the code cache it was given (reported with `ready`). */
export type CodeCacheUse = "used" | "rejected" | "none";

/** What the host knows of a child's start-up when a message arrives. */
export interface StartupState {
  /** Asked to send its SES code cache before `ready`. */
  readonly makesCodeCache: boolean;
  /** It sent one already. */
  readonly codeCacheSent: boolean;
  /** Set when it reported `ready` (null before). */
  readonly codeCache: CodeCacheUse | null;
  /** The warm-up action ended: messages now belong to the running action. */
  readonly ready: boolean;
}

/** What the host does with one message of a child (see {@link startupStep}). */
export type StartupStep =
  /** The running action's message (the child is ready). */
  | { step: "deliver" }
  /** Breaks the protocol: the child is killed. */
  | { step: "violation" }
  /** The SES code cache the child was asked for (base64): stored. */
  | { step: "store-code-cache"; data: string }
  /** The child locked down: the warm-up action is sent. */
  | { step: "warm-up"; codeCache: CodeCacheUse }
  /** The warm-up action's tool call, answered. */
  | { step: "answer"; message: HostMessage }
  /** The warm-up action failed: the child is killed. */
  | { step: "warm-up-failed" }
  /** The warm-up action ended: the child is ready for actions. */
  | { step: "ready" }
  /** Nothing to do. */
  | { step: "ignore" };

/** The step `msg` calls for, given the child's start-up so far. */
export function startupStep(state: StartupState, msg: ChildMessage): StartupStep {
  if (msg.t === "code-cache") {
    // Before `ready`, so before any guest code ran in this process (see sesCodeCaches); only from
    // the child asked for it, and once: anything else breaks the protocol.
    if (
      !state.makesCodeCache ||
      state.codeCacheSent ||
      state.codeCache !== null ||
      typeof msg.data !== "string"
    )
      return { step: "violation" };
    return { step: "store-code-cache", data: msg.data };
  }
  if (state.ready) return { step: "deliver" };
  if (msg.t === "ready")
    return {
      step: "warm-up",
      codeCache:
        msg.codeCache === "used" ? "used" : msg.codeCache === "rejected" ? "rejected" : "none",
    };
  if (msg.t === "call" && msg.id === WARMUP_ID)
    return {
      step: "answer",
      message: {
        t: "result",
        id: WARMUP_ID,
        callIndex: msg.callIndex as number,
        ok: true,
        json: '"ok"',
      },
    };
  if (msg.t === "done" && msg.id === WARMUP_ID)
    return msg.error ? { step: "warm-up-failed" } : { step: "ready" };
  return { step: "ignore" };
}
