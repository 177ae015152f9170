// codehop sandbox child process. Plain ESM (no tsx: startup time matters).
//
// Started by src/sandbox/pool.ts as `node [flags] child.mjs <path to ses.cjs>` with an empty
// environment, Node's permission model (read access to this file and ses only), a V8 heap limit and
// an OS address-space limit. It locks itself down once, then runs one code action at a time, each in
// a fresh SES Compartment. Protocol: newline-delimited JSON; host -> child on stdin, child -> host on
// fd 3 with synchronous writes (so a message sent right before a guest busy-loop still arrives).
//
// Everything in this file that touches guest values does so without calling guest code where it can
// (own property descriptors, intrinsic methods captured before the guest runs, Proxy detection).

import { createRequire } from "node:module";
import { writeSync } from "node:fs";
import { types as utilTypes } from "node:util";
import { Worker } from "node:worker_threads";

const sesPath = process.argv[2];

createRequire(import.meta.url)(sesPath);

// Captured before lockdown / before any guest code.
const isProxy = utilTypes.isProxy;
const { getOwnPropertyDescriptor, getPrototypeOf, freeze } = Object;
const { ownKeys, apply } = Reflect;
const { isArray } = Array;
const jsonStringify = JSON.stringify;
const jsonParse = JSON.parse;
const objectProto = Object.prototype;
const arrayProto = Array.prototype;
const typedArrayProto = getPrototypeOf(Uint8Array.prototype);
const typedArrayLength = getOwnPropertyDescriptor(typedArrayProto, "length").get;
const typedArrayTag = getOwnPropertyDescriptor(typedArrayProto, Symbol.toStringTag).get;
const mapForEach = Map.prototype.forEach;
const mapSize = getOwnPropertyDescriptor(Map.prototype, "size").get;
const setForEach = Set.prototype.forEach;
const setSize = getOwnPropertyDescriptor(Set.prototype, "size").get;
const dateGetTime = Date.prototype.getTime;
const dateToISO = Date.prototype.toISOString;
const regexpToString = RegExp.prototype.toString;
const symbolToString = Symbol.prototype.toString;
const functionToString = Function.prototype.toString;
const functionBind = Function.prototype.bind;
const hadIntl = typeof Intl === "object" ? Intl : undefined;

// Every option explicit: LOCKDOWN_* environment variables must not change the configuration
// (the child also runs with an empty environment).
lockdown({
  errorTaming: "safe", // guest sees no stacks; the host reads them via getStackString
  errorTrapping: "none", // our own handlers below decide what a stray error does
  reporting: "none",
  unhandledRejectionTrapping: "none",
  regExpTaming: "safe",
  localeTaming: "safe",
  consoleTaming: "safe",
  overrideTaming: "severe", // frozen prototypes stay assignable on instances (e.g. err.name = ...)
  overrideDebug: [],
  stackFiltering: "concise",
  domainTaming: "safe",
  evalTaming: "safe-eval",
  legacyRegeneratorRuntimeTaming: "safe",
  __hardenTaming__: "safe",
});

const getStackString = globalThis.getStackString;
const InitialMath = globalThis.Math; // with a working random()
const InitialDate = globalThis.Date; // with a working now() / new Date()
const floatArrays = {
  Float32Array: globalThis.Float32Array,
  Float64Array: globalThis.Float64Array,
};
const IntlCap = hadIntl ? harden(hadIntl) : undefined;

// ---------------------------------------------------------------------------------------------
// Protocol

const OUT_FD = 3;
function send(msg) {
  const buf = Buffer.from(jsonStringify(msg) + "\n", "utf8");
  let off = 0;
  while (off < buf.length) {
    try {
      off += writeSync(OUT_FD, buf, off, buf.length - off);
    } catch (err) {
      if (err && err.code === "EAGAIN") continue;
      process.exit(0); // host went away
    }
  }
}

// A guest promise nobody handles must not kill the process (Node's default for unhandled rejections).
process.on("unhandledRejection", () => {});
// Guest code can raise an exception outside any promise chain (e.g. a throwing reject function of
// a Promise subclass, called from a reaction job). That is the action's error, reported as such;
// the process is then replaced anyway, since its state after an uncaught exception is not trusted.
process.on("uncaughtException", (err) => {
  try {
    if (current && !current.ended) finish(current, { error: describeError(err, current) }, false);
    else send({ t: "fatal", message: "uncaught exception outside an action" });
  } finally {
    process.exit(70);
  }
});

let current = null;

let inbuf = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  inbuf += chunk;
  let nl;
  while ((nl = inbuf.indexOf("\n")) >= 0) {
    const line = inbuf.slice(0, nl);
    inbuf = inbuf.slice(nl + 1);
    if (line.length === 0) continue;
    handle(jsonParse(line));
  }
});
process.stdin.on("end", () => process.exit(0));

function handle(msg) {
  if (msg.t === "run") startAction(msg);
  else if (msg.t === "result") deliverResult(msg);
  else if (msg.t === "ping") send({ t: "pong" });
}

// ---------------------------------------------------------------------------------------------
// Copying values out of the guest (tool arguments, final answer, variables): strict JSON, no guest
// code called, size and depth capped.

class CopyError extends Error {}

function describeKind(v) {
  if (isProxy(v)) return "a Proxy";
  const proto = getPrototypeOf(v);
  if (isProxy(proto)) return "an object with a Proxy prototype";
  if (typeof v === "function") return "a function";
  if (proto === Map.prototype) return "a Map";
  if (proto === Set.prototype) return "a Set";
  if (proto === Date.prototype) return "a Date (use date.toISOString())";
  if (proto === RegExp.prototype) return "a RegExp";
  if (proto === Promise.prototype) return "a Promise (did you forget await?)";
  if (proto === WeakMap.prototype || proto === WeakSet.prototype) return "a WeakMap/WeakSet";
  if (proto === ArrayBuffer.prototype) return "an ArrayBuffer";
  if (proto && getPrototypeOf(proto) === typedArrayProto) return "a typed array (use Array.from())";
  let p = proto;
  while (p && p !== objectProto) {
    if (p === Error.prototype) return "an Error (use error.message)";
    p = getPrototypeOf(p);
  }
  const ctor = proto ? getOwnPropertyDescriptor(proto, "constructor") : undefined;
  const name =
    ctor && "value" in ctor && typeof ctor.value === "function" ? safeFunctionName(ctor.value) : "";
  return name ? `an instance of ${name}` : "a non-plain object";
}

function safeFunctionName(fn) {
  const d = getOwnPropertyDescriptor(fn, "name");
  return d && "value" in d && typeof d.value === "string" ? d.value.slice(0, 100) : "";
}

/**
 * Serializes a guest value to JSON text. `undefined` object properties are omitted and `undefined`
 * array elements become null (JSON's own rules); anything else that JSON would silently change
 * (NaN, Date, Map, functions, getters, proxies, cycles) is rejected with a reason. With
 * `nestedDates`, a Date below the root becomes its ISO string (what JSON.stringify's toJSON gives,
 * computed with the intrinsic, never a guest toJSON): one date field must not lose a whole object.
 */
function toJson(value, maxBytes, maxDepth, what, nestedDates = false) {
  // `what` names the root in messages ("x", "argument 1 of search()"); paths extend it (x.a[0]).
  let size = 0;
  const seen = [];
  const parts = [];
  const push = (s) => {
    size += s.length;
    if (size > maxBytes)
      throw new CopyError(`${what} is too large (over ${maxBytes} bytes as JSON)`);
    parts.push(s);
  };
  const visit = (v, depth, path) => {
    switch (typeof v) {
      case "string":
        if (v.length > maxBytes)
          throw new CopyError(`${what} is too large (over ${maxBytes} bytes as JSON)`);
        push(jsonStringify(v));
        return;
      case "number":
        if (v !== v || v === Infinity || v === -Infinity)
          throw new CopyError(`${path} is ${v}, which is not JSON-serializable`);
        push(jsonStringify(v));
        return;
      case "boolean":
        push(v ? "true" : "false");
        return;
      case "undefined":
        push("null");
        return;
      case "bigint":
        throw new CopyError(`${path} is a BigInt, which is not JSON-serializable (use String(x))`);
      case "symbol":
        throw new CopyError(`${path} is a Symbol, which is not JSON-serializable`);
      case "function":
        throw new CopyError(`${path} is a function, which is not JSON-serializable`);
    }
    if (v === null) {
      push("null");
      return;
    }
    if (depth >= maxDepth)
      throw new CopyError(`${what} is nested too deeply (more than ${maxDepth} levels)`);
    if (isProxy(v)) throw new CopyError(`${path} is a Proxy, which cannot leave the sandbox`);
    for (let i = 0; i < seen.length; i++)
      if (seen[i] === v) throw new CopyError(`${path} is a circular reference`);
    const proto = getPrototypeOf(v);
    if (nestedDates && depth > 0 && proto === Date.prototype) {
      const t = apply(dateGetTime, v, []);
      push(t === t ? jsonStringify(apply(dateToISO, v, [])) : "null"); // Invalid Date: JSON.stringify gives null
      return;
    }
    seen.push(v);
    if (isArray(v) && proto === arrayProto) {
      const len = getOwnPropertyDescriptor(v, "length").value;
      push("[");
      for (let i = 0; i < len; i++) {
        if (i > 0) push(",");
        const d = getOwnPropertyDescriptor(v, i);
        if (d === undefined)
          push("null"); // hole (size cap stops huge sparse arrays early)
        else if (!("value" in d))
          throw new CopyError(`${path}[${i}] is a getter, which is not copied`);
        else visit(d.value, depth + 1, `${path}[${i}]`);
      }
      push("]");
    } else if (proto === objectProto || proto === null) {
      push("{");
      let first = true;
      const keys = ownKeys(v);
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i];
        if (typeof k !== "string") continue;
        const d = getOwnPropertyDescriptor(v, k);
        if (!d || !d.enumerable) continue;
        if (!("value" in d)) throw new CopyError(`${path}.${k} is a getter, which is not copied`);
        if (d.value === undefined) continue;
        if (!first) push(",");
        first = false;
        push(jsonStringify(k));
        push(":");
        visit(d.value, depth + 1, `${path}.${k}`);
      }
      push("}");
    } else {
      throw new CopyError(`${path} is ${describeKind(v)}, which is not JSON-serializable`);
    }
    seen.pop();
  };
  visit(value, 0, what);
  return parts.join("");
}

// ---------------------------------------------------------------------------------------------
// Formatting guest values for console.log, inside the sandbox (never util.inspect: it would call
// guest-defined inspect hooks and hand them host objects).

const MAX_ITEMS = 100;
const MAX_KEYS = 50;
const MAX_FORMAT_DEPTH = 4;

// Frozen intrinsic prototypes: with overrideTaming their data properties (name, constructor, ...)
// became SES accessors that just return the original value, so their getters are safe to call.
const trustedProtos = new Set([
  Object.prototype,
  Function.prototype,
  Array.prototype,
  Error.prototype,
  TypeError.prototype,
  RangeError.prototype,
  ReferenceError.prototype,
  SyntaxError.prototype,
  EvalError.prototype,
  URIError.prototype,
  AggregateError.prototype,
  Promise.prototype,
  Map.prototype,
  Set.prototype,
  Date.prototype,
  RegExp.prototype,
]);

function dataProp(obj, key) {
  // Reads a property through the prototype chain without triggering guest getters or proxy traps.
  let o = obj;
  for (let i = 0; o && i < 50; i++) {
    if (isProxy(o)) return undefined;
    const d = getOwnPropertyDescriptor(o, key);
    if (d) {
      if ("value" in d) return d.value;
      return trustedProtos.has(o) && d.get ? apply(d.get, o, []) : undefined;
    }
    o = getPrototypeOf(o);
  }
  return undefined;
}

function isErrorLike(v) {
  let p = v;
  for (let i = 0; p && i < 50; i++) {
    if (isProxy(p)) return false;
    if (p === Error.prototype) return true;
    p = getPrototypeOf(p);
  }
  return false;
}

function formatValue(value, budget) {
  const out = [];
  let size = 0;
  const seen = [];
  const emit = (s) => {
    if (size >= budget) return false;
    if (size + s.length > budget) s = s.slice(0, budget - size);
    size += s.length;
    out.push(s);
    return size < budget;
  };
  const key = (k) => (/^[A-Za-z_$][\w$]*$/.test(k) ? k : jsonStringify(k));
  const visit = (v, depth, top) => {
    if (size >= budget) return;
    switch (typeof v) {
      case "string":
        emit(top ? v : jsonStringify(v.length > budget ? v.slice(0, budget) : v));
        return;
      case "number":
      case "boolean":
      case "undefined":
        emit(String(v));
        return;
      case "bigint":
        emit(`${v}n`);
        return;
      case "symbol":
        emit(apply(symbolToString, v, []));
        return;
      case "function": {
        if (isProxy(v)) return void emit("[Proxy]");
        let isClass = false;
        try {
          isClass = /^class\b/.test(apply(functionToString, v, []));
        } catch {}
        const name = safeFunctionName(v);
        emit(isClass ? `[class ${name || "(anonymous)"}]` : `[Function: ${name || "(anonymous)"}]`);
        return;
      }
    }
    if (v === null) return void emit("null");
    if (isProxy(v)) return void emit("[Proxy]");
    if (seen.includes(v)) return void emit("[Circular]");
    if (isErrorLike(v)) {
      const name = dataProp(v, "name");
      const msg = dataProp(v, "message");
      emit(`${typeof name === "string" ? name : "Error"}: ${typeof msg === "string" ? msg : ""}`);
      return;
    }
    const proto = getPrototypeOf(v);
    if (proto === Date.prototype) {
      const t = apply(dateGetTime, v, []);
      return void emit(t === t ? apply(dateToISO, v, []) : "Invalid Date");
    }
    if (proto === RegExp.prototype) return void emit(apply(regexpToString, v, []));
    if (proto === Promise.prototype) return void emit("Promise { <pending or settled> }");
    if (depth >= MAX_FORMAT_DEPTH) return void emit(isArray(v) ? "[Array]" : "[Object]");
    seen.push(v);
    try {
      if (proto === Map.prototype || proto === Set.prototype) {
        const isMap = proto === Map.prototype;
        const n = apply(isMap ? mapSize : setSize, v, []);
        emit(`${isMap ? "Map" : "Set"}(${n}) {`);
        let i = 0;
        apply(isMap ? mapForEach : setForEach, v, [
          (val, k) => {
            if (i >= MAX_ITEMS || size >= budget) return;
            emit(i === 0 ? " " : ", ");
            if (isMap) {
              visit(k, depth + 1, false);
              emit(" => ");
            }
            visit(val, depth + 1, false);
            i++;
          },
        ]);
        if (n > MAX_ITEMS) emit(`, ... ${n - MAX_ITEMS} more`);
        emit(n > 0 ? " }" : "}");
        return;
      }
      if (proto && !isProxy(proto) && getPrototypeOf(proto) === typedArrayProto) {
        const n = apply(typedArrayLength, v, []);
        emit(`${apply(typedArrayTag, v, [])}(${n}) [`);
        for (let i = 0; i < n && i < MAX_ITEMS; i++) emit((i ? ", " : " ") + String(v[i]));
        if (n > MAX_ITEMS) emit(`, ... ${n - MAX_ITEMS} more`);
        emit(n > 0 ? " ]" : "]");
        return;
      }
      if (isArray(v)) {
        const len = getOwnPropertyDescriptor(v, "length").value;
        emit("[");
        let holes = 0;
        let shown = 0;
        for (let i = 0; i < len && shown < MAX_ITEMS && size < budget; i++) {
          const d = getOwnPropertyDescriptor(v, i);
          if (d === undefined) {
            holes++;
            // Huge sparse arrays: don't walk a billion holes.
            if (holes > MAX_ITEMS) break;
            continue;
          }
          if (holes) {
            emit(`${shown ? ", " : " "}<${holes} empty>`);
            shown++;
            holes = 0;
          }
          emit(shown ? ", " : " ");
          if ("value" in d) visit(d.value, depth + 1, false);
          else emit("[Getter]");
          shown++;
        }
        const rest = len - shown;
        if (rest > 0 && shown + rest !== shown)
          emit(`${shown ? ", " : " "}... ${len} items in total`);
        emit(len > 0 ? " ]" : "]");
        return;
      }
      const keys = ownKeys(v);
      const ctor = proto && proto !== objectProto ? dataProp(proto, "constructor") : undefined;
      const prefix =
        proto === null
          ? "[Object: null prototype] "
          : typeof ctor === "function" && proto !== objectProto
            ? `${safeFunctionName(ctor) || "Object"} `
            : "";
      emit(`${prefix}{`);
      let shown = 0;
      for (let i = 0; i < keys.length && size < budget; i++) {
        const k = keys[i];
        const d = getOwnPropertyDescriptor(v, k);
        if (!d || !d.enumerable) continue;
        if (shown >= MAX_KEYS) {
          emit(`, ... ${keys.length - shown} more keys`);
          break;
        }
        emit(shown ? ", " : " ");
        emit(typeof k === "symbol" ? `[${apply(symbolToString, k, [])}]` : key(k));
        emit(": ");
        if ("value" in d) visit(d.value, depth + 1, false);
        else emit("[Getter]");
        shown++;
      }
      emit(shown ? " }" : "}");
    } finally {
      seen.pop();
    }
  };
  try {
    visit(value, 0, true);
  } catch {
    // e.g. an object that merely inherits from Date.prototype: intrinsic methods reject it.
    emit(" [unprintable]");
  }
  return out.join("");
}

/**
 * console.log("%s has %d items", a, b): Node's format specifiers, applied without calling guest
 * code (objects are formatted, never coerced through valueOf/toString). Sets `args.consumed`.
 */
function formatSpecifiers(args, budget) {
  const fmt = args[0];
  let next = 1;
  let out = "";
  for (let i = 0; i < fmt.length && out.length <= budget; i++) {
    const ch = fmt[i];
    if (ch !== "%" || i + 1 >= fmt.length) {
      out += ch;
      continue;
    }
    const spec = fmt[i + 1];
    if (spec === "%") {
      out += "%";
      i++;
      continue;
    }
    if (!"sdifjoOc".includes(spec) || next >= args.length) {
      out += ch;
      continue;
    }
    const v = args[next++];
    i++;
    const primitive = v === null || (typeof v !== "object" && typeof v !== "function");
    switch (spec) {
      case "d":
      case "i":
      case "f": {
        if (!primitive || typeof v === "symbol") out += "NaN";
        else if (typeof v === "bigint") out += `${v}n`;
        else {
          const n =
            spec === "f"
              ? parseFloat(String(v))
              : spec === "i"
                ? parseInt(String(v), 10)
                : Number(v);
          out += String(n);
        }
        break;
      }
      case "j":
        try {
          out += toJson(v, budget, 64, "value");
        } catch (err) {
          out += err instanceof CopyError ? "[not JSON]" : "[unprintable]";
        }
        break;
      case "c":
        break; // CSS: ignored, like Node
      default:
        out += formatValue(v, budget);
    }
  }
  args.consumed = next;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Errors

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

/** Guest error -> { name, message, frames } without calling guest code. */
function describeError(err, act) {
  let name = "Error";
  let message;
  let frames = [];
  if ((typeof err === "object" && err !== null) || typeof err === "function") {
    if (isErrorLike(err)) {
      const n = dataProp(err, "name");
      const m = dataProp(err, "message");
      name = typeof n === "string" && n ? n.slice(0, 100) : "Error";
      message = typeof m === "string" ? m : "";
      try {
        const stack = getStackString(err);
        const re = /<anonymous>:(\d+):(\d+)/g;
        let mm;
        while ((mm = re.exec(stack)) && frames.length < 20)
          frames.push([Number(mm[1]), Number(mm[2])]);
      } catch {}
    } else {
      message = `Uncaught ${formatValue(err, 500)}`;
    }
  } else {
    message = `Uncaught ${formatValue(err, 500)}`;
  }
  if (message.length > 2000) message = message.slice(0, 2000) + "... [truncated]";
  if (name === "ReferenceError") {
    const m = /^(\S+) is not defined$/.exec(message);
    if (m) {
      if (HINTS[m[1]]) message += ` (${HINTS[m[1]]})`;
      else if (act && act.unserializable[m[1]])
        message += ` (its value could not be carried over: ${act.unserializable[m[1]]})`;
    }
  }
  return { name, message, frames };
}

/** Adds the sandbox hint to a fresh ReferenceError (it is thrown into the guest as is). */
function describeReference(err, act) {
  const { message } = describeError(err, act);
  Object.defineProperty(err, "message", {
    value: message,
    writable: true,
    configurable: true,
    enumerable: false,
  });
  return err;
}

// ---------------------------------------------------------------------------------------------
// Actions

function startAction(msg) {
  const limits = msg.limits;
  const caps = msg.capabilities;
  const half = Math.floor(limits.maxOutputChars / 2);
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
    limits,
  };
  current = act;

  const log = (prefix, name) =>
    opaqueFunction((...args) => {
      if (act.ended) return;
      const budget = limits.maxOutputChars + 1;
      let line = prefix;
      let i = 0;
      if (typeof args[0] === "string" && args.length > 1 && args[0].includes("%")) {
        line += formatSpecifiers(args, budget);
        i = args.consumed;
      }
      for (; i < args.length; i++) {
        if (i > 0) line += " ";
        line += formatValue(args[i], budget);
        if (line.length > budget) break;
      }
      appendLog(act, line + "\n");
    }, name);

  let makeError = null;
  const guestError = (ctor, message, name) => makeError(ctor, message, name || "");

  const finalAnswer = (...args) => {
    if (act.ended) return neverSettles();
    let json;
    try {
      json = toJson(args[0], limits.maxValueBytes, limits.maxValueDepth, "final_answer value");
    } catch (err) {
      throw guestError(
        "TypeError",
        err instanceof CopyError ? err.message : "final_answer value could not be copied",
      );
    }
    finish(act, { final: json });
    // The action is over: code after `await final_answer(x)` never runs.
    return neverSettles();
  };

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
  if (caps.intl && IntlCap) globals.Intl = IntlCap;
  for (const tool of msg.tools) {
    globals[tool] = makeTool(act, tool, guestError);
  }

  let run;
  try {
    const compartment = new Compartment({
      __options__: true,
      globals: harden(globals),
      name: "codehop-action",
    });
    harden(compartment.globalThis);
    makeError = compartment.evaluate(
      "(ctor, message, name) => { const C = ctor === 'TypeError' ? TypeError : ctor === 'RangeError' ? RangeError : ctor === 'ReferenceError' ? ReferenceError : Error; const e = new C(message); if (name) Object.defineProperty(e, 'name', { value: name, writable: true, configurable: true, enumerable: false }); return e; }",
    );
    const factory = compartment.evaluate(msg.source);
    const restore = jsonParse(msg.restoreJson);
    const decl = harden((name, fn) => {
      act.declared.set(name, fn);
      return fn;
    });
    const guestGlobal = compartment.globalThis;
    const ref = harden((name) => {
      if (typeof name === "string" && name in guestGlobal) return guestGlobal[name];
      throw describeReference(makeError("ReferenceError", `${String(name)} is not defined`), act);
    });
    const api = factory(restore, decl, ref);
    act.read = api.read;
    run = api.run;
  } catch (err) {
    const e = describeError(err, act);
    finish(act, { error: { name: e.name, message: e.message, frames: [] } });
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
      finish(act, { value: isArray(boxed) ? boxed[0] : undefined });
    },
    (err) => {
      act.settled = true;
      finish(act, { error: describeError(err, act) });
    },
  );
  checkStall(act);
}

// A fresh one each time: reactions a guest attaches die with its action instead of piling up on
// one shared promise for the life of the process.
const neverSettles = () => harden(new Promise(() => {}));

function appendLog(act, text) {
  if (act.headLeft > 0) {
    const head = text.length <= act.headLeft ? text : text.slice(0, act.headLeft);
    act.headLeft -= head.length;
    // Streamed right away so output before a hang or a crash is not lost.
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

function makeTool(act, tool, guestError) {
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
      const parts = [];
      let budget = act.limits.maxValueBytes;
      for (let i = 0; i < n; i++) {
        const part = toJson(
          args[i],
          budget,
          act.limits.maxValueDepth,
          `argument ${i + 1} of ${tool}()`,
        );
        budget -= part.length + 1;
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
    // Bounds what one action can make the host hold in queued tool arguments.
    if (act.argBytes + argsJson.length > act.limits.maxValueBytes * TOTAL_ARGS_FACTOR) {
      return Promise.reject(
        guestError(
          "Error",
          `Tool arguments of this action exceed ${act.limits.maxValueBytes * TOTAL_ARGS_FACTOR} bytes in total`,
          "ToolError",
        ),
      );
    }
    act.argBytes += argsJson.length;
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
 * A hardened, guest-visible stand-in for one of our functions: a bound function, which V8 prints as
 * `function () { [native code] }` (in String(f) and in its own error messages, e.g. "Cannot assign
 * to read only property 'call' of function ..."), so the host implementation's source never reaches
 * the guest. Its `name` is the guest-visible name.
 */
function opaqueFunction(fn, name) {
  const bound = apply(functionBind, fn, [undefined]);
  Object.defineProperty(bound, "name", {
    value: name,
    writable: false,
    enumerable: false,
    configurable: false,
  });
  return harden(bound);
}

function deliverResult(msg) {
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
    Object.defineProperty(p.site, "message", {
      value: String(msg.message),
      writable: true,
      configurable: true,
      enumerable: false,
    });
    p.reject(p.site);
  }
  checkStall(act);
}

/** If nothing can ever resume the guest (no tool call in flight, no timers exist), end the action. */
function checkStall(act) {
  if (act.inflight !== 0) return;
  setImmediate(() => {
    if (!act.ended && !act.settled && act.inflight === 0) {
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

/** Longest REPL echo of the last expression's value. */
const LAST_VALUE_CHARS = 2_000;

/** All tool arguments of one action together may use this many times `maxValueBytes` (as on the host). */
const TOTAL_ARGS_FACTOR = 8;

/** All carried-over values together may use this many times `maxValueBytes`. */
const SNAPSHOT_BUDGET_FACTOR = 4;

/**
 * Note for a variable that cannot be carried over, without repeating its name:
 * "m is a Map, which is not JSON-serializable" -> "Map is not JSON-serializable";
 * "p is a Promise (did you forget await?), which ..." -> "Promise is not JSON-serializable (did you forget await?)".
 * Notes about a nested part keep its path ("obj.m is a Map, ...").
 */
function variableNote(name, message) {
  const prefix = `${name} is `;
  if (!message.startsWith(prefix)) return message;
  const m =
    /^(?:an? )?(.+?)(?: (\(.*\)))?, which (is not JSON-serializable|cannot leave the sandbox)(.*)$/s.exec(
      message.slice(prefix.length),
    );
  if (!m) return message;
  return `${m[1]} ${m[3]}${m[2] ? ` ${m[2]}` : ""}${m[4]}`;
}

function captureBindings(act) {
  const out = {};
  if (!act.read) return out;
  let values;
  try {
    values = act.read();
  } catch {
    return out;
  }
  const { maxValueBytes, maxValueDepth } = act.limits;
  // The whole snapshot goes into checkpointed graph state: cap it, not just each value.
  let budget = maxValueBytes * SNAPSHOT_BUDGET_FACTOR;
  for (let i = 0; i < act.names.length; i++) {
    const name = act.names[i];
    const v = values[i];
    if (v === undefined) out[name] = { kind: "undefined" };
    else if (typeof v === "function" && act.declared.get(name) === v) out[name] = { kind: "decl" };
    else {
      try {
        const json = toJson(v, Math.min(maxValueBytes, budget), maxValueDepth, name, true);
        budget -= json.length;
        out[name] = { kind: "value", json };
      } catch (err) {
        out[name] = {
          kind: "unserializable",
          reason:
            err instanceof CopyError ? variableNote(name, err.message) : "could not be copied",
        };
      }
    }
  }
  return out;
}

function finish(act, outcome, reusable = true) {
  if (act.ended) return;
  act.ended = true;
  const bindings = captureBindings(act);
  for (const p of act.pending.values()) {
    Object.defineProperty(p.site, "message", {
      value: "The action ended before this tool call returned",
      writable: true,
      configurable: true,
      enumerable: false,
    });
    p.reject(p.site);
  }
  act.pending.clear();
  send({
    t: "done",
    id: act.id,
    error: outcome.error ?? null,
    isFinal: outcome.final !== undefined,
    finalJson: outcome.final ?? null,
    tail: act.tail,
    dropped: act.dropped,
    bindings,
    toolCalls: act.calls,
    lastValue: outcome.value === undefined ? null : formatValue(outcome.value, LAST_VALUE_CHARS),
  });
  // Reported only once the event loop is free again: a guest still spinning (microtask loop,
  // busy code after final_answer) never gets here and the host replaces this process.
  if (reusable) setImmediate(() => send({ t: "idle", id: act.id }));
}

// Orphan watchdog: if the host dies without closing us (SIGKILL, crash) while guest code spins,
// nobody would ever kill this process. A worker thread keeps running while the main thread is
// busy; it kills the whole process once the parent is gone (we get re-parented). Started right
// after `ready`, so its ~40 ms of startup overlap the first action instead of delaying readiness.
function startWatchdog() {
  const hostPid = process.ppid;
  const watchdog = new Worker(
    `const { workerData } = require("node:worker_threads");
     setInterval(() => { if (process.ppid !== workerData.hostPid) process.kill(process.pid, "SIGKILL"); }, 500);`,
    {
      eval: true,
      workerData: { hostPid },
      env: {},
      // Small: each isolate otherwise reserves hundreds of MB of address space, which would eat into
      // the RLIMIT_AS meant for guest allocations (see also MALLOC_ARENA_MAX in pool.ts).
      resourceLimits: {
        maxOldGenerationSizeMb: 8,
        maxYoungGenerationSizeMb: 1,
        codeRangeSizeMb: 4,
        stackSizeMb: 1,
      },
    },
  );
  watchdog.unref();
}

// Warm-up before reporting ready: the first Compartment, evaluation and stack capture each cost
// tens of milliseconds once per process; pay that here rather than in the first action.
try {
  const c = new Compartment({ __options__: true, globals: {} });
  harden(c.globalThis);
  const f = c.evaluate(
    "(function () { return { run: async function () { await null; null.x; } }; })",
  );
  f()
    .run()
    .catch((err) => {
      getStackString(err);
      formatValue({ a: [1, "x"] }, 100);
      toJson({ a: [1, "x"] }, 1000, 10, "warmup");
      send({ t: "ready" });
      startWatchdog();
    });
} catch {
  send({ t: "ready" });
  startWatchdog();
}
