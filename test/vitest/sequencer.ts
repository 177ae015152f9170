import { readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/** Seconds each test file took in a recorded full run (test/vitest/durations.json). */
function recordedDurations(root: string): Record<string, number> {
  try {
    return JSON.parse(readFileSync(join(root, "test/vitest/durations.json"), "utf8")).files ?? {};
  } catch {
    return {};
  }
}

/**
 * Runs the longest test files first, so the last minutes of a run are not one long file on one
 * core while the other idles. How long a file takes comes from vitest's own cache of the last run
 * on this machine when it has one, else from test/vitest/durations.json (a full run recorded with
 * `npm run test:durations`: a fresh clone has no cache). Files known to neither go first (new
 * files: their cost is unknown); the rest by size, as vitest does.
 */
export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const recorded = recordedDurations(root);
    const seconds = (spec: TestSpecification): number | undefined => {
      const path = relative(root, spec.moduleId);
      const cached = this.ctx.cache.getFileTestResults(`${spec.project.name}:${path}`);
      if (cached && !cached.failed && cached.duration > 0) return cached.duration / 1000;
      return recorded[path];
    };
    const known = files.map((spec) => ({ spec, s: seconds(spec) }));
    return known
      .sort((a, b) => {
        if (a.s === undefined || b.s === undefined)
          return a.s === undefined && b.s !== undefined
            ? -1
            : b.s === undefined && a.s !== undefined
              ? 1
              : 0;
        return b.s - a.s;
      })
      .map((x) => x.spec);
  }
}
