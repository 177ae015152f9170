import { readFileSync } from "node:fs";
import { join } from "node:path";
import semver from "semver";
import { describe, expect, it } from "vitest";

// package.json "engines" must be honest: every package `npm install` puts on this platform (the
// lock file) accepts the oldest Node of each line codehop supports, and the Node running now.
// A dependency bump that wants a newer Node fails here instead of printing EBADENGINE warnings
// on every install.
const repo = process.cwd();
const manifest = JSON.parse(readFileSync(join(repo, "package.json"), "utf8"));
const lock = JSON.parse(readFileSync(join(repo, "package-lock.json"), "utf8"));

/**
 * Dependencies whose declared Node range is narrower than codehop's, each with the Node versions
 * it was tested on here and why it stays. Any other refusal fails the test.
 * - pg-boss 12 declares node >= 22.12 (every pg-boss with per-job heartbeats does; 10.x has none,
 *   so a killed worker's run would wait for its whole expiry). It is loaded only by `codehop serve`,
 *   `codehop worker` and `eval --queue`, whose tests (test/server) run on Node 20 in CI.
 */
const KNOWN_NARROWER: Readonly<Record<string, string>> = { "pg-boss": ">=22.12.0" };

/** The lowest version of each `||` branch of a range ("^20.19.0 || >=22.13.0" → 20.19.0, 22.13.0). */
function lowestVersions(range: string): string[] {
  return new semver.Range(range).set.map((comparators) => {
    const low = comparators.find((c) => c.operator === ">=" || c.operator === "");
    return low!.semver.version;
  });
}

/** Lock entries installed on this OS and CPU. */
function installedHere(): Array<
  [string, { version: string; engines?: { node?: string }; dev?: boolean }]
> {
  return Object.entries(lock.packages as Record<string, any>).filter(([path, p]) => {
    if (!path) return false;
    if (p.os && !p.os.includes(process.platform)) return false;
    if (p.cpu && !p.cpu.includes(process.arch)) return false;
    return true;
  });
}

describe("supported Node versions (package.json engines)", () => {
  const range = manifest.engines.node as string;

  it("covers the Node running the tests", () => {
    expect(semver.satisfies(process.version, range)).toBe(true);
  });

  it("every dependency installed here accepts the oldest supported Node of each line, and this one", () => {
    const versions = [...lowestVersions(range), process.version];
    expect(lowestVersions(range)).toEqual(["20.19.0", "22.13.0"]);
    const refusing = installedHere().flatMap(([path, p]) => {
      const wanted = p.engines?.node;
      if (!wanted) return [];
      const name = path.replace(/^.*node_modules\//, "");
      if (KNOWN_NARROWER[name] === wanted) return [];
      return versions
        .filter((v) => !semver.satisfies(v, wanted))
        .map((v) => `${name}@${p.version}${p.dev ? " (dev)" : ""} wants node ${wanted}, not ${v}`);
    });
    expect(refusing).toEqual([]);
  });

  it("lists only exceptions that are still installed with the range they were accepted for", () => {
    for (const [name, wanted] of Object.entries(KNOWN_NARROWER)) {
      const entry = installedHere().find(([path]) => path.endsWith(`node_modules/${name}`));
      expect(entry?.[1].engines?.node, name).toBe(wanted);
    }
  });
});

// npm 11.16+ warns about dependency install scripts nobody reviewed, and npm 12 skips them: an
// unreviewed better-sqlite3 would install without its native binding and every command would
// fail. package.json "allowScripts" records the review; a new dependency with an install script
// fails here until it is approved (true) or denied (false) there.
describe("install scripts (package.json allowScripts)", () => {
  const reviewed = (manifest.allowScripts ?? {}) as Record<string, boolean>;
  const withScripts = installedHere()
    .filter(([, p]) => (p as { hasInstallScript?: boolean }).hasInstallScript)
    .map(([path]) => path.replace(/^.*node_modules\//, ""));

  it("every installed dependency with an install script is reviewed", () => {
    expect(withScripts.filter((name) => !(name in reviewed))).toEqual([]);
  });

  it("the native SQLite binding's build is allowed, and no review names a package not installed", () => {
    expect(reviewed["better-sqlite3"]).toBe(true);
    expect(Object.keys(reviewed).filter((name) => !withScripts.includes(name))).toEqual([]);
  });
});
