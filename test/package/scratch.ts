import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  cpSync,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, relative } from "node:path";
import { promisify } from "node:util";
import { expect } from "vitest";
import { whyDistIsStale } from "../../bin/dist-current.mjs";

// What the package tests share: a copy of a package with the repository's node_modules, and a
// scratch project installed offline from a lock file made of the repository's lock entries, its
// dependencies laid out beforehand from the repository's node_modules (see placeLockEntries).

const run = promisify(execFile);

/**
 * Gives the copy `pkg` of a package the repository's node_modules, entry by entry, except the
 * workspace packages: those link to their copies under `pkg/packages/` (what `npm pack` bundles
 * comes from the copy, built by the copy's own `prepare`).
 */
export function linkNodeModules(repo: string, pkg: string, workspaces: readonly string[]): void {
  const modules = join(pkg, "node_modules");
  mkdirSync(modules);
  const scopes = new Set(workspaces.map((name) => name.split("/")[0]));
  for (const entry of readdirSync(join(repo, "node_modules"))) {
    if (!scopes.has(entry)) {
      symlinkSync(join(repo, "node_modules", entry), join(modules, entry), "dir");
      continue;
    }
    mkdirSync(join(modules, entry));
    for (const inner of readdirSync(join(repo, "node_modules", entry))) {
      const name = `${entry}/${inner}`;
      const target = workspaces.includes(name)
        ? relative(join(modules, entry), join(pkg, "packages", inner))
        : join(repo, "node_modules", name);
      symlinkSync(target, join(modules, name), "dir");
    }
  }
}

type LockEntry = Record<string, any>;

/**
 * The repository's lock entries installed under node_modules/ (no workspace folders, no links),
 * all runtime ones, or only what `roots` need (their dependencies, optional ones and peers,
 * resolved as Node does: nested first, then at the top).
 */
export function lockEntries(
  lock: { packages: Record<string, LockEntry> },
  roots?: readonly string[],
): Record<string, LockEntry> {
  const installed = Object.entries(lock.packages).filter(
    ([path, entry]) => path.startsWith("node_modules/") && !entry.link,
  );
  if (!roots) return Object.fromEntries(installed.filter(([, entry]) => !entry.dev));
  const byPath = new Map(installed);
  const out: Record<string, LockEntry> = {};
  const resolve = (from: string, name: string): string | undefined => {
    for (let dir = from; ;) {
      const path = `${dir ? `${dir}/` : ""}node_modules/${name}`;
      if (byPath.has(path)) return path;
      if (!dir) return undefined;
      const at = dir.lastIndexOf("node_modules/");
      dir = at <= 0 ? "" : dir.slice(0, at - 1);
    }
  };
  const visit = (path: string) => {
    if (out[path]) return;
    const entry = byPath.get(path)!;
    out[path] = { ...entry, dev: undefined, devOptional: undefined };
    for (const deps of [entry.dependencies, entry.optionalDependencies, entry.peerDependencies])
      for (const name of Object.keys(deps ?? {})) {
        const found = resolve(path, name);
        if (found) visit(found);
      }
  };
  for (const name of roots) visit(resolve("", name)!);
  return out;
}

/**
 * Lays the lock `entries` out under `dir`'s node_modules as `npm install` of that lock would:
 * the same package versions at the same paths, with their bin links and npm's record of what is
 * installed (node_modules/.package-lock.json). Their files are hard links to the repository's
 * node_modules (copies across file systems), which that same lock installed: `offlineInstall`
 * then finds them in place and unpacks only the tarball under test. Unpacking the ~400
 * dependencies from the npm cache instead cost the suite about 20 CPU-seconds per scratch
 * project and tests npm, not the package. Nothing writes into these files: npm replaces a
 * package it changes (a new folder), and `copySqliteAddon` leaves an addon in place.
 * Platform packages the repository did not install (another OS's optional builds) are left out,
 * as npm leaves them out.
 */
export function placeLockEntries(
  repo: string,
  dir: string,
  entries: Record<string, LockEntry>,
): void {
  const placed: Record<string, LockEntry> = {};
  for (const [path, entry] of Object.entries(entries)) {
    if (!existsSync(join(repo, path, "package.json"))) continue;
    linkTree(join(repo, path), join(dir, path));
    placed[path] = entry;
  }
  // The bin links npm makes (`node_modules/.bin`, and one per nested node_modules): without
  // them npm takes the package for half-installed and unpacks it again.
  for (const [path, entry] of Object.entries(placed)) {
    const bins: Record<string, string> =
      typeof entry.bin === "string" ? { [path.split("/").pop()!]: entry.bin } : (entry.bin ?? {});
    const binDir = join(dir, dirname(path), ".bin");
    for (const [name, target] of Object.entries(bins)) {
      mkdirSync(binDir, { recursive: true });
      if (!existsSync(join(binDir, name)))
        symlinkSync(relative(binDir, join(dir, path, target)), join(binDir, name));
    }
  }
  // Last, so it is newer than every folder above: npm trusts it only then.
  writeFileSync(
    join(dir, "node_modules/.package-lock.json"),
    JSON.stringify({ name: "scratch", lockfileVersion: 3, requires: true, packages: placed }),
  );
}

/** `to` made of hard links to `from`'s files (copies across file systems), its node_modules left out. */
function linkTree(from: string, to: string): void {
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    if (entry.name === "node_modules") continue;
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    if (entry.isDirectory()) linkTree(source, target);
    else if (entry.isSymbolicLink()) symlinkSync(readlinkSync(source), target);
    else {
      try {
        linkSync(source, target);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EXDEV") throw e;
        copyFileSync(source, target);
      }
    }
  }
}

/** `npm install` in `dir` from the npm cache only, with no install scripts. */
export async function offlineInstall(dir: string): Promise<void> {
  const cache = (await run("npm", ["config", "get", "cache"])).stdout.trim();
  await run(
    "npm",
    [
      "install",
      "--offline",
      "--cache",
      cache,
      "--ignore-scripts",
      "--legacy-peer-deps",
      "--no-audit",
      "--no-fund",
    ],
    { cwd: dir, timeout: 240_000 },
  );
}

/**
 * better-sqlite3's compiled addon, copied from the repository's build (same version, by the
 * lock): compiling it takes minutes offline and is better-sqlite3's business, not the package's.
 * An addon already there is the repository's own, placed by {@link placeLockEntries} (a hard
 * link: copying onto it would rewrite the repository's file under running tests).
 */
export function copySqliteAddon(repo: string, dir: string): void {
  const addon = "node_modules/better-sqlite3/build/Release/better_sqlite3.node";
  if (existsSync(join(dir, addon))) return;
  mkdirSync(dirname(join(dir, addon)), { recursive: true });
  copyFileSync(join(repo, addon), join(dir, addon));
}

/**
 * `npm pack --json` of the package folder `pkg` into `root`, without its build scripts when `built`
 * (the build is current and copied): npm's record of the tarball (file name, packed files).
 */
export async function npmPack(
  pkg: string,
  root: string,
  built: boolean,
): Promise<{ filename: string; files: Array<{ path: string }> }> {
  const args = [
    "pack",
    "--json",
    "--pack-destination",
    root,
    ...(built ? ["--ignore-scripts"] : []),
  ];
  const { stdout } = await run("npm", args, {
    cwd: pkg,
    timeout: 240_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  // `prepare` (the build, when it runs) logs before the JSON.
  return JSON.parse(stdout.slice(stdout.indexOf("[")))[0];
}

/** A workspace package packed and installed into an empty project (see installPackedWorkspace). */
export interface PackedWorkspace {
  /** The files the tarball holds. */
  packed: string[];
  /** The package's package.json. */
  manifest: Record<string, any>;
  /** The scratch project it is installed in. */
  scratch: string;
}

/**
 * `npm pack` of workspace package `packages/<folder>` (a copy with the repository's node_modules,
 * where its build tools are hoisted: its `prepack` builds dist/), installed offline into the new
 * project `<root>/scratch` beside `others` (and what they need, nothing more) at the versions the
 * repository locks: what a user who has never heard of codehop gets from `npm install`.
 */
export async function installPackedWorkspace(
  repo: string,
  root: string,
  folder: string,
  others: readonly string[],
): Promise<PackedWorkspace> {
  const pkg = join(root, folder);
  // When the repository's build is current with its sources (vitest's global setup just made
  // sure), the package's dist/ is what `prepack` would build (`npm run build` of the workspaces
  // runs the same script): the copy takes it and packs with no scripts, as pack.test.ts does;
  // otherwise the copy's own `prepack` builds it.
  const built = whyDistIsStale(repo) === undefined;
  cpSync(join(repo, "packages", folder), pkg, {
    recursive: true,
    filter: (src) => !(built ? /[\\/]node_modules$/ : /[\\/](dist|node_modules)$/).test(src),
  });
  symlinkSync(join(repo, "node_modules"), join(pkg, "node_modules"), "dir");
  const info = await npmPack(pkg, root, built);
  const tarball = join(root, info.filename);
  const manifest = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8"));

  const scratch = join(root, "scratch");
  mkdirSync(scratch);
  const lock = JSON.parse(readFileSync(join(repo, "package-lock.json"), "utf8"));
  const spec = `file:${tarball}`;
  const entries = lockEntries(lock, others);
  const dependencies: Record<string, string> = { [manifest.name]: spec };
  for (const name of others) dependencies[name] = entries[`node_modules/${name}`].version;
  writeFileSync(
    join(scratch, "package.json"),
    JSON.stringify({ name: "scratch", private: true, type: "module", dependencies }),
  );
  const packages: Record<string, unknown> = {
    "": { name: "scratch", dependencies },
    [`node_modules/${manifest.name}`]: {
      version: manifest.version,
      resolved: spec,
      integrity: `sha512-${createHash("sha512").update(readFileSync(tarball)).digest("base64")}`,
      license: manifest.license,
      peerDependencies: manifest.peerDependencies,
      peerDependenciesMeta: manifest.peerDependenciesMeta,
      engines: manifest.engines,
    },
    ...entries,
  };
  writeFileSync(
    join(scratch, "package-lock.json"),
    JSON.stringify({ name: "scratch", lockfileVersion: 3, requires: true, packages }),
  );
  placeLockEntries(repo, scratch, entries);
  await offlineInstall(scratch);
  return { packed: info.files.map((f: { path: string }) => f.path), manifest, scratch };
}

/**
 * The imports of the package sources in `dir` that are not their own files, each with whether
 * `dir/../package.json` declares it (a dependency or a peer; Node's own modules count as declared).
 */
export function importsOf(dir: string): Array<{ file: string; spec: string; declared: boolean }> {
  const manifest = JSON.parse(readFileSync(join(dir, "../package.json"), "utf8"));
  const declared = [
    ...Object.keys(manifest.dependencies ?? {}),
    ...Object.keys(manifest.peerDependencies ?? {}),
  ];
  const out: Array<{ file: string; spec: string; declared: boolean }> = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".ts"))) {
    const text = readFileSync(join(dir, file), "utf8");
    for (const m of text.matchAll(/(?:from|import)\s*\(?\s*["']([^"']+)["']/g)) {
      const spec = m[1];
      if (spec.startsWith("./")) continue;
      const name = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec;
      out.push({ file, spec, declared: spec.startsWith("node:") || declared.includes(name) });
    }
  }
  return out;
}

/** The first process's script of the resume-and-fork scenario: a run with a limit of 5 records. */
const FIRST_RUN = `const out = await graph.invoke({ limit: 5 }, config); console.log(JSON.stringify(out.log));`;

/** The second process's script: read back, list the history, continue to 8, fork from 2 records. */
const SECOND_RUN = `const state = await graph.getState(config);
const history = [];
for await (const s of graph.getStateHistory(config)) history.push(s.values.log?.length ?? 0);
const more = await graph.invoke({ limit: 8 }, config);
const early = (await (async () => { for await (const s of graph.getStateHistory(config)) if (s.values.log?.length === 2) return s; })());
const fork = await graph.invoke(null, { configurable: { ...early.config.configurable } });
console.log(JSON.stringify({ before: state.values.log.length, history, after: more.log.length, fork: fork.log }));`;

/**
 * What both saver packages' pack tests check with a plain LangGraph graph on the installed saver:
 * a run checkpoints, and a second process resumes it and forks from an earlier checkpoint.
 * `runGraph(body)` runs `body` in a new process with `graph` and `config` over the same store.
 */
export async function expectResumeAndFork(
  runGraph: (body: string) => Promise<string>,
): Promise<void> {
  expect(JSON.parse(await runGraph(FIRST_RUN))).toEqual([
    "record 0",
    "record 1",
    "record 2",
    "record 3",
    "record 4",
  ]);
  const result = JSON.parse(await runGraph(SECOND_RUN));
  expect(result.before).toBe(5);
  expect(result.history).toEqual([5, 4, 3, 2, 1, 0, 0]);
  expect(result.after).toBe(8);
  // Forked from the first run's checkpoint with two records: that run's limit (5) again.
  expect(result.fork).toEqual(["record 0", "record 1", "record 2", "record 3", "record 4"]);
}
