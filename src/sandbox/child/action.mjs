// @ts-check
/**
 * One code action: a fresh Compartment with the action's endowments (console, print,
 * final_answer, the tools), the wrapper built by the host evaluated in it, tool calls relayed to
 * the host, output captured with a head/tail cap, and the outcome reported once.
 *
 * Why this file is long: every step of an action in the child (start, tool relay, output, the
 * bindings read back, the one report) works on one `act` record with the built-ins commons.mjs
 * captured; what stands alone already has its module (copy, format, errors, io, libraries).
 */
import {
  Error,
  Map,
  Object,
  Promise,
  RangeError,
  Set,
  String,
  apply,
  create,
  defineProperty,
  floor,
  functionBind,
  hasOwn,
  isArray,
  jsonParse,
  heapUsed,
  jsonStringify,
  keys,
  min,
  setImmediate,
} from "./commons.mjs";
import { CopyError, toJson, variableNote } from "./copy.mjs";
import { describeError, describeReference, setMessage } from "./errors.mjs";
import { formatSpecifiers, formatValue } from "./format.mjs";
import { send, sendLine } from "./io.mjs";
import { libraries, libraryNames } from "./libraries.mjs";
import {
  Compartment,
  InitialDate,
  InitialMath,
  floatArrays,
  harden,
  intlCapability,
} from "./lockdown.mjs";
import {
  LAST_VALUE_CHARS,
  SNAPSHOT_BUDGET_FACTOR,
  encodeLineWithAttachments,
  TOTAL_ARGS_FACTOR,
  utf8Bytes,
} from "./protocol.mjs";

/** @typedef {import("./protocol.mjs").RunMessage} RunMessage */
/** @typedef {import("./protocol.mjs").ResultMessage} ResultMessage */
/** @typedef {import("./protocol.mjs").ReportedError} ReportedError */
/** @typedef {import("./protocol.mjs").BindingReport} BindingReport */
/** @typedef {import("./protocol.mjs").WireBindingReport} WireBindingReport */
/** @typedef {import("./protocol.mjs").ChildLimits} ChildLimits */

/**
 * A tool call waiting for the host's result.
 * @typedef {object} PendingCall
 * @property {(value: unknown) => void} resolve
 * @property {(error: unknown) => void} reject
 * @property {Error} site an error created at the call, so an uncaught tool error points at the guest line
 */

/**
 * State of the running action.
 * @typedef {object} Action
 * @property {number} id
 * @property {boolean} ended the outcome was reported; later logs and calls are dropped
 * @property {boolean} settled the guest's run() promise settled
 * @property {number} calls tool calls made (the next call index)
 * @property {number} argBytes JSON bytes of all tool arguments so far
 * @property {number} inflight tool calls sent and not answered
 * @property {Map<number, PendingCall>} pending
 * @property {Map<string, unknown>} declared functions/classes recorded by the wrapper's decl(), by name
 * @property {number} headLeft characters of output still streamed as they come
 * @property {number} tailMax characters of output kept at the end
 * @property {string} tail
 * @property {number} dropped
 * @property {Record<string, string>} unserializable
 * @property {(() => unknown[]) | null} read the wrapper's reader of the persistent bindings
 * @property {string[]} names
 * @property {Map<string, KeptValue>} restored the values restored for this action, by name
 * @property {Set<string>} mentioned names the action can touch (others are restored values unread)
 * @property {ChildLimits} limits
 * @property {Error} [limitError] the one error every refused call over the limit rejects with
 * @property {{ outcome: Outcome, reusable: boolean, attempts: number } | null} [unreported] an
 *   outcome finish() could not report yet (see flush)
 */

/**
 * How an action ended: an error, a final answer (copied, or still to copy when final_answer ran
 * out of stack), or the value of its last expression.
 * @typedef {{ error: ReportedError } | { final: string } | { finalValue: unknown } | { value: unknown }} Outcome
 */

/** @typedef {(ctor: string, message: string, name?: string) => Error} GuestErrorFactory */

/** @type {Action | null} */
let current = null;

/**
 * A value the child holds for its session between actions: parsed from JSON (so nothing but its
 * binding refers to it) and never touched by guest code since, with its JSON text once known.
 * @typedef {{ value: unknown, json: string | null }} KeptValue
 */

/**
 * The values this process holds for its session (a process serves one session): what its last
 * action left, as the host was told. The host's `keep` list says which of them the next action
 * restores; the others are dropped.
 * @type {Map<string, KeptValue>}
 */
let kept = new Map();

/**
 * Helpers made once, from guest-compartment intrinsics (shared by every compartment): guest-side
 * errors, and what the wrapper calls for literals SES would reject as text (see
 * src/sandbox/ses-escape.ts) — a RegExp from its pattern, and a tagged template's strings array,
 * one per call site of the action.
 */
const helpers = (() => {
  const c = new Compartment({ __options__: true, globals: {}, name: "codehop-helpers" });
  harden(c.globalThis);
  /** @type {GuestErrorFactory} */
  const makeError = c.evaluate(
    "(ctor, message, name) => { const C = ctor === 'TypeError' ? TypeError : ctor === 'RangeError' ? RangeError : ctor === 'ReferenceError' ? ReferenceError : Error; const e = new C(message); if (name) Object.defineProperty(e, 'name', { value: name, writable: true, configurable: true, enumerable: false }); return e; }",
  );
  /** @type {(pattern: string, flags: string) => RegExp} */
  const regexp = harden(c.evaluate("(pattern, flags) => new RegExp(pattern, flags)"));
  /** @type {() => (site: number, cooked: unknown[], raw: string[]) => TemplateStringsArray} */
  const newTemplateCache = c.evaluate(
    "() => { const sites = new Map(); return (site, cooked, raw) => { let strings = sites.get(site); if (!strings) { strings = Object.freeze(Object.defineProperty([...cooked], 'raw', { value: Object.freeze([...raw]) })); sites.set(site, strings); } return strings; }; }",
  );
  return { makeError: harden(makeError), regexp, newTemplateCache };
})();

/** The action running now (null between actions). */
export function currentAction() {
  return current;
}

// A fresh one each time: reactions a guest attaches die with its action instead of piling up on
// one shared promise for the life of the process.
const neverSettles = () => harden(new Promise(() => {}));

/**
 * A hardened, guest-visible stand-in for one of the child's functions: a bound function, which V8
 * prints as `function () { [native code] }` (in String(f) and in its own error messages, e.g.
 * "Cannot assign to read only property 'call' of function ..."), so the child's source never
 * reaches the guest. Its `name` is the guest-visible name.
 * @param {(...args: any[]) => unknown} fn
 * @param {string} name
 */
function opaqueFunction(fn, name) {
  const bound = apply(functionBind, fn, [undefined]);
  defineProperty(bound, "name", {
    value: name,
    writable: false,
    enumerable: false,
    configurable: false,
  });
  return harden(bound);
}

/**
 * Starts one action (the host's `run` message).
 * @param {RunMessage} msg
 */
export function startAction(msg) {
  const limits = msg.limits;
  const caps = msg.capabilities;
  const half = floor(limits.maxOutputChars / 2);
  /** @type {Action} */
  const act = {
    id: msg.id,
    ended: false,
    settled: false,
    calls: 0,
    argBytes: 0,
    inflight: 0,
    pending: new Map(),
    declared: new Map(),
    headLeft: half,
    tailMax: limits.maxOutputChars - half,
    tail: "",
    dropped: 0,
    unserializable: msg.unserializable || {},
    read: null,
    names: msg.names,
    restored: new Map(),
    mentioned: new Set(msg.mentioned),
    limits,
  };
  current = act;

  /**
   * @param {string} prefix
   * @param {string} name
   */
  const log = (prefix, name) =>
    opaqueFunction((/** @type {unknown[]} */ ...args) => {
      if (act.ended) return;
      const budget = limits.maxOutputChars + 1;
      let line = prefix;
      let i = 0;
      if (typeof args[0] === "string" && args.length > 1 && args[0].includes("%")) {
        const formatted = formatSpecifiers(args, budget);
        line += formatted.text;
        i = formatted.consumed;
      }
      for (; i < args.length; i++) {
        if (i > 0) line += " ";
        line += formatValue(args[i], budget);
        if (line.length > budget) break;
      }
      appendLog(act, `${line}\n`);
    }, name);

  /** @type {GuestErrorFactory | null} */
  let makeError = null;
  /** @type {GuestErrorFactory} */
  const guestError = (ctor, message, name) =>
    /** @type {GuestErrorFactory} */ (makeError)(ctor, message, name || "");

  /** @param {unknown[]} args */
  const finalAnswer = (...args) => {
    if (act.ended) return neverSettles();
    /** @type {string | null} */
    let json = null;
    try {
      json = toJson(args[0], limits.maxValueBytes, limits.maxValueDepth, "final_answer value");
    } catch (err) {
      if (err instanceof CopyError) throw guestError("TypeError", err.message);
      // Out of stack (final_answer called at the bottom of a deep recursion): finish() copies
      // the value again from a fresh stack instead of losing the answer.
    }
    finish(act, json === null ? { finalValue: args[0] } : { final: json });
    // The action is over: code after `await final_answer(x)` never runs.
    return neverSettles();
  };

  /** @type {Record<string, unknown>} */
  const globals = {
    console: harden({
      log: log("", "log"),
      info: log("", "info"),
      debug: log("", "debug"),
      dir: log("", "dir"),
      table: log("", "table"),
      trace: log("", "trace"),
      warn: log("[warn] ", "warn"),
      error: log("[error] ", "error"),
    }),
    print: log("", "print"),
    final_answer: opaqueFunction(finalAnswer, "final_answer"),
  };
  if (caps.mathRandom) globals.Math = InitialMath;
  if (caps.dateNow) globals.Date = InitialDate;
  if (caps.floatArrays) Object.assign(globals, floatArrays);
  if (caps.intl) {
    const intl = intlCapability();
    if (intl) globals.Intl = intl;
  }
  for (const tool of msg.tools) {
    globals[tool] = makeTool(act, tool, guestError);
  }
  // Authorized libraries: each as its global, and `require(name)` (what the transform makes of
  // `import ... from "name"` and `import("name")`).
  const libraryGlobals = keys(libraries.byGlobal);
  if (libraryGlobals.length) {
    for (const g of libraryGlobals) globals[g] = libraries.byGlobal[g];
    globals.require = opaqueFunction((/** @type {unknown} */ spec) => {
      if (typeof spec === "string" && hasOwn(libraries.byName, spec)) return libraries.byName[spec];
      throw guestError(
        "Error",
        `Cannot find module ${jsonStringify(String(spec))}: the sandbox has no Node modules; the libraries you can use are ${libraryNames().join(", ")}`,
      );
    }, "require");
  }

  /** @type {() => Promise<unknown>} */
  let run;
  try {
    const compartment = new Compartment({
      __options__: true,
      globals: harden(globals),
      name: "codehop-action",
    });
    harden(compartment.globalThis);
    makeError = helpers.makeError;
    const template = harden(helpers.newTemplateCache());
    /** @type {(...args: unknown[]) => { read: () => unknown[], run: () => Promise<unknown> }} */
    let factory;
    try {
      factory = compartment.evaluate(msg.source);
    } catch (err) {
      // The wrapper did not compile (V8 or SES refused it): nothing of the action ran.
      finish(act, { error: { ...describeError(err, act), frames: [], compile: true } });
      return;
    }
    const restore = restoreValues(msg, act);
    const decl = harden((/** @type {string} */ name, /** @type {unknown} */ fn) => {
      act.declared.set(name, fn);
      return fn;
    });
    const guestGlobal = /** @type {Record<string, unknown>} */ (compartment.globalThis);
    // A free name the guest reads: the global scope's own binding of it, else a ReferenceError
    // (`soft`, for `typeof`: undefined). Only own properties: the global object inherits
    // `__proto__`, `toString`, `constructor`, ... from Object.prototype, which are no binding.
    const ref = harden((/** @type {unknown} */ name, /** @type {unknown} */ soft) => {
      if (typeof name === "string" && hasOwn(guestGlobal, name)) return guestGlobal[name];
      if (soft === true) return undefined;
      throw describeReference(
        /** @type {GuestErrorFactory} */ (makeError)(
          "ReferenceError",
          `${String(name)} is not defined`,
        ),
        act,
      );
    });
    const api = factory(restore, decl, ref, helpers.regexp, template);
    act.read = api.read;
    run = api.run;
  } catch (err) {
    // Nothing of the guest's code ran (the compartment or the wrapper's setup failed).
    finish(act, { error: { ...describeError(err, act), frames: [], compile: true } });
    return;
  }
  let p;
  try {
    p = run();
  } catch (err) {
    p = Promise.reject(err);
  }
  p.then(
    (boxed) => {
      act.settled = true;
      // Top-level returns are boxed in a one-element array by the transform (see boxTopLevelReturns).
      if (act.ended) flush(act);
      else finish(act, { value: isArray(boxed) ? boxed[0] : undefined });
    },
    (err) => {
      act.settled = true;
      if (act.ended) flush(act);
      else finish(act, { error: describeError(err, act) });
    },
  );
  checkStall(act);
}

/**
 * The values the wrapper restores: those the host lists in `keep` from what this process holds,
 * the others as sent. Records each in `act.restored`, with its JSON text when the action mentions
 * it (taken now, before guest code runs: "same" is then decided by comparing texts).
 * @param {RunMessage} msg
 * @param {Action} act
 * @returns {Record<string, unknown>}
 */
function restoreValues(msg, act) {
  const held = kept;
  kept = new Map(); // until this action's report says what is held next
  /** @type {Record<string, unknown>} */
  const restore = create(null);
  for (const name of msg.keep) {
    const entry = held.get(name);
    if (!entry)
      throw new Error(`the host's keep list names ${name}, which this process does not hold`);
    act.restored.set(name, entry);
    restore[name] = entry.value;
  }
  for (const name of keys(msg.restore)) {
    const value = msg.restore[name];
    act.restored.set(name, { value, json: null });
    restore[name] = value;
  }
  for (const name of msg.mentioned) {
    const entry = act.restored.get(name);
    if (entry && entry.json === null)
      entry.json = /** @type {string} */ (jsonStringify(entry.value));
  }
  return restore;
}

/**
 * Captures guest output: the head is streamed at once (it survives a hang or crash), the rest
 * keeps only its tail.
 * @param {Action} act
 * @param {string} text
 */
function appendLog(act, text) {
  if (act.headLeft > 0) {
    const head = text.length <= act.headLeft ? text : text.slice(0, act.headLeft);
    act.headLeft -= head.length;
    send({ t: "log", id: act.id, text: head });
    text = text.slice(head.length);
    if (text.length === 0) return;
  }
  const keep = text.length > act.tailMax ? text.slice(text.length - act.tailMax) : text;
  act.dropped += text.length - keep.length;
  const combined = act.tail + keep;
  if (combined.length > act.tailMax) {
    act.dropped += combined.length - act.tailMax;
    act.tail = combined.slice(combined.length - act.tailMax);
  } else act.tail = combined;
}

/**
 * The guest-visible function for one tool: copies the arguments out as JSON, assigns the call
 * index synchronously (in call order), and returns a promise the host's result settles.
 * @param {Action} act
 * @param {string} tool
 * @param {GuestErrorFactory} guestError
 */
function makeTool(act, tool, guestError) {
  /** @param {unknown[]} args */
  const fn = (...args) => {
    if (act.ended)
      return Promise.reject(
        guestError("Error", `${tool}() was called after the action ended`, "ToolError"),
      );
    if (act.calls >= act.limits.maxToolCalls) {
      // One error object per action: a flood of refused calls must stay cheap.
      act.limitError ??= guestError(
        "Error",
        `Tool call limit reached: at most ${act.limits.maxToolCalls} tool calls per action`,
        "ToolError",
      );
      return Promise.reject(act.limitError);
    }
    // Trailing undefined arguments are just omitted optional parameters.
    let n = args.length;
    while (n > 0 && args[n - 1] === undefined) n--;
    let argsJson;
    try {
      /** @type {string[]} */
      const parts = [];
      let budget = act.limits.maxValueBytes;
      for (let i = 0; i < n; i++) {
        const part = toJson(
          args[i],
          budget,
          act.limits.maxValueDepth,
          `argument ${i + 1} of ${tool}()`,
        );
        budget -= utf8Bytes(part) + 1;
        parts.push(part);
      }
      argsJson = `[${parts.join(",")}]`;
    } catch (err) {
      return Promise.reject(
        guestError(
          "TypeError",
          err instanceof CopyError ? err.message : `arguments of ${tool}() could not be copied`,
        ),
      );
    }
    // Bounds what one action can make the host hold in queued tool arguments (UTF-8 bytes, as the
    // host counts them).
    const argBytes = utf8Bytes(argsJson);
    if (act.argBytes + argBytes > act.limits.maxValueBytes * TOTAL_ARGS_FACTOR) {
      return Promise.reject(
        guestError(
          "Error",
          `Tool arguments of this action exceed ${act.limits.maxValueBytes * TOTAL_ARGS_FACTOR} bytes in total`,
          "ToolError",
        ),
      );
    }
    act.argBytes += argBytes;
    // Assigned here, synchronously, in call order: deterministic code gets deterministic indexes.
    const callIndex = act.calls++;
    act.inflight++;
    // Created now so an uncaught tool error points at the guest line that made the call.
    const site = guestError("Error", "", "ToolError");
    return new Promise((resolve, reject) => {
      act.pending.set(callIndex, { resolve, reject, site });
      send({ t: "call", id: act.id, callIndex, tool, argsJson });
    });
  };
  return opaqueFunction(fn, tool);
}

/**
 * The host's result of a tool call (ignored when the action or the call is over).
 * @param {ResultMessage} msg
 */
export function deliverResult(msg) {
  const act = current;
  if (!act || act.id !== msg.id || act.ended) return; // late result of an ended action
  const p = act.pending.get(msg.callIndex);
  if (!p) return;
  act.pending.delete(msg.callIndex);
  act.inflight--;
  if (msg.ok) {
    // A fresh copy, private to the guest (JSON.parse yields only shared, frozen intrinsics as prototypes).
    p.resolve(msg.json === undefined ? undefined : jsonParse(msg.json));
  } else {
    setMessage(p.site, `${msg.message}`);
    p.reject(p.site);
  }
  checkStall(act);
}

/**
 * If nothing can ever resume the guest (no tool call in flight, no timers exist), ends the action.
 * @param {Action} act
 */
function checkStall(act) {
  if (act.inflight !== 0) return;
  setImmediate(() => {
    if (act.ended) flush(act);
    else if (!act.settled && act.inflight === 0) {
      finish(act, {
        error: {
          name: "Error",
          message:
            "The code is waiting for a promise that can never settle (no tool call is pending and there are no timers)",
          frames: [],
        },
      });
    }
  });
}

/**
 * What the action left in each persistent binding: a new JSON value, "same" (the value it was
 * restored with: a binding the action does not mention is not even read, one it mentions is
 * compared as JSON text), a declaration, undefined, or why the value cannot be carried over. New
 * values together are capped (the host checks the snapshot's exact budget).
 * @param {Action} act
 * @returns {Record<string, BindingReport>}
 */
function captureBindings(act) {
  // No prototype: a binding named __proto__ is an ordinary key here (the host refuses it, with a note).
  /** @type {Record<string, BindingReport>} */
  const out = create(null);
  if (!act.read) return out;
  let values;
  try {
    values = act.read();
  } catch (err) {
    // Out of stack (the action ended at the bottom of a deep recursion; how much stack reading the
    // bindings needs depends on what V8 has compiled by then): finish() reports again from a fresh
    // stack instead of reporting no bindings.
    if (err instanceof RangeError) throw err;
    return out;
  }
  const { maxValueBytes, maxValueDepth } = act.limits;
  let budget = maxValueBytes * SNAPSHOT_BUDGET_FACTOR;
  // Functions and classes each held by the binding they were declared as: another binding holding
  // one (`const alias = helper`) is reported as another name for it.
  /** @type {Map<unknown, string>} */
  const declaredAs = new Map();
  /** @type {Map<unknown, string>} */
  const declaredFunctions = new Map();
  for (const [declaredName, fn] of act.declared) declaredFunctions.set(fn, declaredName);
  for (let i = 0; i < act.names.length; i++) {
    const v = values[i];
    if (typeof v === "function" && act.declared.get(act.names[i]) === v && !declaredAs.has(v))
      declaredAs.set(v, act.names[i]);
  }
  for (let i = 0; i < act.names.length; i++) {
    const name = act.names[i];
    const v = values[i];
    const restored = act.restored.get(name);
    const declaredName = typeof v === "function" ? declaredAs.get(v) : undefined;
    if (v === undefined) out[name] = { kind: "undefined" };
    else if (declaredName === name) out[name] = { kind: "decl" };
    else if (declaredName !== undefined) out[name] = { kind: "alias", of: declaredName };
    else if (typeof v === "function" && declaredFunctions.has(v))
      out[name] = {
        kind: "unserializable",
        reason: `it is another name for ${declaredFunctions.get(v)}, which is not carried over (that name holds something else now)`,
      };
    else if (restored && !act.mentioned.has(name) && restored.value === v)
      out[name] = { kind: "same" };
    else {
      try {
        const json = toJson(v, min(maxValueBytes, budget), maxValueDepth, name, true);
        if (restored && restored.json === json) out[name] = { kind: "same" };
        else {
          budget -= utf8Bytes(json);
          out[name] = { kind: "value", json };
        }
      } catch (err) {
        // Out of stack: finish() captures everything again from a fresh stack.
        if (!(err instanceof CopyError)) throw err;
        out[name] = { kind: "unserializable", reason: variableNote(name, err.message) };
      }
    }
  }
  return out;
}

/**
 * What this process holds for its session after an action: every binding reported "value" or
 * "same". Values the action may have touched are parsed again from their JSON (guest code left
 * running after the report — a promise chain, code after final_answer — may still change the live
 * ones); values it did not mention are kept as they are.
 * @param {Action} act
 * @param {Record<string, BindingReport>} bindings
 */
function keepValues(act, bindings) {
  /** @type {Map<string, KeptValue>} */
  const next = new Map();
  // (The host's warm-up action, id 0, reports none: it ran the copy only to have V8 compile it.)
  for (const name of act.id === 0 ? [] : keys(bindings)) {
    const b = bindings[name];
    const restored = act.restored.get(name);
    if (b.kind === "value") next.set(name, { value: jsonParse(b.json), json: b.json });
    else if (b.kind === "same" && restored) {
      if (!act.mentioned.has(name)) next.set(name, restored);
      else if (restored.json !== null)
        next.set(name, { value: jsonParse(restored.json), json: restored.json });
    }
  }
  kept = next;
}

/**
 * Ends the action once: reports the outcome with the bindings, rejects the calls still pending,
 * and (if `reusable`) reports `idle` once the event loop is free again.
 *
 * When the guest ended it at the bottom of a deep recursion (final_answer with no stack left),
 * building the report runs out of stack — as may any call made to recover. So the outcome is first
 * stored (an assignment needs no stack), and whatever runs next from a fresh stack (the action's
 * promise settling, the stall check, a retry) reports it: the real answer is never lost.
 * @param {Action} act
 * @param {Outcome} outcome
 * @param {boolean} [reusable]
 */
export function finish(act, outcome, reusable = true) {
  if (act.ended) return;
  act.ended = true;
  act.unreported = { outcome, reusable, attempts: 0 };
  flush(act);
}

/**
 * Reports the stored outcome if it was not reported yet. A second failure (not for lack of
 * stack, then) reports an error without the bindings instead.
 * @param {Action} act
 */
function flush(act) {
  const pending = act.unreported;
  if (!pending) return;
  try {
    if (pending.attempts++ < 2) report(act, pending.outcome, pending.reusable, true);
    else {
      const error = {
        name: "RangeError",
        message: "The action's result could not be copied",
        frames: [],
      };
      report(act, { error }, pending.reusable, false);
    }
    act.unreported = null;
  } catch {
    try {
      setImmediate(() => flush(act));
    } catch {
      // No stack even for this: the action's promise settling (or the stall check) flushes.
    }
  }
}

/**
 * Builds the `done` message (everything that can run out of stack), then sends it.
 * @param {Action} act
 * @param {Outcome} outcome
 * @param {boolean} reusable
 * @param {boolean} withBindings
 */
function report(act, outcome, reusable, withBindings) {
  if ("finalValue" in outcome) {
    try {
      outcome = {
        final: toJson(
          outcome.finalValue,
          act.limits.maxValueBytes,
          act.limits.maxValueDepth,
          "final_answer value",
        ),
      };
    } catch (err) {
      if (!(err instanceof CopyError)) throw err;
      outcome = { error: { name: "TypeError", message: err.message, frames: [] } };
    }
  }
  const bindings = withBindings ? captureBindings(act) : {};
  const lastValue =
    "value" in outcome && outcome.value !== undefined
      ? formatValue(outcome.value, LAST_VALUE_CHARS)
      : null;
  for (const p of act.pending.values()) {
    setMessage(p.site, "The action ended before this tool call returned");
    p.reject(p.site);
  }
  act.pending.clear();
  // Values travel as the line's attachments: their JSON as it is, not escaped into a string.
  /** @type {string[]} */
  const attachments = [];
  /** @type {Record<string, WireBindingReport>} */
  const wire = create(null);
  // (The host's warm-up action, id 0, reports none: it ran the copy only to have V8 compile it.)
  for (const name of act.id === 0 ? [] : keys(bindings)) {
    const b = bindings[name];
    if (b.kind === "value") {
      wire[name] = { kind: "value", attachment: attachments.length };
      attachments.push(b.json);
    } else wire[name] = b;
  }
  sendLine(
    encodeLineWithAttachments(
      {
        t: "done",
        id: act.id,
        error: "error" in outcome ? outcome.error : null,
        isFinal: "final" in outcome,
        finalJson: "final" in outcome ? outcome.final : null,
        tail: act.tail,
        dropped: act.dropped,
        bindings: wire,
        toolCalls: act.calls,
        lastValue,
      },
      attachments,
    ),
  );
  // After the report, so the host has it first: what the process holds for the next action (the
  // host's own warm-up action, id 0, leaves nothing: the host keeps none of its values either).
  if (act.id !== 0) keepValues(act, bindings);
  else kept = new Map();
  // Reported only once the event loop is free again: a guest still spinning (microtask loop,
  // busy code after final_answer) never gets here and the host replaces this process.
  if (reusable) setImmediate(() => send({ t: "idle", id: act.id, heapUsed: heapUsed() }));
}
