import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { whyDistIsStale } from "../bin/dist-current.mjs";
import { type BenchSection, BenchSkipped, fmt, percentile } from "./lib.ts";

/**
 * What each CLI command costs to start (issue 27): the modules it loads and its CPU time, built
 * (`bin/codehop.mjs` running dist/) and from the sources through tsx (a clone after an edit).
 * Modules are listed by test/app/loaded-modules.mjs (a loader hook, plus require's cache); CPU is
 * user + system seconds of the whole command (children included) from /usr/bin/time, median of
 * REPS runs. CPU time, unlike wall time, hardly moves with the load of a shared machine.
 */

const REPS = 5;
const ROOT = join(import.meta.dirname, "..");
const BIN = join(ROOT, "bin/codehop.mjs");
const HOOK = join(ROOT, "test/app/loaded-modules.mjs");
const TIME = "/usr/bin/time";
/** The stale-build path of bin/codehop.mjs, forced: tsx's loader, then src/cli/main.ts. */
const FROM_SOURCE = `const { register } = await import("tsx/esm/api"); register(); const { main } = await import(${JSON.stringify(join(ROOT, "src/cli/main.ts"))}); await main(["node", "codehop", ...process.argv.slice(1)]);`;

const env = (extra: Record<string, string> = {}) => ({
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  CODEHOP_ENV_FILE: "none",
  NO_COLOR: "1",
  ...extra,
});

function nodeArgs(fromSource: boolean, args: string[]): string[] {
  return fromSource ? ["--input-type=module", "-e", FROM_SOURCE, "--", ...args] : [BIN, ...args];
}

/** Distinct modules one run loaded. */
function modulesLoaded(fromSource: boolean, args: string[], scratch: string): number {
  const list = join(scratch, "modules.txt");
  rmSync(list, { force: true });
  const r = spawnSync(process.execPath, ["--import", HOOK, ...nodeArgs(fromSource, args)], {
    cwd: ROOT,
    env: env({ CODEHOP_TEST_MODULE_LIST: list }),
    encoding: "utf8",
  });
  if (r.status !== 0) throw new Error(`codehop ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
  return new Set(readFileSync(list, "utf8").split("\n").filter(Boolean)).size;
}

/** Median CPU seconds (user + system, children included) of REPS runs. */
function cpuSeconds(fromSource: boolean, args: string[], after?: () => void): number {
  const runs: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const r = spawnSync(TIME, ["-f", "%U %S", process.execPath, ...nodeArgs(fromSource, args)], {
      cwd: ROOT,
      env: env(),
      encoding: "utf8",
    });
    if (r.status !== 0)
      throw new Error(`codehop ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
    const [user, system] = r.stderr.trim().split("\n").at(-1)!.split(" ").map(Number);
    runs.push(user + system);
    after?.();
  }
  return percentile(runs, 50);
}

export default async function cliModulesBench(): Promise<BenchSection> {
  const stale = whyDistIsStale();
  if (stale) throw new BenchSkipped(`dist/ is not current (${stale}): run \`npm run build\` first`);
  if (!existsSync(TIME)) throw new BenchSkipped(`${TIME} is not installed (Debian package time)`);
  const home = mkdtempSync(join(tmpdir(), "codehop-bench-modules-"));
  try {
    // One finished QA thread to read: the offline demo's towers question.
    const demo = spawnSync(
      process.execPath,
      [BIN, "demo", "--question", "towers", "--json", "--home", home],
      { cwd: ROOT, env: env(), encoding: "utf8" },
    );
    if (demo.status !== 0) throw new Error(`codehop demo failed: ${demo.stderr}`);
    const thread = String(JSON.parse(demo.stdout.trim().split("\n")[0]).thread_id);
    const demoHome = join(home, "demo");
    const cases: Array<{ name: string; args: string[]; after?: () => void }> = [
      { name: "--version", args: ["--version"] },
      { name: "--help", args: ["--help"] },
      { name: "ask --help", args: ["ask", "--help"] },
      { name: "threads", args: ["threads", "--home", home] },
      { name: "history <thread>", args: ["history", thread, "--home", home] },
      { name: "show <thread>", args: ["show", thread, "--home", home] },
      { name: "check", args: ["check", "--home", home] },
      { name: "resume <finished thread>", args: ["resume", thread, "-q", "--home", home] },
      {
        name: "demo --question towers -q (agents, model, sandbox children)",
        args: ["demo", "--question", "towers", "-q", "--home", demoHome],
        after: () => rmSync(demoHome, { recursive: true, force: true }),
      },
    ];
    const rows = cases.map((c) => {
      const row: (string | number)[] = [`codehop ${c.name}`];
      for (const fromSource of [false, true]) {
        row.push(modulesLoaded(fromSource, c.args, home));
        c.after?.();
        row.push(fmt(cpuSeconds(fromSource, c.args, c.after)));
      }
      return row;
    });
    return {
      title: "CLI: modules loaded and CPU seconds per command",
      description: `Per command: the distinct modules the process loads (a loader hook plus require's cache, test/app/loaded-modules.mjs) and the CPU seconds (user + system, children included, /usr/bin/time), median of ${REPS} runs; built (\`node bin/codehop.mjs\`, dist/) and from the sources through tsx (what a clone runs after an edit until \`npm run build\`). The thread read is the offline demo's towers question.`,
      columns: ["command", "modules (built)", "CPU-s (built)", "modules (tsx)", "CPU-s (tsx)"],
      rows,
    };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}
