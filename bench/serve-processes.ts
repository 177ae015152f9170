/**
 * Processes of the server benchmarks: `codehop serve` / `codehop worker` started from bin/ (what an
 * operator runs), optionally inside a network namespace (a worker on a simulated host of its own),
 * and LangGraph's own `langgraph dev` server on the same langgraph.json.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { startDevServer } from "../test/studio/dev-server.ts";
import { killGroup, onExit } from "./exit-cleanup.ts";

/** The repository root. */
export const ROOT = join(import.meta.dirname, "..");

/** A long-running `codehop` process (serve / worker) with its stderr collected. */
export interface CliProcess {
  child: ChildProcess;
  stderr(): string;
  exited: Promise<void>;
  /** Kills its process group (it and its sandbox children) now; also done at exit. */
  kill(): void;
}

/**
 * Starts `codehop <args>` (in network namespace `netns` when given: `ip netns exec`; `nodeArgs`
 * go to node, e.g. `--cpu-prof`) in a process group of its own, killed with its children however
 * the bench ends.
 */
export function spawnCodehop(
  args: string[],
  env: NodeJS.ProcessEnv,
  options: { netns?: string; nodeArgs?: string[] } = {},
): CliProcess {
  const argv = [
    process.execPath,
    ...(options.nodeArgs ?? []),
    join(ROOT, "bin/codehop.mjs"),
    ...args,
  ];
  const [cmd, ...rest] = options.netns ? ["ip", "netns", "exec", options.netns, ...argv] : argv;
  const child = spawn(cmd, rest, { env, stdio: ["ignore", "ignore", "pipe"], detached: true });
  let err = "";
  // The last 64 KiB: a worker's log over a long round must not grow without bound.
  child.stderr!.on("data", (d) => (err = (err + d).slice(-65_536)));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const kill = onExit(() => killGroup(child.pid));
  return { child, stderr: () => err, exited, kill };
}

/** Waits until `p` printed a line matching `pattern` (its first group, or the match). */
export async function waitForLine(p: CliProcess, pattern: RegExp, what: string): Promise<string> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const m = pattern.exec(p.stderr());
    if (m) return m[1] ?? m[0];
    if (p.child.exitCode !== null || Date.now() > deadline)
      throw new Error(`${what} did not start:\n${p.stderr()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Stops processes (SIGTERM, then their process groups killed after 10 s at most). */
export async function stopProcesses(procs: CliProcess[]): Promise<void> {
  for (const p of procs) if (p.child.exitCode === null) p.child.kill("SIGTERM");
  await Promise.all(
    procs.map((p) => Promise.race([p.exited, new Promise((r) => setTimeout(r, 10_000))])),
  );
  // What is left of each group (a process that ignored SIGTERM, a sandbox child).
  for (const p of procs) p.kill();
}

/** A server the SDK talks to. */
export interface ApiServer {
  url: string;
  /** Root of its process tree (for CPU accounting). */
  pid?: number;
  stop(): Promise<void>;
}

/**
 * `langgraph dev` (LangGraph's own API server, in-memory queue and checkpointer) serving the
 * repository's langgraph.json, with `env` (the model endpoint ...).
 */
export async function startLanggraphDev(
  env: Record<string, string>,
  options: { jobsPerWorker?: number } = {},
): Promise<ApiServer> {
  const dev = await startDevServer(
    ROOT,
    {
      ...process.env,
      ...env,
      LANGSMITH_TRACING: "false",
      LANGCHAIN_TRACING_V2: "false",
    },
    120_000,
    options.jobsPerWorker ? ["--n-jobs-per-worker", String(options.jobsPerWorker)] : [],
  );
  // Its process group goes however the bench ends.
  const stop = onExit(() => dev.stop());
  return { url: dev.url, pid: dev.pid, stop: async () => stop() };
}
