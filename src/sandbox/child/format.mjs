// @ts-check
/**
 * Formatting guest values for console.log and the REPL echo, inside the sandbox: never
 * util.inspect (it would call guest-defined inspect hooks and hand them host objects), never a
 * guest getter, toString or valueOf.
 */
import {
  AggregateError,
  Array,
  Date,
  Error,
  EvalError,
  Map,
  Number,
  Object,
  Promise,
  RangeError,
  ReferenceError,
  RegExp,
  Set,
  String,
  SyntaxError,
  TypeError,
  URIError,
  apply,
  dateGetTime,
  dateToISOString,
  functionPrototype,
  functionToString,
  getOwnPropertyDescriptor,
  getPrototypeOf,
  isArray,
  isProxy,
  jsonStringify,
  mapForEach,
  mapSize,
  objectPrototype,
  ownKeys,
  regexpTest,
  regexpToString,
  setForEach,
  setSize,
  symbolToString,
  typedArrayLength,
  typedArrayPrototype,
  typedArrayTag,
} from "./commons.mjs";
import { CopyError, safeFunctionName, toJson } from "./copy.mjs";

const MAX_ITEMS = 100;
const MAX_KEYS = 50;
const MAX_FORMAT_DEPTH = 4;
const PLAIN_KEY = /^[A-Za-z_$][\w$]*$/;
const CLASS_SOURCE = /^class\b/;

// Frozen intrinsic prototypes: with overrideTaming their data properties (name, constructor, ...)
// became SES accessors that just return the original value, so their getters are safe to call.
/** @type {Set<unknown>} */
const trustedProtos = new Set([
  Object.prototype,
  functionPrototype,
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

/**
 * Reads a property through the prototype chain without triggering guest getters or proxy traps.
 * @param {object} obj
 * @param {PropertyKey} key
 * @returns {unknown}
 */
export function dataProp(obj, key) {
  /** @type {object | null} */
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

/**
 * True if `v` inherits from Error.prototype (no proxy on the way).
 * @param {unknown} v
 * @returns {boolean}
 */
export function isErrorLike(v) {
  let p = v;
  for (let i = 0; p && i < 50; i++) {
    if (isProxy(p)) return false;
    if (p === Error.prototype) return true;
    p = getPrototypeOf(p);
  }
  return false;
}

/**
 * Formats a guest value like console.log does, within `budget` characters.
 * @param {unknown} value
 * @param {number} budget
 * @returns {string}
 */
export function formatValue(value, budget) {
  /** @type {string[]} */
  const out = [];
  let size = 0;
  /** @type {unknown[]} */
  const seen = [];
  /** @param {string} s */
  const emit = (s) => {
    if (size >= budget) return false;
    if (size + s.length > budget) s = s.slice(0, budget - size);
    size += s.length;
    out.push(s);
    return size < budget;
  };
  /** @param {string} k */
  const key = (k) => (apply(regexpTest, PLAIN_KEY, [k]) ? k : jsonStringify(k));
  /**
   * @param {unknown} v
   * @param {number} depth
   * @param {boolean} top
   * @returns {void}
   */
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
          isClass = apply(regexpTest, CLASS_SOURCE, [apply(functionToString, v, [])]);
        } catch {
          // e.g. a revoked proxy's target; formatted as a function
        }
        const name = safeFunctionName(v);
        emit(isClass ? `[class ${name || "(anonymous)"}]` : `[Function: ${name || "(anonymous)"}]`);
        return;
      }
    }
    if (v === null) return void emit("null");
    const obj = /** @type {object} */ (v);
    if (isProxy(obj)) return void emit("[Proxy]");
    if (seen.includes(obj)) return void emit("[Circular]");
    if (isErrorLike(obj)) {
      const name = dataProp(obj, "name");
      const msg = dataProp(obj, "message");
      emit(`${typeof name === "string" ? name : "Error"}: ${typeof msg === "string" ? msg : ""}`);
      return;
    }
    const proto = getPrototypeOf(obj);
    if (proto === Date.prototype) {
      const t = apply(dateGetTime, obj, []);
      return void emit(t === t ? apply(dateToISOString, obj, []) : "Invalid Date");
    }
    if (proto === RegExp.prototype) return void emit(apply(regexpToString, obj, []));
    if (proto === Promise.prototype) return void emit("Promise { <pending or settled> }");
    if (depth >= MAX_FORMAT_DEPTH) return void emit(isArray(obj) ? "[Array]" : "[Object]");
    seen.push(obj);
    try {
      if (proto === Map.prototype || proto === Set.prototype) {
        const isMap = proto === Map.prototype;
        const n = apply(isMap ? mapSize : setSize, obj, []);
        emit(`${isMap ? "Map" : "Set"}(${n}) {`);
        let i = 0;
        apply(isMap ? mapForEach : setForEach, obj, [
          /**
           * @param {unknown} val
           * @param {unknown} k
           */
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
      if (proto && !isProxy(proto) && getPrototypeOf(proto) === typedArrayPrototype) {
        const n = apply(typedArrayLength, obj, []);
        const typed = /** @type {ArrayLike<number | bigint>} */ (obj);
        emit(`${apply(typedArrayTag, obj, [])}(${n}) [`);
        for (let i = 0; i < n && i < MAX_ITEMS; i++) emit((i ? ", " : " ") + String(typed[i]));
        if (n > MAX_ITEMS) emit(`, ... ${n - MAX_ITEMS} more`);
        emit(n > 0 ? " ]" : "]");
        return;
      }
      if (isArray(obj)) {
        const len = /** @type {PropertyDescriptor} */ (getOwnPropertyDescriptor(obj, "length"))
          .value;
        emit("[");
        let holes = 0;
        let shown = 0;
        for (let i = 0; i < len && shown < MAX_ITEMS && size < budget; i++) {
          const d = getOwnPropertyDescriptor(obj, i);
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
      const keys = ownKeys(obj);
      const ctor = proto && proto !== objectPrototype ? dataProp(proto, "constructor") : undefined;
      const prefix =
        proto === null
          ? "[Object: null prototype] "
          : typeof ctor === "function" && proto !== objectPrototype
            ? `${safeFunctionName(ctor) || "Object"} `
            : "";
      emit(`${prefix}{`);
      let shown = 0;
      for (let i = 0; i < keys.length && size < budget; i++) {
        const k = keys[i];
        const d = getOwnPropertyDescriptor(obj, k);
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
 * code (objects are formatted, never coerced through valueOf/toString).
 * @param {unknown[]} args the call's arguments; args[0] is the format string
 * @param {number} budget
 * @returns {{ text: string, consumed: number }} the formatted text and how many arguments it used
 */
export function formatSpecifiers(args, budget) {
  const fmt = /** @type {string} */ (args[0]);
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
              ? Number.parseFloat(String(v))
              : spec === "i"
                ? Number.parseInt(String(v), 10)
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
  return { text: out, consumed: next };
}
