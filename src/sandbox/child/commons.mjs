// @ts-check
/**
 * Built-ins captured when the child starts, before SES loads and before any guest code runs: the
 * other child modules use these bindings, never the globals (eslint's no-restricted-globals
 * enforces it, as in SES's own sources, endojs/endo packages/ses/src/commons.js). Whatever a guest
 * could later reach and patch (it can't after lockdown: the intrinsics are frozen), the child's own
 * code keeps the originals. The host imports this module too (through protocol.mjs); capturing has
 * no side effect there.
 */
/* eslint-disable no-restricted-globals */
import { writeSync } from "node:fs";
import { types } from "node:util";
import { getHeapStatistics } from "node:v8";

/** The child's global object (SES installs lockdown, harden and Compartment on it). */
export const universalThis = /** @type {Record<string, any>} */ (
  /** @type {unknown} */ (globalThis)
);

export const {
  Array,
  ArrayBuffer,
  Date,
  Error,
  EvalError,
  JSON,
  Map,
  Math,
  Number,
  Object,
  Promise,
  Proxy,
  RangeError,
  ReferenceError,
  Reflect,
  RegExp,
  Set,
  String,
  Symbol,
  SyntaxError,
  TypeError,
  URIError,
  AggregateError,
  Uint8Array,
  Int32Array,
  SharedArrayBuffer,
  WeakMap,
  WeakSet,
} = globalThis;
export const { wait: atomicsWait } = Atomics;

export const {
  assign,
  create,
  defineProperty,
  freeze,
  getOwnPropertyDescriptor,
  getOwnPropertyNames,
  getOwnPropertySymbols,
  getPrototypeOf,
  hasOwn,
  isFrozen,
  keys,
} = Object;
export const { apply, ownKeys } = Reflect;
export const { isArray } = Array;
export const { stringify: jsonStringify, parse: jsonParse } = JSON;
export const { floor, min, max } = Math;
export const { fromCharCode } = String;

export const objectPrototype = Object.prototype;
export const arrayPrototype = Array.prototype;
export const functionPrototype = Function.prototype;
export const typedArrayPrototype = getPrototypeOf(Uint8Array.prototype);

/** Getter of %TypedArray%.prototype.length (never the guest-visible property lookup). */
export const typedArrayLength = /** @type {(this: unknown) => number} */ (
  getOwnPropertyDescriptor(typedArrayPrototype, "length")?.get
);
/** Getter of %TypedArray%.prototype[@@toStringTag]. */
export const typedArrayTag = /** @type {(this: unknown) => string} */ (
  getOwnPropertyDescriptor(typedArrayPrototype, Symbol.toStringTag)?.get
);
export const mapForEach = Map.prototype.forEach;
export const mapSize = /** @type {(this: unknown) => number} */ (
  getOwnPropertyDescriptor(Map.prototype, "size")?.get
);
export const setForEach = Set.prototype.forEach;
export const setSize = /** @type {(this: unknown) => number} */ (
  getOwnPropertyDescriptor(Set.prototype, "size")?.get
);
export const dateGetTime = Date.prototype.getTime;
export const dateToISOString = Date.prototype.toISOString;
export const regexpToString = RegExp.prototype.toString;
export const regexpTest = RegExp.prototype.test;
export const regexpExec = RegExp.prototype.exec;
/**
 * Object.prototype.__lookupGetter__: the getter of a property (undefined for a data property),
 * found without calling it and without allocating a descriptor.
 */
export const lookupGetter =
  /** @type {(this: unknown, key: PropertyKey) => Function | undefined} */ (
    getOwnPropertyDescriptor(objectPrototype, "__lookupGetter__")?.value
  );
export const symbolToString = Symbol.prototype.toString;
export const functionToString = Function.prototype.toString;
export const functionBind = Function.prototype.bind;
export const stringSlice = String.prototype.slice;
export const arrayJoin = Array.prototype.join;
export const arrayPush = Array.prototype.push;

export const { isProxy } = types;
export { writeSync };

/** Bytes of the V8 heap in use now (garbage included). */
export function heapUsed() {
  return getHeapStatistics().used_heap_size;
}

// Node's process-level objects and timers (the guest never sees them).
export const { process, Buffer, setImmediate, setInterval } = globalThis;
/** Buffer.byteLength (static: it does not use `this`), for sizes counted in UTF-8 bytes. */
export const bufferByteLength = Buffer.byteLength;
/** The host's Intl, captured before lockdown (the `intl` capability hands out a hardened copy). */
export const Intl = typeof globalThis.Intl === "object" ? globalThis.Intl : undefined;
/** Node's TextEncoder/TextDecoder: wrapped before the guest sees them (see lockdown.mjs). */
export const { TextEncoder: NodeTextEncoder, TextDecoder: NodeTextDecoder } = globalThis;
