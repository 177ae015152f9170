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
      return versions
        .filter((v) => !semver.satisfies(v, wanted))
        .map(
          (v) =>
            `${path.replace(/^.*node_modules\//, "")}@${p.version}${p.dev ? " (dev)" : ""} wants node ${wanted}, not ${v}`,
        );
    });
    expect(refusing).toEqual([]);
  });
});
