// @ts-check
/**
 * Copying values out of the guest (tool arguments, the final answer, variables) as strict JSON
 * text, without calling guest code: own data properties read through captured intrinsics, proxies
 * detected, size and depth capped. Anything JSON would silently change is refused with a reason.
 */
import {
  ArrayBuffer,
  Date,
  Error,
  Map,
  Promise,
  RegExp,
  Set,
  WeakMap,
  WeakSet,
  apply,
  arrayPrototype,
  dateGetTime,
  dateToISOString,
  getOwnPropertyDescriptor,
  getPrototypeOf,
  isArray,
  isProxy,
  jsonStringify,
  objectPrototype,
  ownKeys,
  regexpExec,
  regexpTest,
  typedArrayPrototype,
} from "./commons.mjs";

const PLAIN_KEY = /^[A-Za-z_$][\w$]*$/;

/**
 * The path of property `key` below `path`, written so that a key never reads as text of its own
 * (`obj.name`, `obj["a key\nwith: anything"]`): paths go into notes the framework prints.
 * @param {string} path
 * @param {string} key
 * @returns {string}
 */
function keyPath(path, key) {
  return apply(regexpTest, PLAIN_KEY, [key]) ? `${path}.${key}` : `${path}[${jsonStringify(key)}]`;
}

/** Why a value could not be copied (the message names the value and says why). */
export class CopyError extends Error {}

/**
 * The guest-visible name of a function, read without calling guest code ("" if none).
 * @param {Function} fn
 * @returns {string}
 */
export function safeFunctionName(fn) {
  const d = getOwnPropertyDescriptor(fn, "name");
  return d && "value" in d && typeof d.value === "string" ? d.value.slice(0, 100) : "";
}

/**
 * What kind of non-plain value `v` is, for messages ("a Map", "an instance of Box", ...).
 * @param {object} v
 * @returns {string}
 */
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
  if (proto && getPrototypeOf(proto) === typedArrayPrototype)
    return "a typed array (use Array.from())";
  let p = proto;
  while (p && p !== objectPrototype) {
    if (p === Error.prototype) return "an Error (use error.message)";
    p = getPrototypeOf(p);
  }
  const ctor = proto ? getOwnPropertyDescriptor(proto, "constructor") : undefined;
  const name =
    ctor && "value" in ctor && typeof ctor.value === "function" ? safeFunctionName(ctor.value) : "";
  return name ? `an instance of ${name}` : "a non-plain object";
}

/**
 * Serializes a guest value to JSON text. `undefined` object properties are omitted and `undefined`
 * array elements become null (JSON's own rules); anything else that JSON would silently change
 * (NaN, Date, Map, functions, getters, proxies, cycles) is rejected with a reason. With
 * `nestedDates`, a Date below the root becomes its ISO string (what JSON.stringify's toJSON gives,
 * computed with the intrinsic, never a guest toJSON): one date field must not lose a whole object.
 * @param {unknown} value
 * @param {number} maxBytes
 * @param {number} maxDepth
 * @param {string} what names the root in messages ("x", "argument 1 of search()"); paths extend it (x.a[0])
 * @param {boolean} [nestedDates]
 * @returns {string}
 */
export function toJson(value, maxBytes, maxDepth, what, nestedDates = false) {
  let size = 0;
  /** @type {object[]} */
  const seen = [];
  /** @type {string[]} */
  const parts = [];
  /** @param {string} s */
  const push = (s) => {
    size += s.length;
    if (size > maxBytes)
      throw new CopyError(`${what} is too large (over ${maxBytes} bytes as JSON)`);
    parts.push(s);
  };
  /**
   * @param {unknown} v
   * @param {number} depth
   * @param {string} path
   */
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
    const obj = /** @type {object} */ (v);
    if (depth >= maxDepth)
      throw new CopyError(`${what} is nested too deeply (more than ${maxDepth} levels)`);
    if (isProxy(obj)) throw new CopyError(`${path} is a Proxy, which cannot leave the sandbox`);
    for (let i = 0; i < seen.length; i++)
      if (seen[i] === obj) throw new CopyError(`${path} is a circular reference`);
    const proto = getPrototypeOf(obj);
    if (nestedDates && depth > 0 && proto === Date.prototype) {
      const t = apply(dateGetTime, obj, []);
      // Invalid Date: JSON.stringify gives null.
      push(t === t ? jsonStringify(apply(dateToISOString, obj, [])) : "null");
      return;
    }
    seen.push(obj);
    if (isArray(obj) && proto === arrayPrototype) {
      const len = /** @type {PropertyDescriptor} */ (getOwnPropertyDescriptor(obj, "length")).value;
      push("[");
      for (let i = 0; i < len; i++) {
        if (i > 0) push(",");
        const d = getOwnPropertyDescriptor(obj, i);
        if (d === undefined)
          push("null"); // hole (size cap stops huge sparse arrays early)
        else if (!("value" in d))
          throw new CopyError(`${path}[${i}] is a getter, which is not copied`);
        else visit(d.value, depth + 1, `${path}[${i}]`);
      }
      push("]");
    } else if (proto === objectPrototype || proto === null) {
      push("{");
      let first = true;
      const keys = ownKeys(obj);
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i];
        if (typeof k !== "string") continue;
        const d = getOwnPropertyDescriptor(obj, k);
        if (!d || !d.enumerable) continue;
        if (!("value" in d))
          throw new CopyError(`${keyPath(path, k)} is a getter, which is not copied`);
        if (d.value === undefined) continue;
        if (!first) push(",");
        first = false;
        push(jsonStringify(k));
        push(":");
        visit(d.value, depth + 1, keyPath(path, k));
      }
      push("}");
    } else {
      throw new CopyError(`${path} is ${describeKind(obj)}, which is not JSON-serializable`);
    }
    seen.pop();
  };
  visit(value, 0, what);
  return parts.join("");
}

const NOTE =
  /^(?:an? )?(.+?)(?: (\(.*\)))?, which (is not JSON-serializable|cannot leave the sandbox)(.*)$/s;

/**
 * Note for a variable that cannot be carried over, without repeating its name:
 * "m is a Map, which is not JSON-serializable" -> "Map is not JSON-serializable";
 * "p is a Promise (did you forget await?), which ..." -> "Promise is not JSON-serializable (did you forget await?)".
 * Notes about a nested part keep its path ("obj.m is a Map, ...").
 * @param {string} name
 * @param {string} message
 * @returns {string}
 */
export function variableNote(name, message) {
  const prefix = `${name} is `;
  if (!message.startsWith(prefix)) return message;
  const m = /** @type {RegExpExecArray | null} */ (
    apply(regexpExec, NOTE, [message.slice(prefix.length)])
  );
  if (!m) return message;
  return `${m[1]} ${m[3]}${m[2] ? ` ${m[2]}` : ""}${m[4]}`;
}
