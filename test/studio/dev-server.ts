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
 * with the langgraph.json of `cwd`, and waits until it says it is running and answers `/ok`.
 * `extraArgs` go to `langgraphjs dev` (e.g. `--n-jobs-per-worker`). The free port is probed,
 * released and then handed to the CLI, so another process of the suite can take it in between:
 * on EADDRINUSE the start is retried on a new port (a fixed attempt count, then the error).
 */
export async function startDevServer(
  cwd: string,
  env: NodeJS.ProcessEnv,
  readyMs = 90_000,
  extraArgs: string[] = [],
): Promise<DevServer> {
  const deadline = Date.now() + readyMs;
  for (let attempt = 1; ; attempt++) {
    const started = await startOnce(cwd, env, deadline, extraArgs);
    if (started.ok) return started.server;
    if (!started.portTaken || attempt >= 4) throw new Error(started.error);
  }
}

type StartResult =
  { ok: true; server: DevServer } | { ok: false; portTaken: boolean; error: string };

async function startOnce(
  cwd: string,
  env: NodeJS.ProcessEnv,
  deadline: number,
  extraArgs: string[],
): Promise<StartResult> {
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
  while (Date.now() < deadline) {
    // The port was taken between the probe and the listen: whatever answers there is not ours.
    if (log.includes("EADDRINUSE")) {
      stop();
      return { ok: false, portTaken: true, error: `port ${port} taken:\n${log.slice(-3000)}` };
    }
    if (api.exitCode != null)
      return {
        ok: false,
        portTaken: false,
        error: `langgraph dev exited (${api.exitCode}):\n${log.slice(-3000)}`,
      };
    // Only once the server says so: before that, /ok could be another process's listener.
    if (log.includes("Server running at")) {
      try {
        // 401: a langgraph.json with an auth.path guards /ok too (the server is up).
        const res = await fetch(`${url}/ok`);
        if (res.ok || res.status === 401)
          return { ok: true, server: { url, pid: api.pid, log: () => log, stop } };
      } catch {
        // not listening yet
      }
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  stop();
  return {
    ok: false,
    portTaken: false,
    error: `langgraph dev not ready in time:\n${log.slice(-3000)}`,
  };
}
