// @ts-check
/// <reference types="ses" />
/**
 * Loads SES, locks the child's realm down with every option explicit, and prepares what guest code
 * may be given: the capability objects (Math with random(), Date with now(), float arrays, Intl),
 * each hardened. Runs once, when the child starts, before any guest code.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { Script } from "node:vm";
import { Intl, Symbol, getPrototypeOf, process, universalThis as realm } from "./commons.mjs";
import { TextDecoder, TextEncoder } from "./encoding.mjs";
import { CHILD_CODE_CACHE_ARG, childArg } from "./protocol.mjs";

const SES_PATH = process.argv[2];
/**
 * The SES bundle, compiled as Node compiles a CommonJS module, but as a Script of our own, so that
 * it can use a V8 code cache (`code-cache=<file>`: the bytecode of the SES functions a start-up
 * compiles, sent to the host by an earlier child of this heap size before it ran any action; see
 * code-cache.ts) and make one (`make-code-cache`, child.mjs). With it, loading SES and locking down take
 * ~10-15 ms less. V8 checks only the source's length and its own flags, and compiles from source
 * when they do not fit; that the cache was made from these very bytes is the host's part (the file
 * is named by a hash of the SES file, checked again whenever its size, mtime or inode change).
 */
export const sesScript = new Script(
  `(function (exports, require, module, __filename, __dirname) {${readFileSync(SES_PATH, "utf8")}\n})`,
  { filename: SES_PATH, cachedData: readCodeCache() },
);
const sesModule = { exports: {} };
sesScript.runInThisContext()(
  sesModule.exports,
  createRequire(SES_PATH),
  sesModule,
  SES_PATH,
  dirname(SES_PATH),
);

/** @returns {Buffer | undefined} the code cache the host named, if it can be read */
function readCodeCache() {
  const file = childArg(process.argv, CHILD_CODE_CACHE_ARG);
  if (typeof file !== "string") return undefined;
  try {
    return readFileSync(file);
  } catch {
    return undefined; // e.g. removed when the host exited: SES compiles from source
  }
}

// Sampled by lockdown() as the shared TextEncoder/TextDecoder of every compartment (encoding.mjs).
realm.TextEncoder = TextEncoder;
realm.TextDecoder = TextDecoder;

// Every option explicit: LOCKDOWN_* environment variables must not change the configuration
// (the child also runs with an empty environment).
/** @type {typeof lockdown} */ (realm.lockdown)({
  errorTaming: "safe", // guest sees no stacks; the host reads them via getStackString
  errorTrapping: "none", // the child's own handlers decide what a stray error does
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

/** SES's stack reader: works on errors whose `stack` the guest cannot see. */
export const getStackString = /** @type {(error: object) => string} */ (realm.getStackString);
/** SES's harden (deep freeze of an object and everything reachable from it). */
const sesHarden = /** @type {typeof harden} */ (realm.harden);
export { sesHarden as harden };
/** SES's Compartment constructor. */
const SesCompartment = /** @type {typeof Compartment} */ (realm.Compartment);
export { SesCompartment as Compartment };
/** The start compartment's Math, with a working random() (guest compartments get a tamed one). */
export const InitialMath = /** @type {Math} */ (realm.Math);
/** The start compartment's Date, with a working now() and new Date(). */
export const InitialDate = /** @type {DateConstructor} */ (realm.Date);
/** Float typed arrays (SES withholds them from compartments: NaN bit-pattern side channel). */
export const floatArrays = sesHarden({
  Float32Array: /** @type {Float32ArrayConstructor} */ (realm.Float32Array),
  Float64Array: /** @type {Float64ArrayConstructor} */ (realm.Float64Array),
});
/** The host's Intl once hardened (see {@link intlCapability}). */
let hardenedIntl = /** @type {typeof globalThis.Intl | undefined} */ (undefined);

/**
 * The host's Intl, hardened (undefined when Node was built without it), with the prototypes V8
 * creates lazily and no property of Intl reaches: those of Intl.Segmenter's segments and of their
 * iterator. Unhardened, one guest could patch them (e.g. `next`) and run inside any later action
 * of the process that segments text. Hardened when the first action given Intl is set up, before
 * its code runs, not at start: only such an action reaches Intl, and a first Segmenter costs
 * ~14 ms (ICU's break-iterator data), a good tenth of a child's start.
 * @returns {typeof globalThis.Intl | undefined}
 */
export function intlCapability() {
  if (Intl && !hardenedIntl) hardenedIntl = hardenIntl(Intl);
  return hardenedIntl;
}

/**
 * @param {typeof globalThis.Intl} intl
 * @returns {typeof globalThis.Intl}
 */
function hardenIntl(intl) {
  sesHarden(intl);
  if (typeof intl.Segmenter === "function") {
    const segments = new intl.Segmenter("en").segment("a");
    sesHarden(getPrototypeOf(segments));
    sesHarden(getPrototypeOf(segments[Symbol.iterator]()));
  }
  return intl;
}
