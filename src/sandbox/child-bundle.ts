/**
 * The sandbox child as one CommonJS file. `npm run build` (bin/bundle.mjs, bundleChild) compiles the
 * child's ES modules (child/*.mjs) with esbuild into `child/child.cjs`, whose first line names a
 * digest of the modules it was made from. A child started from it costs ~20 ms less CPU than one
 * loading the 12 modules (no ES module loader, one file read and compiled; bench/sandbox.bench.ts,
 * "child start CPU time"), and every agent run starts at least one child.
 *
 * The digest tells a current bundle from one of older modules (a child module edited, not yet
 * built again); it is not a seal: whoever can write dist/ can change any code codehop runs.
 * No side effects: the build imports this module from the folder it is building.
 */
import { createHash } from "node:crypto";
import { closeSync, openSync, readFileSync, readSync, readdirSync, realpathSync } from "node:fs";
import { basename, join } from "node:path";

/** File name of the bundled child, beside the modules it was made from. */
export const CHILD_BUNDLE_NAME = "child.cjs";

const HEADER = "// codehop sandbox child, bundled from child/*.mjs: sha256 ";

/** The child's ES modules in `dir` (child/*.mjs), sorted. */
export function childModuleFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".mjs"))
    .sort()
    .map((f) => join(dir, f));
}

/** Digest of the child's modules in `dir`: names and bytes of every child/*.mjs. */
export function childSourcesDigest(dir: string): string {
  const hash = createHash("sha256");
  for (const file of childModuleFiles(dir)) {
    const bytes = readFileSync(file);
    hash.update(`${basename(file)}\0${bytes.length}\0`).update(bytes);
  }
  return hash.digest("hex");
}

/** The bundle's first line, naming the digest of the modules it was made from. */
export function childBundleHeader(digest: string): string {
  return `${HEADER}${digest}`;
}

/** The digest a bundle file names on its first line (undefined: no such file, or no header). */
export function childBundleDigest(file: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch {
    return undefined;
  }
  try {
    const buf = Buffer.alloc(HEADER.length + 64);
    const n = readSync(fd, buf, 0, buf.length, 0);
    const head = buf.subarray(0, n).toString("utf8");
    return head.startsWith(HEADER) && /^[0-9a-f]{64}$/.test(head.slice(HEADER.length))
      ? head.slice(HEADER.length)
      : undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * The first of `candidates` that is a bundle of exactly the modules in `dir` (its real path), or
 * undefined when none is.
 */
export function childBundleFor(dir: string, candidates: readonly string[]): string | undefined {
  const digest = childSourcesDigest(dir);
  const file = candidates.find((f) => childBundleDigest(f) === digest);
  return file === undefined ? undefined : realpathSync(file);
}
