// @ts-check
/**
 * The protocol between the host (src/sandbox/child-process.ts, child-protocol.ts, session.ts) and a sandbox child: message
 * shapes, shared constants and the line framing. Both sides import this one module, so a field
 * renamed on one side is a type error on the other (the host is TypeScript; the child checks its
 * JSDoc with tsc's checkJs).
 *
 * Newline-delimited JSON: host -> child on the child's stdin, child -> host on fd 3 (synchronous
 * writes, so a message sent right before a guest busy-loop still arrives).
 */
import { bufferByteLength, jsonStringify } from "./commons.mjs";

/** File descriptor the child writes its messages to. */
export const CHILD_OUT_FD = 3;

/**
 * Arguments the host gives the child after the SES path (`node [flags] child.mjs <ses> [args]`):
 * `pdeathsig` (the kernel kills the child when the host dies: no watchdog thread needed),
 * `code-cache=<file>` (V8 code cache of the SES bundle to load it with), and `make-code-cache`
 * (send the host that cache, base64, in a `code-cache` message before `ready`).
 */
export const CHILD_PDEATHSIG_ARG = "pdeathsig";
export const CHILD_CODE_CACHE_ARG = "code-cache";
export const CHILD_MAKE_CODE_CACHE_ARG = "make-code-cache";
/** `libraries=<file>`: the authorized libraries' bundle to load at start (src/sandbox/libraries.ts). */
export const CHILD_LIBRARIES_ARG = "libraries";
/** What a child writes on stderr, then exits, when a library is refused at load (the host reads it). */
export const LIBRARY_REFUSED_MARK = "codehop-library-refused: ";

/**
 * The child argument `name` in `argv` (after the SES path): true for a bare `name`, the text after
 * `name=` for a valued one, undefined when absent.
 * @param {readonly string[]} argv
 * @param {string} name
 * @returns {string | true | undefined}
 */
export function childArg(argv, name) {
  for (let i = 3; i < argv.length; i++) {
    const a = argv[i];
    if (a === name) return true;
    if (a.startsWith(`${name}=`)) return a.slice(name.length + 1);
  }
  return undefined;
}

/** All tool arguments of one action together may use this many times `maxValueBytes`. */
export const TOTAL_ARGS_FACTOR = 8;

/** All carried-over values together may use this many times `maxValueBytes`. */
export const SNAPSHOT_BUDGET_FACTOR = 4;

/**
 * Size of a protocol text in UTF-8 bytes: the unit of every size limit (`maxValueBytes`, the
 * argument and snapshot budgets), measured the same way by the child and the host ("é" is 2
 * bytes, an emoji 4, while String#length counts 1 and 2).
 * @param {string} text
 * @returns {number}
 */
export function utf8Bytes(text) {
  return bufferByteLength(text, "utf8");
}

/**
 * Whether `text` is over `maxBytes` in UTF-8 ({@link utf8Bytes}), without measuring it when its
 * length alone decides (a UTF-16 code unit is 1 to 3 bytes).
 * @param {string} text
 * @param {number} maxBytes
 * @returns {boolean}
 */
export function overBytes(text, maxBytes) {
  if (text.length > maxBytes) return true;
  if (text.length * 3 <= maxBytes) return false;
  return utf8Bytes(text) > maxBytes;
}

/** Longest REPL echo of the last expression's value (characters). */
export const LAST_VALUE_CHARS = 2_000;

/**
 * The per-action limits the child enforces itself (the host enforces time and memory).
 * @typedef {object} ChildLimits
 * @property {number} timeoutMs
 * @property {number} maxHeapMb
 * @property {number} maxOutputChars
 * @property {number} maxToolCalls
 * @property {number} maxConcurrentToolCalls
 * @property {number} maxValueBytes
 * @property {number} maxValueDepth
 */

/**
 * What the guest may use beyond plain ECMAScript.
 * @typedef {object} ChildCapabilities
 * @property {boolean} mathRandom
 * @property {boolean} dateNow
 * @property {boolean} floatArrays
 * @property {boolean} intl
 */

/**
 * Host -> child: run one action.
 * @typedef {object} RunMessage
 * @property {"run"} t
 * @property {number} id action id (every later message of the action carries it)
 * @property {string} source the wrapper built by transform.ts: `(function (restore, decl, ref) {...})`
 * @property {string[]} names persistent binding names, in the order the wrapper's `read()` returns them
 * @property {Record<string, unknown>} restore values to restore that the child does not hold, by
 *   name (written into the line as the host's JSON text: parsed once, with the message)
 * @property {string[]} keep names whose values the child holds from its session's previous action
 *   (reported "value" or "same" then, and kept since): restored from what it holds
 * @property {string[]} mentioned binding names the action's code (or a declaration it restores)
 *   mentions; a restored binding not among them cannot change, and is reported "same" unread
 * @property {string[]} tools guest-visible tool names
 * @property {Record<string, string>} unserializable notes of names left unbound (for ReferenceError hints)
 * @property {ChildLimits} limits
 * @property {ChildCapabilities} capabilities
 */

/**
 * Host -> child: the outcome of a tool call.
 * @typedef {object} ResultMessage
 * @property {"result"} t
 * @property {number} id
 * @property {number} callIndex
 * @property {boolean} ok
 * @property {string} [json] the result as JSON (absent for undefined)
 * @property {string} [message] the error message when not ok
 */

/** @typedef {RunMessage | ResultMessage | { t: "ping" }} HostMessage */

/**
 * What an action left in one persistent binding: a new value (its JSON), the value it was restored
 * with ("same": nothing crosses the boundary), a declaration, another name for the declaration
 * another binding holds ("alias", `of` that binding), undefined, or why it cannot be carried over.
 * @typedef {{ kind: "value", json: string } | { kind: "same" } | { kind: "decl" } | { kind: "alias", of: string } | { kind: "undefined" } | { kind: "unserializable", reason: string }} BindingReport
 */

/**
 * A binding report as a `done` message carries it: a value's JSON is the line's attachment of that
 * index (see {@link encodeLineWithAttachments}); the host puts it back as `json`.
 * @typedef {Exclude<BindingReport, { kind: "value" }> | { kind: "value", attachment: number }} WireBindingReport
 */

/**
 * An error as the child reports it: frames are [line, column] positions in the wrapper source.
 * @typedef {object} ReportedError
 * @property {string} name
 * @property {string} message
 * @property {[number, number][]} frames
 * @property {boolean} [compile] the wrapper never ran (it did not compile, or its setup failed)
 */

/**
 * Child -> host: the action ended (its result).
 * @typedef {object} DoneMessage
 * @property {"done"} t
 * @property {number} id
 * @property {ReportedError | null} error
 * @property {boolean} isFinal
 * @property {string | null} finalJson
 * @property {string} tail output kept after the streamed head
 * @property {number} dropped output characters dropped between head and tail
 * @property {Record<string, WireBindingReport>} bindings (values attached to the line)
 * @property {number} toolCalls
 * @property {string | null} lastValue
 */

/**
 * @typedef {{ t: "ready", codeCache: "used" | "rejected" | "none" }
 *   | { t: "code-cache", data: string }
 *   | { t: "log", id: number, text: string }
 *   | { t: "call", id: number, callIndex: number, tool: string, argsJson: string }
 *   | DoneMessage
 *   | { t: "idle", id: number, heapUsed: number }
 *   | { t: "fatal", message: string }
 *   | { t: "pong" }} ChildMessageShape
 */

/**
 * One message as a protocol line.
 * @param {HostMessage | ChildMessageShape} message
 * @returns {string}
 */
export function encodeLine(message) {
  return `${jsonStringify(message)}\n`;
}

/**
 * A `run` message as a protocol line, with the values to restore spliced in as JSON text the host
 * already has (the values are not serialized again, and the child parses them once, with the line).
 * @param {Omit<RunMessage, "restore">} message
 * @param {[name: string, json: string][]} restore
 * @returns {string}
 */
export function encodeRunLine(message, restore) {
  const head = jsonStringify(message);
  let values = "";
  for (let i = 0; i < restore.length; i++)
    values += `${i ? "," : ""}${jsonStringify(restore[i][0])}:${restore[i][1]}`;
  return `${head.slice(0, -1)},"restore":{${values}}}\n`;
}

/**
 * A message as a protocol line with JSON texts attached after it, each after a tab: the values a
 * `done` reports travel as the text they are, not escaped into a string of the message (which
 * cost the child an escaping pass and the host a second parse of a megabyte). JSON text never
 * holds a raw tab, so the message's first tab ends it. The message names each attachment by its
 * index; {@link splitAttachments} takes them apart.
 * @param {ChildMessageShape} message
 * @param {string[]} attachments JSON texts
 * @returns {string}
 */
export function encodeLineWithAttachments(message, attachments) {
  let line = jsonStringify(message);
  for (let i = 0; i < attachments.length; i++) line += `\t${attachments[i]}`;
  return `${line}\n`;
}

/**
 * A protocol line's message text and its attachments (see {@link encodeLineWithAttachments}).
 * @param {string} line
 * @returns {{ message: string, attachments: string[] }}
 */
export function splitAttachments(line) {
  if (line.indexOf("\t") < 0) return { message: line, attachments: [] };
  const parts = line.split("\t");
  return { message: parts[0], attachments: parts.slice(1) };
}

/** Splits a stream of text into protocol lines. */
export class LineBuffer {
  /** @param {number} maxLineChars a line longer than this is a protocol error */
  constructor(maxLineChars) {
    /**
     * The unfinished line's chunks: joined once, when its end arrives (a 1 MB line comes in 64 KB
     * chunks; appending each to one string and searching it again was quadratic).
     * @private @type {string[]}
     */
    this.parts = [];
    /** @private */
    this.partsLength = 0;
    /** @private */
    this.maxLineChars = maxLineChars;
  }

  /**
   * Appends `chunk`; returns the complete lines it finished (empty lines skipped), or null when a
   * line grew past the limit.
   * @param {string} chunk
   * @returns {string[] | null}
   */
  push(chunk) {
    /** @type {string[]} */
    const lines = [];
    let start = 0;
    for (let nl = chunk.indexOf("\n"); nl >= 0; nl = chunk.indexOf("\n", start)) {
      let line = chunk.slice(start, nl);
      if (this.parts.length > 0) {
        this.parts.push(line);
        line = this.parts.join("");
        this.parts = [];
        this.partsLength = 0;
      }
      if (line.length > this.maxLineChars) return null;
      if (line.length > 0) lines.push(line);
      start = nl + 1;
    }
    if (start < chunk.length) {
      this.parts.push(start > 0 ? chunk.slice(start) : chunk);
      this.partsLength += chunk.length - start;
      if (this.partsLength > this.maxLineChars) return null;
    }
    return lines;
  }
}
