// @ts-check
/**
 * Authorized libraries in the child (src/sandbox/libraries.ts makes the bundle): each package is
 * evaluated once per process, at start, before any guest code, as CommonJS inside a compartment of
 * its own. There `require` reaches only the package's own files (as the host resolved them), and
 * `process`, `fetch`, `Buffer`, `XMLHttpRequest`, `WebSocket` and a global `require` are traps:
 * touching one while the package loads refuses the package (the child exits, telling the host
 * why); touching one later throws. Everything else is what a guest has: frozen intrinsics, no I/O.
 * The exports are hardened (frozen, with everything reachable from them), so neither a guest nor
 * another library can change them; the package's private state lives on inside its closures, in a
 * process that serves one agent run only.
 */
import { readFileSync } from "node:fs";
import {
  Error,
  Map,
  Set,
  String,
  TypeError,
  apply,
  getOwnPropertyDescriptor,
  isFrozen,
  ownKeys,
  create,
  defineProperty,
  hasOwn,
  jsonParse,
  jsonStringify,
  keys,
  process,
  writeSync,
} from "./commons.mjs";
import { Compartment, harden } from "./lockdown.mjs";
import { CHILD_LIBRARIES_ARG, LIBRARY_REFUSED_MARK, childArg } from "./protocol.mjs";

/** Globals that are I/O or ambient authority in Node or a browser: absent, and trapped at load. */
const TRAPPED = ["process", "fetch", "Buffer", "XMLHttpRequest", "WebSocket", "require"];

/**
 * @typedef {object} BundledLibrary
 * @property {string} name
 * @property {string} global
 * @property {string} entry
 * @property {Record<string, string>} files
 * @property {Record<string, Record<string, string>>} links
 */

/**
 * The loaded libraries: exports by package name and by guest global (empty without a bundle).
 * @type {{ byName: Record<string, unknown>, byGlobal: Record<string, unknown> }}
 */
export const libraries = { byName: create(null), byGlobal: create(null) };

/**
 * Ends the process: the host reads the reason from stderr (child-process.ts).
 * @param {string} name
 * @param {string} reason
 * @returns {never}
 */
function refuse(name, reason) {
  writeSync(2, `\n${LIBRARY_REFUSED_MARK}library ${name} refused: ${reason}\n`);
  process.exit(78);
  throw new Error("unreachable"); // (exit does not return)
}

/** @param {unknown} err */
function describe(err) {
  try {
    if (err && typeof err === "object" && "message" in err)
      return `${String(/** @type {any} */ (err).name)}: ${String(/** @type {any} */ (err).message)}`;
    return String(err);
  } catch {
    return "an unprintable error";
  }
}

/**
 * Frozen prototypes break a common pattern: `this.constructor = C` or `x.toString = ...` on an
 * instance assigns over a read-only inherited property, which throws in strict code (the
 * "override mistake"; decimal.js does it in its constructor). As SES does for the intrinsics
 * (`overrideTaming`), each data property of a prototype the exports reach becomes a getter and a
 * setter: reading gives the value; assigning on an instance defines the instance's own property;
 * assigning on the prototype itself still throws. Runs before harden, on the library's own objects.
 * @param {unknown} root
 * @returns {unknown[]} values read through getters (to harden as well)
 */
function enableOverrides(root) {
  /** @type {Set<unknown>} */
  const seen = new Set();
  /** @type {unknown[]} */
  const reached = [];
  /** @param {unknown} v @param {number} depth */
  const visit = (v, depth) => {
    if ((typeof v !== "object" && typeof v !== "function") || v === null || seen.has(v)) return;
    seen.add(v);
    if (isFrozen(v) || depth > 3) return;
    const o = /** @type {Record<PropertyKey, unknown>} */ (v);
    for (const key of ownKeys(o)) {
      const d = getOwnPropertyDescriptor(o, key);
      if (d && "value" in d) visit(d.value, depth + 1);
      else if (d?.get) {
        // Re-exports as getters (TypeScript's and Babel's CommonJS output): harden does not call
        // getters, so what they return is hardened on its own (read once, at load).
        const value = apply(d.get, o, []);
        reached.push(value);
        visit(value, depth + 1);
      }
    }
    if (typeof v === "function") {
      const proto = getOwnPropertyDescriptor(v, "prototype")?.value;
      if (proto && typeof proto === "object" && !isFrozen(proto)) overridable(proto);
    }
  };
  visit(root, 0);
  return reached;
}

/** @param {Record<PropertyKey, unknown>} proto */
function overridable(proto) {
  for (const key of ownKeys(proto)) {
    const d = getOwnPropertyDescriptor(proto, key);
    if (!d || !("value" in d) || !d.writable || !d.configurable) continue;
    const value = d.value;
    defineProperty(proto, key, {
      get() {
        return value;
      },
      /** @param {unknown} v */
      set(v) {
        if (
          this === proto ||
          (typeof this !== "object" && typeof this !== "function") ||
          this === null
        )
          throw new TypeError(
            `Cannot assign to read only property '${String(key)}' of a library's prototype`,
          );
        defineProperty(this, key, {
          value: v,
          writable: true,
          enumerable: true,
          configurable: true,
        });
      },
      enumerable: d.enumerable,
      configurable: false,
    });
  }
}

/** @param {BundledLibrary} lib */
function loadLibrary(lib) {
  const c = new Compartment({ __options__: true, globals: {}, name: `library ${lib.name}` });
  /** @type {(message: string) => Error} */
  const makeError = c.evaluate("(message) => new Error(message)");
  /** @type {string | null} */
  let violation = null;
  let loading = true;
  const g = /** @type {Record<string, unknown>} */ (c.globalThis);
  for (const name of TRAPPED) {
    defineProperty(g, name, {
      get() {
        if (loading) violation ??= `it reached for ${name} while loading`;
        throw makeError(`${name} is not available in the sandbox (library ${lib.name})`);
      },
      enumerable: false,
      configurable: false,
    });
  }
  harden(g);
  /** @type {Map<string, { exports: unknown }>} */
  const cache = new Map();
  /** @param {string} file @returns {unknown} */
  const load = (file) => {
    const cached = cache.get(file);
    if (cached) return cached.exports;
    /** @type {{ exports: unknown }} */
    const module = { exports: {} };
    cache.set(file, module);
    const source = lib.files[file];
    if (file.endsWith(".json")) {
      module.exports = jsonParse(source);
      return module.exports;
    }
    const links = lib.links[file] ?? {};
    /** @param {unknown} spec */
    const require = (spec) => {
      if (typeof spec === "string" && hasOwn(links, spec)) return load(links[spec]);
      if (loading)
        violation ??= `it required ${jsonStringify(String(spec))} while loading (only its own files exist in the sandbox)`;
      throw makeError(
        `require(${jsonStringify(String(spec))}) is not available in the sandbox (library ${lib.name})`,
      );
    };
    const fn = c.evaluate(
      `(function (exports, require, module, __filename, __dirname) {${source}\n})`,
    );
    const path = `/node_modules/${lib.name}/${file}`;
    apply(fn, module.exports, [
      module.exports,
      require,
      module,
      path,
      path.slice(0, path.lastIndexOf("/")),
    ]);
    return module.exports;
  };
  /** @type {unknown} */
  let exports;
  try {
    exports = load(lib.entry);
  } catch (err) {
    violation ??= `loading it failed (${describe(err)})`;
  }
  loading = false;
  if (violation !== null) refuse(lib.name, violation);
  try {
    const behindGetters = enableOverrides(exports);
    harden(exports);
    for (const v of behindGetters) harden(v);
  } catch (err) {
    refuse(lib.name, `its exports cannot be frozen (${describe(err)})`);
  }
  libraries.byName[lib.name] = exports;
  libraries.byGlobal[lib.global] = exports;
}

/** Loads the bundle the host named (once, at start, before any guest code). */
export function loadLibraries() {
  const file = childArg(process.argv, CHILD_LIBRARIES_ARG);
  if (typeof file !== "string") return;
  /** @type {BundledLibrary[]} */
  let bundle;
  try {
    bundle = jsonParse(readFileSync(file, "utf8"));
  } catch (err) {
    refuse("bundle", `it could not be read (${describe(err)})`);
  }
  for (const lib of bundle) loadLibrary(lib);
  harden(libraries);
}

/** Names of the loaded packages (for messages). */
export function libraryNames() {
  return keys(libraries.byName);
}
