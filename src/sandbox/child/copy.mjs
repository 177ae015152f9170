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
  getOwnPropertyDescriptor,
  getPrototypeOf,
  hasOwn,
  isArray,
  isProxy,
  jsonStringify,
  keys,
  lookupGetter,
  objectPrototype,
  ownKeys,
  regexpExec,
  regexpTest,
  typedArrayPrototype,
} from "./commons.mjs";
import { overBytes } from "./protocol.mjs";

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
 * `nestedDates`, a Date below the root becomes its ISO string (what JSON.stringify's toJSON gives):
 * one date field must not lose a whole object.
 *
 * Two passes, so the text itself is made by the engine's JSON.stringify: first a walk
 * ({@link plainJsonSize}; {@link JsonCheck} when that one finds a problem, to say which) checks the
 * value without calling guest code (own property descriptors, proxies detected,
 * prototypes compared with the intrinsics) and bounds its size from below; once the value is known
 * to hold only plain data, with no getter, proxy or `toJSON` of the guest's, JSON.stringify cannot
 * run guest code either and gives exactly the text the walk checked.
 * @param {unknown} value
 * @param {number} maxBytes
 * @param {number} maxDepth
 * @param {string} what names the root in messages ("x", "argument 1 of search()"); paths extend it (x.a[0])
 * @param {boolean} [nestedDates]
 * @returns {string}
 */
export function toJson(value, maxBytes, maxDepth, what, nestedDates = false) {
  if (typeof value === "string") {
    if (value.length > maxBytes)
      throw new CopyError(`${what} is too large (over ${maxBytes} bytes as JSON)`);
  } else if (plainJsonSize(value, 0, maxDepth, maxBytes, []) < 0) {
    // Not plain data, too large or too deep: the detailed walk says why (or accepts nested dates).
    new JsonCheck(maxBytes, maxDepth, what, nestedDates).value(value, 0);
  }
  const json = value === undefined ? "null" : /** @type {string} */ (jsonStringify(value));
  if (overBytes(json, maxBytes))
    throw new CopyError(`${what} is too large (over ${maxBytes} bytes as JSON)`);
  return json;
}

/**
 * The fast checking pass of {@link toJson}, for the common case: a lower bound of the JSON size of
 * `v` if it is plain data (plain objects and arrays of strings, finite numbers, booleans and null,
 * own data properties only, no proxy, no own `toJSON`, no cycle, within `maxDepth` and `maxBytes`),
 * else -1 without saying why. No guest code runs: only own property descriptors (or, for array
 * elements, the getter lookup) are read. (One loop per container kind, on purpose: a shared
 * generic loop measured 1.5x slower on small records.)
 * @param {unknown} v an object or array (or anything else: -1)
 * @param {number} depth
 * @param {number} maxDepth
 * @param {number} maxBytes
 * @param {unknown[]} ancestors
 * @returns {number}
 */
function plainJsonSize(v, depth, maxDepth, maxBytes, ancestors) {
  if (typeof v !== "object" || v === null) return v === null ? 4 : -1;
  if (depth >= maxDepth || isProxy(v)) return -1;
  for (let i = 0; i < depth; i++) if (ancestors[i] === v) return -1;
  ancestors[depth] = v;
  if (hasOwn(v, "toJSON")) return -1;
  const proto = getPrototypeOf(v);
  if (proto === arrayPrototype) {
    return isArray(v) ? plainArraySize(v, depth, maxDepth, maxBytes, ancestors) : -1;
  }
  if ((proto !== objectPrototype && proto !== null) || isArray(v)) return -1;
  return plainObjectSize(v, depth, maxDepth, maxBytes, ancestors);
}

/**
 * {@link plainJsonSize} of an array (already known to be a real, non-proxy array with the
 * intrinsic prototype and no own `toJSON`). Elements are read after `__lookupGetter__` said they
 * have no getter: a third of the cost of a descriptor per element (V8 reads indexed descriptors
 * slowly). An element that reads as undefined (a hole, an undefined value, or a setter without
 * getter) is looked at again through its descriptor.
 * @param {unknown[]} a
 * @param {number} depth
 * @param {number} maxDepth
 * @param {number} maxBytes
 * @param {unknown[]} ancestors
 * @returns {number}
 */
function plainArraySize(a, depth, maxDepth, maxBytes, ancestors) {
  const n = a.length;
  let size = 2 + n;
  if (size > maxBytes) return -1;
  for (let i = 0; i < n; i++) {
    if (apply(lookupGetter, a, [i]) !== undefined) return -1;
    const x = a[i];
    if (typeof x === "string") size += x.length + 2;
    else if (typeof x === "number") {
      if (x - x !== 0) return -1;
      size += 1;
    } else if (typeof x === "boolean") size += 4;
    else if (x === undefined) {
      const d = getOwnPropertyDescriptor(a, i);
      if (d !== undefined && !("value" in d)) return -1; // a setter without getter
      size += 4; // a hole or undefined: null
    } else {
      const s = plainJsonSize(x, depth + 1, maxDepth, maxBytes - size, ancestors);
      if (s < 0) return -1;
      size += s;
    }
    if (size > maxBytes) return -1;
  }
  return size;
}

/**
 * {@link plainJsonSize} of a plain object (already known to be a non-proxy object with the
 * intrinsic or a null prototype and no own `toJSON`): one own property descriptor per key.
 * @param {object} o
 * @param {number} depth
 * @param {number} maxDepth
 * @param {number} maxBytes
 * @param {unknown[]} ancestors
 * @returns {number}
 */
function plainObjectSize(o, depth, maxDepth, maxBytes, ancestors) {
  let size = 2;
  const ks = keys(o);
  for (let i = 0; i < ks.length; i++) {
    const k = ks[i];
    const d = /** @type {PropertyDescriptor} */ (getOwnPropertyDescriptor(o, k));
    const x = d.value;
    if (typeof x === "string") size += k.length + x.length + 6;
    else if (typeof x === "number") {
      if (x - x !== 0) return -1;
      size += k.length + 5;
    } else if (typeof x === "boolean") size += k.length + 8;
    else if (x === undefined) {
      if (d.get !== undefined || d.set !== undefined) return -1;
      continue; // omitted
    } else {
      const s = plainJsonSize(x, depth + 1, maxDepth, maxBytes - size, ancestors);
      if (s < 0) return -1;
      size += k.length + 4 + s;
    }
    if (size > maxBytes) return -1;
  }
  return size;
}

/**
 * The checking pass of {@link toJson}: one walk, no guest code called. Counts a lower bound of the
 * JSON size as it goes, so a huge (or exponentially shared) value is refused early; keeps the path
 * of the node being visited as parts, and builds the path text only for an error message.
 */
class JsonCheck {
  /**
   * @param {number} maxBytes
   * @param {number} maxDepth
   * @param {string} what
   * @param {boolean} nestedDates
   */
  constructor(maxBytes, maxDepth, what, nestedDates) {
    this.maxBytes = maxBytes;
    this.maxDepth = maxDepth;
    this.what = what;
    this.nestedDates = nestedDates;
    /** Lower bound of the JSON size so far. */
    this.size = 0;
    /** @type {object[]} objects on the path from the root (for cycles) */
    this.ancestors = [];
    /** @type {(string | number)[]} the key of each level of the path */
    this.keys = [];
  }

  /**
   * The path of the node at `depth` (`x.a[0]`), for messages.
   * @param {number} depth
   */
  path(depth) {
    let path = this.what;
    for (let i = 0; i < depth; i++) {
      const k = this.keys[i];
      path = typeof k === "number" ? `${path}[${k}]` : keyPath(path, k);
    }
    return path;
  }

  /** @param {number} add */
  grow(add) {
    this.size += add;
    if (this.size > this.maxBytes)
      throw new CopyError(`${this.what} is too large (over ${this.maxBytes} bytes as JSON)`);
  }

  /**
   * @param {unknown} v
   * @param {number} depth
   */
  value(v, depth) {
    switch (typeof v) {
      case "string":
        this.grow(v.length + 2);
        return;
      case "number":
        if (v !== v || v === Infinity || v === -Infinity)
          throw new CopyError(`${this.path(depth)} is ${v}, which is not JSON-serializable`);
        this.grow(1);
        return;
      case "boolean":
        this.grow(4);
        return;
      case "undefined":
        return; // omitted in objects, null in arrays (counted there)
      case "bigint":
        throw new CopyError(
          `${this.path(depth)} is a BigInt, which is not JSON-serializable (use String(x))`,
        );
      case "symbol":
        throw new CopyError(`${this.path(depth)} is a Symbol, which is not JSON-serializable`);
      case "function":
        throw new CopyError(`${this.path(depth)} is a function, which is not JSON-serializable`);
    }
    if (v === null) {
      this.grow(4);
      return;
    }
    const obj = /** @type {object} */ (v);
    if (depth >= this.maxDepth)
      throw new CopyError(`${this.what} is nested too deeply (more than ${this.maxDepth} levels)`);
    if (isProxy(obj))
      throw new CopyError(`${this.path(depth)} is a Proxy, which cannot leave the sandbox`);
    const ancestors = this.ancestors;
    for (let i = 0; i < depth; i++)
      if (ancestors[i] === obj) throw new CopyError(`${this.path(depth)} is a circular reference`);
    ancestors[depth] = obj;
    // JSON.stringify calls an own `toJSON` function, even a non-enumerable one the walk skips.
    if (hasOwn(obj, "toJSON")) {
      const d = /** @type {PropertyDescriptor} */ (getOwnPropertyDescriptor(obj, "toJSON"));
      if (!("value" in d) || typeof d.value === "function")
        throw new CopyError(`${this.path(depth)} has a toJSON method, which is not called`);
    }
    const proto = getPrototypeOf(obj);
    if (isArray(obj) && proto === arrayPrototype) this.array(obj, depth);
    else if (proto === objectPrototype || proto === null) this.object(obj, depth);
    else if (this.nestedDates && depth > 0 && proto === Date.prototype && ownKeys(obj).length === 0)
      // JSON.stringify gives it Date.prototype.toJSON's ISO string (null when invalid): intrinsics
      // only, since the date has no own property to override them.
      this.grow(4);
    else
      throw new CopyError(
        `${this.path(depth)} is ${describeKind(obj)}, which is not JSON-serializable`,
      );
  }

  /**
   * @param {unknown[]} a
   * @param {number} depth
   */
  array(a, depth) {
    const n = /** @type {PropertyDescriptor} */ (getOwnPropertyDescriptor(a, "length")).value;
    this.grow(n + 1);
    for (let i = 0; i < n; i++) {
      const d = getOwnPropertyDescriptor(a, i);
      if (d === undefined) {
        this.grow(4); // a hole: null (a huge sparse array is refused here, early)
        continue;
      }
      if (!("value" in d)) {
        this.keys[depth] = i;
        throw new CopyError(`${this.path(depth + 1)} is a getter, which is not copied`);
      }
      const x = d.value;
      if (x === undefined) this.grow(4);
      else {
        this.keys[depth] = i;
        this.value(x, depth + 1);
      }
    }
  }

  /**
   * @param {object} o
   * @param {number} depth
   */
  object(o, depth) {
    const ks = keys(o);
    this.grow(2);
    for (let i = 0; i < ks.length; i++) {
      const k = ks[i];
      const d = /** @type {PropertyDescriptor} */ (getOwnPropertyDescriptor(o, k));
      this.keys[depth] = k;
      if (!("value" in d))
        throw new CopyError(`${this.path(depth + 1)} is a getter, which is not copied`);
      const x = d.value;
      if (x === undefined) continue;
      this.grow(k.length + 4);
      this.value(x, depth + 1);
    }
  }
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
