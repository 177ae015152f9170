// @ts-check
/**
 * TextEncoder and TextDecoder for guest code. Node's own are JavaScript classes whose instances
 * hold internals the guest could reach and replace: a decoder's ICU converter handle under a
 * symbol (replacing it crashes the process in native code) and lazily created Node error classes
 * with unfrozen prototypes. These stand-ins keep Node's object in a private field, which guest
 * code cannot name, and turn Node's errors into plain intrinsic ones. lockdown.mjs installs them as
 * the realm's globals before lockdown(), so SES hardens them as the shared TextEncoder/TextDecoder
 * of every compartment (also compartments the guest makes itself).
 */
import {
  Error,
  NodeTextDecoder,
  NodeTextEncoder,
  RangeError,
  String,
  Symbol,
  TypeError,
  defineProperty,
  freeze,
  getOwnPropertyDescriptor,
  getPrototypeOf,
  hasOwn,
  isFrozen,
} from "./commons.mjs";

/**
 * Runs `fn`; an error Node made (its own error classes, unfrozen) is rethrown as a fresh intrinsic
 * error of the same kind and message. Errors that are already intrinsic or the guest's pass as is.
 * @template T
 * @param {() => T} fn
 * @returns {T}
 */
function guarded(fn) {
  try {
    return fn();
  } catch (err) {
    if (typeof err !== "object" || err === null || !hasOwn(err, "code")) throw err;
    const proto = getPrototypeOf(err);
    if (proto === null || isFrozen(proto)) throw err;
    const messageDesc = /** @type {PropertyDescriptor | undefined} */ (
      getOwnPropertyDescriptor(err, "message")
    );
    const message =
      messageDesc && typeof messageDesc.value === "string" ? messageDesc.value : "encoding error";
    const Kind =
      err instanceof RangeError ? RangeError : err instanceof TypeError ? TypeError : Error;
    throw new Kind(message);
  }
}

/** The guest's TextEncoder (UTF-8 only, as the Encoding Standard says). */
export class TextEncoder {
  /** @type {InstanceType<typeof NodeTextEncoder>} */
  #encoder;

  constructor() {
    this.#encoder = new NodeTextEncoder();
  }

  /** @returns {string} */
  get encoding() {
    return this.#encoder.encoding;
  }

  /**
   * @param {string} [input]
   * @returns {Uint8Array}
   */
  encode(input = "") {
    const encoder = this.#encoder;
    return guarded(() => encoder.encode(String(input)));
  }

  /**
   * @param {string} source
   * @param {Uint8Array} destination
   * @returns {{ read: number, written: number }}
   */
  encodeInto(source, destination) {
    const encoder = this.#encoder;
    const result = guarded(() => encoder.encodeInto(String(source), destination));
    return { read: result.read, written: result.written };
  }
}

/** The guest's TextDecoder. */
export class TextDecoder {
  /** @type {InstanceType<typeof NodeTextDecoder>} */
  #decoder;

  /**
   * @param {string} [label]
   * @param {{ fatal?: boolean, ignoreBOM?: boolean }} [options]
   */
  constructor(label = "utf-8", options = undefined) {
    this.#decoder = guarded(
      () => new NodeTextDecoder(String(label), options === undefined ? undefined : { ...options }),
    );
  }

  /** @returns {string} */
  get encoding() {
    return this.#decoder.encoding;
  }

  /** @returns {boolean} */
  get fatal() {
    return this.#decoder.fatal;
  }

  /** @returns {boolean} */
  get ignoreBOM() {
    return this.#decoder.ignoreBOM;
  }

  /**
   * @param {Parameters<InstanceType<typeof NodeTextDecoder>["decode"]>[0]} [input]
   * @param {{ stream?: boolean }} [options]
   * @returns {string}
   */
  decode(input = undefined, options = undefined) {
    const decoder = this.#decoder;
    // Options are read once, here: Node's decoder never sees a guest object.
    const stream = options !== undefined && options !== null && !!options.stream;
    return guarded(() => decoder.decode(input, { stream }));
  }
}

for (const [Class, tag] of /** @type {const} */ ([
  [TextEncoder, "TextEncoder"],
  [TextDecoder, "TextDecoder"],
])) {
  defineProperty(Class.prototype, Symbol.toStringTag, {
    value: tag,
    writable: false,
    enumerable: false,
    configurable: true,
  });
}
freeze(guarded);
