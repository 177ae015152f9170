import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { whyDistIsStale } from "../bin/dist-current.mjs";
import { postgresUnavailableReason, startTestCluster } from "../src/testing/postgres-cluster.ts";
import { type BenchSection, BenchSkipped, fmt, percentile } from "./lib.ts";
import { ownCpuMs } from "./proc-cpu.ts";

/**
 * What each CLI command costs to start (issue 27): the files it loads and its CPU time, three ways:
 * `bin/codehop.mjs` as a user runs it (the bundled CLI, dist/bundle; `serve` and `worker` from
 * dist/cli when their langgraph.json names the operator's graphs), the same build's unbundled
 * dist/cli (what every command ran before the bundle), and the sources through tsx (a clone after
 * an edit). Files are listed by test/app/loaded-modules.mjs (a loader hook, plus require's cache);
 * CPU is user + system seconds of the whole command (children included) from /usr/bin/time, median
 * of REPS runs, the three ways interleaved. `serve` and `worker` run until stopped: their CPU is
 * the process's own (/proc) when it says it is listening or ready, on a throwaway PostgreSQL
 * cluster. CPU time, unlike wall time, hardly moves with the load of a shared machine.
 */

const REPS = 5;
const ROOT = join(import.meta.dirname, "..");
const BIN = join(ROOT, "bin/codehop.mjs");
const HOOK = join(ROOT, "test/app/loaded-modules.mjs");
const TIME = "/usr/bin/time";
/** The stale-build path of bin/codehop.mjs, forced: tsx's loader, then src/cli/main.ts. */
const FROM_SOURCE = `const { register } = await import("tsx/esm/api"); register(); const { main } = await import(${JSON.stringify(join(ROOT, "src/cli/main.ts"))}); await main(["node", "codehop", ...process.argv.slice(1)]);`;
/** The build without its bundle: dist/cli/main.js and the commands' own modules. */
const UNBUNDLED = `const { main } = await import(${JSON.stringify(join(ROOT, "dist/cli/main.js"))}); await main(["node", "codehop", ...process.argv.slice(1)]);`;

/** How a command is started: as installed (bin), the unbundled build, the sources (tsx). */
type Way = "bin" | "unbundled" | "tsx";
const WAYS: Way[] = ["bin", "unbundled", "tsx"];

const env = (extra: Record<string, string> = {}) => ({
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  CODEHOP_ENV_FILE: "none",
  NO_COLOR: "1",
  ...extra,
});

function nodeArgs(way: Way, args: string[]): string[] {
  if (way === "bin") return [BIN, ...args];
  return ["--input-type=module", "-e", way === "tsx" ? FROM_SOURCE : UNBUNDLED, "--", ...args];
}

/** Distinct files one run loaded. */
function modulesLoaded(way: Way, args: string[], scratch: string): number {
  const list = join(scratch, "modules.txt");
  rmSync(list, { force: true });
  const r = spawnSync(process.execPath, ["--import", HOOK, ...nodeArgs(way, args)], {
    cwd: ROOT,
    env: env({ CODEHOP_TEST_MODULE_LIST: list }),
    encoding: "utf8",
  });
  if (r.status !== 0) throw new Error(`codehop ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
  return new Set(readFileSync(list, "utf8").split("\n").filter(Boolean)).size;
}

/** A long-running command (serve, worker): `ready` on stderr means it has started. */
interface Server {
  args: string[];
  ready: RegExp;
  env: Record<string, string>;
}

/**
 * Starts a server command one way and stops it (SIGTERM) once `ready` shows: its own CPU seconds
 * until then (/proc, user + system) and, with the module-list hook, the distinct files it loaded.
 */
async function serverStart(
  way: Way,
  server: Server,
  list?: string,
): Promise<{ cpu: number; files: number }> {
  const argv = [...(list ? ["--import", HOOK] : []), ...nodeArgs(way, server.args)];
  const child = spawn(process.execPath, argv, {
    cwd: ROOT,
    env: env({ ...server.env, ...(list ? { CODEHOP_TEST_MODULE_LIST: list } : {}) }),
    stdio: ["ignore", "ignore", "pipe"],
  });
  let err = "";
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const cpu = await new Promise<number>((resolve, reject) => {
    child.stderr.on("data", (d) => {
      err += d;
      if (!server.ready.test(err)) return;
      child.stderr.removeAllListeners("data");
      resolve(ownCpuMs(child.pid) / 1000);
    });
    child.once("exit", (code) =>
      reject(new Error(`codehop ${server.args[0]} exited ${code}: ${err}`)),
    );
  });
  child.kill("SIGTERM");
  await exited;
  if (!list) return { cpu, files: 0 };
  const files = new Set(readFileSync(list, "utf8").split("\n").filter(Boolean)).size;
  rmSync(list, { force: true });
  return { cpu, files };
}

/** One row of a server command: files per way, then the median start CPU of REPS interleaved runs. */
async function serverRow(
  name: string,
  server: Server,
  scratch: string,
): Promise<(string | number)[]> {
  const files: number[] = [];
  for (const way of WAYS)
    files.push((await serverStart(way, server, join(scratch, "m.txt"))).files);
  const runs: Record<Way, number[]> = { bin: [], unbundled: [], tsx: [] };
  for (let i = 0; i < REPS; i++)
    for (const way of WAYS) runs[way].push((await serverStart(way, server)).cpu);
  const [bin, unbundled, tsx] = WAYS.map((w) => percentile(runs[w], 50));
  return [
    `codehop ${name}`,
    files[0],
    fmt(bin),
    files[1],
    fmt(unbundled),
    `${fmt(bin / unbundled)}x`,
    files[2],
    fmt(tsx),
  ];
}

/** The server rows: serve and worker on codehop's graphs, serve on an operator's graph file. */
async function serverRows(scratch: string): Promise<(string | number)[][]> {
  if (postgresUnavailableReason()) return [];
  const cluster = await startTestCluster();
  try {
    const url = await cluster.createDatabase("bench_cli_modules");
    const serverEnv = { CODEHOP_DATABASE_URL: url, CODEHOP_HOME: scratch };
    const listening = /listening on http/;
    const operatorGraphs = join(ROOT, "test/fixtures/server/langgraph.json");
    return [
      await serverRow(
        "serve (until listening; codehop's graphs)",
        { args: ["serve", "--port", "0"], ready: listening, env: serverEnv },
        scratch,
      ),
      await serverRow(
        "worker (until ready; codehop's graphs)",
        { args: ["worker", "--worker-id", "bench"], ready: /bench ready/, env: serverEnv },
        scratch,
      ),
      await serverRow(
        "serve --graphs <an operator's graph file> (bin: from dist/cli)",
        {
          args: ["serve", "--port", "0", "--graphs", operatorGraphs],
          ready: listening,
          env: serverEnv,
        },
        scratch,
      ),
    ];
  } finally {
    await cluster.stop();
  }
}

/** Median CPU seconds (user + system, children included) of REPS runs of each way, interleaved. */
function cpuSeconds(args: string[], after?: () => void): Record<Way, number> {
  const runs: Record<Way, number[]> = { bin: [], unbundled: [], tsx: [] };
  for (let i = 0; i < REPS; i++)
    for (const way of WAYS) {
      const r = spawnSync(TIME, ["-f", "%U %S", process.execPath, ...nodeArgs(way, args)], {
        cwd: ROOT,
        env: env(),
        encoding: "utf8",
      });
      if (r.status !== 0)
        throw new Error(`codehop ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
      const [user, system] = r.stderr.trim().split("\n").at(-1)!.split(" ").map(Number);
      runs[way].push(user + system);
      after?.();
    }
  return {
    bin: percentile(runs.bin, 50),
    unbundled: percentile(runs.unbundled, 50),
    tsx: percentile(runs.tsx, 50),
  };
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
      const files: number[] = [];
      for (const way of WAYS) {
        files.push(modulesLoaded(way, c.args, home));
        c.after?.();
      }
      const cpu = cpuSeconds(c.args, c.after);
      return [
        `codehop ${c.name}`,
        files[0],
        fmt(cpu.bin),
        files[1],
        fmt(cpu.unbundled),
        `${fmt(cpu.bin / cpu.unbundled)}x`,
        files[2],
        fmt(cpu.tsx),
      ];
    });
    rows.push(...(await serverRows(home)));
    return {
      title: "CLI: files loaded and CPU seconds per command",
      description: `Per command: the distinct files the process loads (a loader hook plus require's cache, test/app/loaded-modules.mjs) and the CPU seconds (user + system, children included, /usr/bin/time), median of ${REPS} runs, the three ways interleaved: \`node bin/codehop.mjs\` as installed (the bundled CLI, dist/bundle; serve and worker from dist/cli when their langgraph.json names an operator's graphs), the same build unbundled (dist/cli/main.js, what every command ran before), and the sources through tsx (what a clone runs after an edit until \`npm run build\`). The thread read is the offline demo's towers question. serve and worker: the process's own CPU seconds (/proc) when it says it is listening or ready, on a throwaway PostgreSQL cluster${postgresUnavailableReason() ? " (not measured: PostgreSQL is missing)" : ""}.`,
      columns: [
        "command",
        "files (bin)",
        "CPU-s (bin)",
        "files (unbundled)",
        "CPU-s (unbundled)",
        "bin / unbundled CPU",
        "files (tsx)",
        "CPU-s (tsx)",
      ],
      rows,
    };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}
