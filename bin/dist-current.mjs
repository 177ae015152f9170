// Whether dist/ (the build) is current with the sources it was built from, so a clone can run the
// built CLI instead of compiling TypeScript through tsx at every start (bin/codehop.mjs), and the
// test suite can rebuild once when it is not (vitest.global-setup.ts). `npm run build`
// (bin/build.mjs) writes dist/.build.json when the build succeeded: the time it started and the
// sources it read. The build is current when no file or folder under those sources changed since
// that time (a folder's time changes when a file is added, removed or renamed in it). Not shipped:
// an installed package has no src/ and always runs dist/.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository (or unpacked package) root. */
export const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** What bin/build.mjs records in dist/. */
export const STAMP = "dist/.build.json";

/**
 * The first path under `path` (a file or folder) changed at or after `since` (ms), or undefined.
 * @param {string} path
 * @param {number} since
 * @returns {string | undefined}
 */
export function changedSince(path, since) {
  const st = statSync(path, { throwIfNoEntry: false });
  if (!st) return path; // a source named by the stamp is gone: the build is not what it names
  if (st.mtimeMs >= since) return path;
  if (!st.isDirectory()) return undefined;
  for (const name of readdirSync(path)) {
    const changed = changedSince(join(path, name), since);
    if (changed) return changed;
  }
  return undefined;
}

/**
 * Why dist/ is not current (a sentence), or undefined when it is. Cheap enough for every start:
 * one read and a stat per source file and folder (a few milliseconds for src/).
 * @returns {string | undefined}
 */
export function whyDistIsStale(root = ROOT) {
  let stamp;
  try {
    stamp = JSON.parse(readFileSync(join(root, STAMP), "utf8"));
  } catch {
    return "dist/ was not built (run `npm run build`)";
  }
  if (typeof stamp.started !== "number" || !Array.isArray(stamp.sources))
    return `${STAMP} is not one bin/build.mjs wrote`;
  for (const source of stamp.sources) {
    const changed = changedSince(join(root, source), stamp.started);
    if (changed) return `${changed} changed after the last build`;
  }
  return undefined;
}
