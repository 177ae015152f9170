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

/** The files in a random order fixed by `seed` (`--sequence.shuffle --sequence.seed=N`). */
function shuffled<T>(items: T[], seed: number): T[] {
  let state = seed >>> 0 || 1;
  const next = () => {
    // mulberry32: a small seeded generator, so a failing order can be run again
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/**
 * Runs the longest test files first, so the last minutes of a run are not one long file on one
 * core while the other idles. How long a file takes comes from vitest's own cache of the last run
 * on this machine when it has one, else from test/vitest/durations.json (a full run recorded with
 * `npm run test:durations`: a fresh clone has no cache). Files known to neither go first (new
 * files: their cost is unknown); the rest by size, as vitest does.
 *
 * The files of isolated projects (a process each) come before those of shared ones
 * (`isolate: false`, vitest.config.ts): a worker that runs shared files keeps its process, and its
 * module cache, only while the next file in the queue is a shared one too.
 *
 * With `--sequence.shuffle` the order is random (seeded; vitest prints the seed) within each of the
 * two groups, and so is each file's order of tests; `--sequence.shuffle.files` shuffles the files
 * only: a file that leaks state into the shared worker shows up as another file failing.
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
    const { shuffle } = this.ctx.config.sequence;
    // `--sequence.shuffle.files` (files only, each file's tests in their order): vitest resolves
    // it to `shuffle: false` when a sequencer is set, so the flag is read from the command line.
    const filesOnly = process.argv.some((a) => a.startsWith("--sequence.shuffle.files"));
    const seed = (this.ctx.config.sequence.seed ??= Date.now());
    if (filesOnly) process.stdout.write(`      Running test files with seed "${seed}"\n`);
    const order = (group: TestSpecification[]): TestSpecification[] => {
      if (shuffle || filesOnly) return shuffled(group, seed);
      const known = group.map((spec) => ({ spec, s: seconds(spec) }));
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
    };
    const isolated = files.filter((spec) => spec.project.config.isolate !== false);
    const shared = files.filter((spec) => spec.project.config.isolate === false);
    return [...order(isolated), ...order(shared)];
  }
}
