/**
 * Authorized libraries: npm packages the operator lets code actions use (issue 26). The host finds
 * each package, checks it (CommonJS JavaScript only: no native code, no install scripts, no
 * `import()` or `import.meta`, no `require` with a computed name), collects exactly the files its
 * entry reaches, and writes them into one bundle file that every child of the sandbox reads at
 * start (child/libraries.mjs): the child evaluates what was checked here, not whatever is in
 * node_modules by then. The child loads each package in its own SES compartment, where `process`,
 * `fetch` and modules outside the package do not exist (touching them at load refuses the package),
 * and hardens its exports: one frozen copy per process, a global of the guest's every action.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import * as acorn from "acorn";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { isBindableName, RESERVED_GLOBALS } from "./contract.ts";

/** One authorized library as the operator names it. */
export interface LibrarySpec {
  /** npm package name (`papaparse`, `date-fns`, `@scope/name`). */
  name: string;
  /** The guest global it is available as (default: from the vetted set, else derived from the name). */
  global?: string;
  /** The package directory (default: resolved from the current directory, then from codehop's own). */
  dir?: string;
}

/** A library as checked and bundled. */
export interface PreparedLibrary {
  name: string;
  global: string;
  version: string;
  /** One line for the model (what it is for). */
  about: string;
}

/**
 * The vetted default set (`CODEHOP_SANDBOX_LIBRARIES=default`): pure CommonJS, no I/O, load under
 * SES lockdown (test/sandbox/libraries.test.ts loads each). Versions are package.json's pins.
 */
export const DEFAULT_LIBRARIES: readonly (Required<Omit<LibrarySpec, "dir">> & {
  about: string;
})[] = [
  {
    name: "papaparse",
    global: "Papa",
    about: "CSV: Papa.parse(text, { header: true }).data, Papa.unparse(rows)",
  },
  {
    name: "date-fns",
    global: "dateFns",
    about:
      "dates: dateFns.addDays(d, n), dateFns.differenceInDays(a, b), dateFns.format(d, 'yyyy-MM-dd'), dateFns.parseISO(s)",
  },
  {
    name: "decimal.js",
    global: "Decimal",
    about:
      "exact decimals: new Decimal('0.1').plus('0.2').toString(); Decimal.clone({ precision: 50 }) for more digits",
  },
];

/** Most files and bytes one library may bring (a bundle is read by every child at start). */
export const MAX_LIBRARY_FILES = 2000;
export const MAX_LIBRARY_BYTES = 16 * 1024 * 1024;

const PACKAGE_NAME = /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/;

function refuse(name: string, reason: string): never {
  throw new CodehopError(ErrorCodes.SANDBOX_LIBRARY_REFUSED, `library ${name} refused: ${reason}`);
}

/**
 * The operator's setting: `default` (the vetted set), or a comma-separated list of package names,
 * each optionally `name=Global`; `default` may be one of the entries. Empty: none.
 */
export function parseLibrariesSetting(text: string): LibrarySpec[] {
  const out: LibrarySpec[] = [];
  for (const raw of text.split(",")) {
    const entry = raw.trim();
    if (!entry) continue;
    if (entry === "default") {
      out.push(...DEFAULT_LIBRARIES.map(({ name, global }) => ({ name, global })));
      continue;
    }
    const eq = entry.indexOf("=");
    const name = (eq < 0 ? entry : entry.slice(0, eq)).trim();
    const global = eq < 0 ? undefined : entry.slice(eq + 1).trim();
    out.push(global ? { name, global } : { name });
  }
  return out;
}

/** `date-fns` -> `dateFns`, `@scope/csv-kit` -> `csvKit`. */
function derivedGlobal(name: string): string {
  const base = name.replace(/^@[^/]+\//, "").replace(/\.js$/, "");
  return base.replace(/[^A-Za-z0-9_$]+([A-Za-z0-9_$])?/g, (_, c: string | undefined) =>
    c ? c.toUpperCase() : "",
  );
}

function findPackageDir(name: string): string | undefined {
  for (const from of [join(process.cwd(), "noop.js"), import.meta.filename]) {
    const req = createRequire(from);
    try {
      return dirname(req.resolve(`${name}/package.json`));
    } catch {
      // `exports` may hide package.json: walk up from the entry instead.
    }
    try {
      let dir = dirname(req.resolve(name));
      for (;;) {
        const pj = join(dir, "package.json");
        try {
          if (JSON.parse(readFileSync(pj, "utf8")).name === name) return dir;
        } catch {
          // no package.json here
        }
        const up = dirname(dir);
        if (up === dir) break;
        dir = up;
      }
    } catch {
      // not found from here
    }
  }
  return undefined;
}

/** The package's CommonJS entry, relative to its directory. */
function cjsEntry(pkg: Record<string, any>): string | undefined {
  const pick = (e: unknown): string | undefined => {
    if (typeof e === "string") return e;
    if (e && typeof e === "object") {
      const o = e as Record<string, unknown>;
      return pick(o.require) ?? pick(o.node) ?? pick(o.default);
    }
    return undefined;
  };
  const exp = pkg.exports;
  if (exp !== undefined) {
    const dot =
      typeof exp === "string" || (exp && typeof exp === "object" && !("." in exp)) ? exp : exp["."];
    const found = pick(dot);
    if (found) return found;
  }
  return typeof pkg.main === "string" ? pkg.main : "index.js";
}

/** A file path for `base` as Node's CommonJS resolution would complete it, inside `root`. */
function completeFile(root: string, base: string): string | undefined {
  for (const c of [
    base,
    `${base}.js`,
    `${base}.cjs`,
    `${base}.json`,
    join(base, "index.js"),
    join(base, "index.cjs"),
  ]) {
    const rel = relative(root, c);
    if (rel.startsWith("..") || isAbsolute(rel)) return undefined;
    try {
      if (statSync(c).isFile()) return c;
    } catch {
      // next candidate
    }
  }
  return undefined;
}

/** Native code and install-time code anywhere in the package: refused. */
function checkNoNativeCode(name: string, dir: string, pkg: Record<string, any>): void {
  for (const s of ["preinstall", "install", "postinstall"])
    if (pkg.scripts?.[s]) refuse(name, `it runs an ${s} script (${String(pkg.scripts[s])})`);
  if (pkg.gypfile) refuse(name, "it builds native code (gypfile)");
  let seen = 0;
  const walk = (d: string, depth: number): void => {
    if (depth > 8) return;
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (++seen > 50_000) refuse(name, "the package has too many files to check");
      const p = join(d, e.name);
      if (e.isDirectory()) {
        if (e.name !== "node_modules") walk(p, depth + 1);
      } else if (e.name.endsWith(".node") || e.name === "binding.gyp")
        refuse(name, `it ships native code (${relative(dir, p)})`);
    }
  };
  walk(dir, 0);
}

/** `require("x")` specifiers of a CommonJS source; refuses what a bundle cannot hold. */
function requiredSpecifiers(name: string, file: string, source: string): string[] {
  let program: acorn.Node;
  try {
    program = acorn.parse(source, {
      ecmaVersion: "latest",
      sourceType: "script",
      allowHashBang: true,
      allowReturnOutsideFunction: true,
      locations: true,
    });
  } catch (err) {
    refuse(
      name,
      `${file} is not CommonJS JavaScript (${(err as Error).message}); ES-module-only packages are not supported`,
    );
  }
  const out: string[] = [];
  const visit = (n: any): void => {
    if (!n || typeof n.type !== "string") return;
    const at = () => `${file}:${n.loc?.start.line ?? "?"}`;
    if (n.type === "ImportExpression")
      refuse(name, `it imports modules dynamically (import() at ${at()})`);
    if (n.type === "MetaProperty" && n.meta?.name === "import")
      refuse(name, `it reads import.meta (${at()})`);
    if (
      n.type === "CallExpression" &&
      n.callee.type === "Identifier" &&
      n.callee.name === "require"
    ) {
      const a = n.arguments[0];
      if (n.arguments.length === 1 && a.type === "Literal" && typeof a.value === "string")
        out.push(a.value);
      else if (
        n.arguments.length === 1 &&
        a.type === "TemplateLiteral" &&
        a.expressions.length === 0
      )
        out.push(a.quasis[0].value.cooked);
      else refuse(name, `it calls require with a computed module name (${at()})`);
    }
    for (const key of Object.keys(n)) {
      if (key === "loc") continue;
      const v = n[key];
      if (Array.isArray(v)) for (const c of v) visit(c);
      else if (v && typeof v === "object") visit(v);
    }
  };
  visit(program);
  return out;
}

/** One library in the bundle the child reads (child/libraries.mjs). */
export interface BundledLibrary {
  name: string;
  global: string;
  entry: string;
  /** Source of every file the entry reaches, by path relative to the package. */
  files: Record<string, string>;
  /** Per file: its require specifiers resolved inside the package (others are outside it). */
  links: Record<string, Record<string, string>>;
}

function bundleOne(spec: LibrarySpec, global: string): { lib: BundledLibrary; version: string } {
  const { name } = spec;
  if (!PACKAGE_NAME.test(name)) refuse(name, "not an npm package name");
  const dir = spec.dir ? resolve(spec.dir) : findPackageDir(name);
  if (!dir) refuse(name, "it is not installed (npm install it where codehop runs)");
  let pkg: Record<string, any>;
  try {
    pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  } catch {
    refuse(name, `no readable package.json in ${dir}`);
  }
  checkNoNativeCode(name, dir, pkg);
  const entryPath = completeFile(dir, resolve(dir, cjsEntry(pkg) ?? "index.js"));
  if (!entryPath)
    refuse(name, "it has no CommonJS entry file (ES-module-only packages are not supported)");
  const files: Record<string, string> = {};
  const links: Record<string, Record<string, string>> = {};
  let bytes = 0;
  const key = (p: string) => relative(dir, p).split(sep).join("/");
  const queue = [entryPath];
  while (queue.length) {
    const path = queue.pop()!;
    const k = key(path);
    if (k in files) continue;
    if (Object.keys(files).length >= MAX_LIBRARY_FILES)
      refuse(name, `its entry reaches more than ${MAX_LIBRARY_FILES} files`);
    const source = readFileSync(path, "utf8");
    bytes += source.length;
    if (bytes > MAX_LIBRARY_BYTES) refuse(name, `its code is over ${MAX_LIBRARY_BYTES} bytes`);
    files[k] = source;
    if (path.endsWith(".json")) continue;
    if (path.endsWith(".mjs")) refuse(name, `${k} is an ES module; only CommonJS can be loaded`);
    links[k] = {};
    for (const s of requiredSpecifiers(name, k, source)) {
      let target: string | undefined;
      if (s.startsWith("./") || s.startsWith("../") || s === "." || s === "..")
        target = completeFile(dir, resolve(dirname(path), s));
      else if (s === name || s.startsWith(`${name}/`))
        target = completeFile(dir, resolve(dir, s.slice(name.length + 1) || cjsEntry(pkg)!));
      if (s.startsWith(".") && !target)
        refuse(name, `${k} requires ${s}, which is not in the package`);
      if (target) {
        links[k][s] = key(target);
        queue.push(target);
      }
      // Other modules (`fs`, `stream`, other packages) are not there: requiring one at load
      // refuses the library; later, the call throws (child/libraries.mjs).
    }
  }
  return {
    lib: { name, global, entry: key(entryPath), files, links },
    version: typeof pkg.version === "string" ? pkg.version : "?",
  };
}

/** Bundle directories not yet removed (a host that exits without closing its sandboxes). */
const bundleDirs = new Set<string>();
function removeBundles(): void {
  for (const dir of bundleDirs) rmSync(dir, { recursive: true, force: true });
  bundleDirs.clear();
}

/** Libraries checked and bundled for a sandbox's children. */
export interface LibraryBundle {
  /** The bundle file children read (in a private temporary directory), or null for none. */
  file: string | null;
  libraries: PreparedLibrary[];
  /** Removes the bundle's directory (when the sandbox closes). */
  dispose(): void;
}

/**
 * Checks and bundles `specs` (throws CODEHOP_SANDBOX_LIBRARY_REFUSED naming the package and the
 * reason). The same package twice, or two under one global, is a configuration error.
 */
export function prepareLibraries(specs: readonly LibrarySpec[]): LibraryBundle {
  if (!specs.length) return { file: null, libraries: [], dispose() {} };
  const bundled: BundledLibrary[] = [];
  const libraries: PreparedLibrary[] = [];
  const globals = new Set<string>();
  for (const spec of specs) {
    if (!spec || typeof spec.name !== "string")
      throw new CodehopError(ErrorCodes.CONFIG_INVALID, "a library needs a package name");
    const known = DEFAULT_LIBRARIES.find((d) => d.name === spec.name);
    const global = spec.global ?? known?.global ?? derivedGlobal(spec.name);
    if (!isBindableName(global) || RESERVED_GLOBALS.has(global) || global === "require")
      refuse(spec.name, `"${global}" cannot be its global name (a reserved or invalid name)`);
    if (globals.has(global) || bundled.some((b) => b.name === spec.name))
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `library ${spec.name} (global ${global}) is listed twice`,
      );
    globals.add(global);
    const { lib, version } = bundleOne(spec, global);
    bundled.push(lib);
    libraries.push({
      name: spec.name,
      global,
      version,
      about: known?.about ?? `the npm package ${spec.name}`,
    });
  }
  // Private: 0700 directory; the bundle is what children evaluate.
  const dir = mkdtempSync(join(tmpdir(), "codehop-libraries-"));
  const file = join(dir, "bundle.json");
  writeFileSync(file, JSON.stringify(bundled), { mode: 0o600 });
  if (bundleDirs.size === 0) process.once("exit", removeBundles);
  bundleDirs.add(dir);
  return {
    file,
    libraries,
    dispose: () => {
      bundleDirs.delete(dir);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The system prompt's line for the libraries (with the `{{capabilities}}` lines). */
export function librariesCapabilityLine(libraries: readonly PreparedLibrary[]): string | null {
  if (!libraries.length) return null;
  return `libraries, ready as globals (no import needed; import/require of these names works too): ${libraries
    .map((l) => `${l.global} (${l.name} ${l.version}; ${l.about})`)
    .join("; ")}`;
}
