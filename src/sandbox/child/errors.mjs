// @ts-check
/**
 * Guest errors described for the host without calling guest code: name, message (with a hint for
 * the names a sandbox lacks) and the stack positions inside the wrapper source, which the host maps
 * back to guest lines.
 */
import { Number, apply, defineProperty, hasOwn, regexpExec } from "./commons.mjs";
import { dataProp, formatValue, isErrorLike } from "./format.mjs";
import { getStackString } from "./lockdown.mjs";

/** @typedef {import("./protocol.mjs").ReportedError} ReportedError */

/** Hints appended to "x is not defined" for names a sandbox deliberately lacks. */
/** @type {Readonly<Record<string, string>>} */
const HINTS = {
  require: "modules are not available in the sandbox; use the provided tools",
  process: "the sandbox has no access to the host process",
  module: "modules are not available in the sandbox",
  exports: "modules are not available in the sandbox",
  Buffer: "use Uint8Array / TextEncoder",
  global: "use globalThis",
  setTimeout: "timers are not available in the sandbox",
  setInterval: "timers are not available in the sandbox",
  setImmediate: "timers are not available in the sandbox",
  fetch: "the network is not available in the sandbox; use the provided tools",
  structuredClone: "use JSON.parse(JSON.stringify(x))",
};

const MAX_MESSAGE_CHARS = 2_000;
const MAX_FRAMES = 20;
const NOT_DEFINED = /^(\S+) is not defined$/;

/**
 * Guest error -> { name, message, frames } without calling guest code.
 * @param {unknown} err what the guest threw
 * @param {{ unserializable: Record<string, string> } | null} act the action (for "could not be carried over" hints)
 * @returns {ReportedError}
 */
export function describeError(err, act) {
  let name = "Error";
  let message;
  /** @type {[number, number][]} */
  const frames = [];
  if (
    ((typeof err === "object" && err !== null) || typeof err === "function") &&
    isErrorLike(err)
  ) {
    const obj = /** @type {object} */ (err);
    const n = dataProp(obj, "name");
    const m = dataProp(obj, "message");
    name = typeof n === "string" && n ? n.slice(0, 100) : "Error";
    message = typeof m === "string" ? m : "";
    try {
      const stack = getStackString(obj);
      const re = /<anonymous>:(\d+):(\d+)/g;
      let mm;
      while ((mm = apply(regexpExec, re, [stack])) && frames.length < MAX_FRAMES)
        frames.push([Number(mm[1]), Number(mm[2])]);
    } catch {
      // no stack: the error is reported without a line
    }
  } else {
    message = `Uncaught ${formatValue(err, 500)}`;
  }
  if (message.length > MAX_MESSAGE_CHARS)
    message = `${message.slice(0, MAX_MESSAGE_CHARS)}... [truncated]`;
  if (name === "ReferenceError") {
    const m = /** @type {RegExpExecArray | null} */ (apply(regexpExec, NOT_DEFINED, [message]));
    if (m) {
      if (hasOwn(HINTS, m[1])) message += ` (${HINTS[m[1]]})`;
      else if (act && hasOwn(act.unserializable, m[1]))
        message += ` (its value could not be carried over: ${act.unserializable[m[1]]})`;
    }
  }
  return { name, message, frames };
}

/**
 * Sets an error's message as an own, non-enumerable data property (how V8 creates it).
 * @param {object} err
 * @param {string} message
 */
export function setMessage(err, message) {
  defineProperty(err, "message", {
    value: message,
    writable: true,
    configurable: true,
    enumerable: false,
  });
}

/**
 * Adds the sandbox hint to a fresh ReferenceError (it is thrown into the guest as is).
 * @template {object} E
 * @param {E} err
 * @param {{ unserializable: Record<string, string> }} act
 * @returns {E}
 */
export function describeReference(err, act) {
  setMessage(err, describeError(err, act).message);
  return err;
}
