import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { join, resolve } from "node:path";

/** The repository root. */
export const ROOT = resolve(import.meta.dirname, "../..");

/** A `langgraphjs dev` server started by a test. */
export interface DevServer {
  url: string;
  /** Process id of the CLI (the server runs in it or its children). */
  pid?: number;
  /** What it printed so far (for failure messages). */
  log(): string;
  stop(): void;
}

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => ok(port));
    });
  });
}

/**
 * Starts the LangGraph API server (`langgraphjs dev`, what `npm run studio` runs) on a free port
 * with the langgraph.json of `cwd`, and waits until it answers `/ok`. `extraArgs` go to
 * `langgraphjs dev` (e.g. `--n-jobs-per-worker`).
 */
export async function startDevServer(
  cwd: string,
  env: NodeJS.ProcessEnv,
  readyMs = 90_000,
  extraArgs: string[] = [],
): Promise<DevServer> {
  const port = await freePort();
  let log = "";
  const api: ChildProcess = spawn(
    process.execPath,
    [
      join(ROOT, "node_modules/@langchain/langgraph-cli/dist/cli/cli.mjs"),
      "dev",
      "--port",
      String(port),
      "--host",
      "127.0.0.1",
      "--no-browser",
      "--no-reload",
      ...extraArgs,
    ],
    { cwd, detached: true, stdio: ["ignore", "pipe", "pipe"], env },
  );
  api.stdout?.on("data", (d) => (log += d));
  api.stderr?.on("data", (d) => (log += d));
  const stop = () => {
    if (!api.pid || api.exitCode != null) return;
    try {
      process.kill(-api.pid, "SIGKILL");
    } catch {
      api.kill("SIGKILL");
    }
  };
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + readyMs;
  while (Date.now() < deadline) {
    if (api.exitCode != null)
      throw new Error(`langgraph dev exited (${api.exitCode}):\n${log.slice(-3000)}`);
    try {
      // 401: a langgraph.json with an auth.path guards /ok too (the server is up).
      const res = await fetch(`${url}/ok`);
      if (res.ok || res.status === 401) return { url, pid: api.pid, log: () => log, stop };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  stop();
  throw new Error(`langgraph dev not ready after ${readyMs} ms:\n${log.slice(-3000)}`);
}
