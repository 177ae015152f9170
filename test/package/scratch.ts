import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, readdirSync, symlinkSync } from "node:fs";
import { join, relative } from "node:path";
import { promisify } from "node:util";

// What the package tests share: a copy of a package with the repository's node_modules, and a
// scratch project installed offline from a lock file made of the repository's lock entries.

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
 */
export function copySqliteAddon(repo: string, dir: string): void {
  const addon = "node_modules/better-sqlite3/build/Release";
  mkdirSync(join(dir, addon), { recursive: true });
  copyFileSync(join(repo, addon, "better_sqlite3.node"), join(dir, addon, "better_sqlite3.node"));
}
