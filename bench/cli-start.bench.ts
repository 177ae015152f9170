import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { whyDistIsStale } from "../bin/dist-current.mjs";
import { openPersistence } from "../src/persistence/index.ts";
import { type BenchSection, BenchSkipped, fmt, percentile } from "./lib.ts";

/**
 * CLI start (issue 24): how long a command takes from `node` starting to the process exiting, as a
 * ratio to a bare `node -e 0` measured in the same rounds. `bin/codehop.mjs` is what `codehop` and
 * `npx codehop` run (npx adds its own start on top); in a clone it runs dist/ while the build is
 * current with src/. The "sources through tsx" rows run the same commands the way a clone with
 * edits since the last build does (and every clone did before): src/cli/main.ts through tsx.
 */

const ROUNDS = 9;
const THREADS = 100;
const ROOT = join(import.meta.dirname, "..");
const BIN = join(ROOT, "bin/codehop.mjs");
/** The stale-build path of bin/codehop.mjs, forced: tsx's loader, then src/cli/main.ts. */
const FROM_SOURCE = `const { register } = await import("tsx/esm/api"); register(); const { main } = await import(${JSON.stringify(join(ROOT, "src/cli/main.ts"))}); await main(["node", "codehop", ...process.argv.slice(1)]);`;

/** Wall time of one run, ms (exit code checked: a failing command is no measurement). */
function timed(args: string[]): number {
  const t = performance.now();
  const r = spawnSync(process.execPath, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, CODEHOP_ENV_FILE: "none" },
    encoding: "utf8",
  });
  const ms = performance.now() - t;
  if (r.status !== 0) throw new Error(`node ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
  return ms;
}

export default async function cliStartBench(): Promise<BenchSection> {
  const stale = whyDistIsStale();
  if (stale) throw new BenchSkipped(`dist/ is not current (${stale}): run \`npm run build\` first`);
  const home = mkdtempSync(join(tmpdir(), "codehop-bench-cli-"));
  try {
    const p = openPersistence(home);
    for (let i = 0; i < THREADS; i++) {
      const id = `bench-thread-${String(i).padStart(3, "0")}`;
      await p.threads.start(id, { question: `Benchmark question number ${i}?`, options: {} });
      if (i % 4) await p.threads.finish(id, `Answer ${i}.`, 1000 + i);
      else await p.threads.fail(id, `failure ${i}`);
    }
    p.close();
    const cases: Array<{ name: string; args: string[]; target?: number }> = [
      { name: "node -e 0", args: ["-e", "0"] },
      { name: "codehop --version", args: [BIN, "--version"], target: 3 },
      { name: "codehop threads --help", args: [BIN, "threads", "--help"], target: 4 },
      { name: "codehop ask --help", args: [BIN, "ask", "--help"], target: 4 },
      {
        name: `codehop threads (${THREADS} threads)`,
        args: [BIN, "threads", "--home", home],
        target: 6,
      },
      { name: "codehop --help (every command listed)", args: [BIN, "--help"] },
      {
        name: "sources through tsx: --version",
        args: ["--input-type=module", "-e", FROM_SOURCE, "--", "--version"],
      },
      {
        name: `sources through tsx: threads (${THREADS} threads)`,
        args: ["--input-type=module", "-e", FROM_SOURCE, "--", "threads", "--home", home],
      },
    ];
    // Interleaved rounds: load on the machine falls on every case alike; one warm-up round first.
    const ms = cases.map(() => [] as number[]);
    for (let round = 0; round <= ROUNDS; round++)
      cases.forEach((c, i) => {
        const t = timed(c.args);
        if (round > 0) ms[i].push(t);
      });
    const base = percentile(ms[0], 50);
    const verdicts: string[] = [];
    const rows = cases.map((c, i) => {
      const median = percentile(ms[i], 50);
      const ratio = median / base;
      if (c.target !== undefined)
        verdicts.push(
          `${c.name} <= ${c.target}x node -e 0: ${ratio <= c.target ? "MET" : "NOT MET"} (${fmt(ratio)}x)`,
        );
      return [
        c.name,
        fmt(median, 0),
        fmt(percentile(ms[i], 10), 0),
        `${fmt(ratio)}x`,
        c.target ? `<= ${c.target}x` : "",
      ];
    });
    return {
      title: "CLI: start to exit, as a ratio to node -e 0",
      description: `Wall time of \`node bin/codehop.mjs <args>\` (what \`codehop\` runs; \`npx\` adds its own start) from spawn to exit, median and p10 of ${ROUNDS} interleaved rounds after a warm-up, beside \`node -e 0\` in the same rounds. A clone whose dist/ is current with src/ runs the build; "sources through tsx" is what it runs after an edit until \`npm run build\` (and what every clone ran before). The database holds ${THREADS} threads in its registry.`,
      columns: ["command", "median ms", "p10 ms", "vs node -e 0", "target"],
      rows,
      verdicts,
    };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}
