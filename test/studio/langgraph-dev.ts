import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { join, resolve } from "node:path";
import { Client } from "@langchain/langgraph-sdk";

/**
 * Starts the LangGraph API server `npm run studio` starts (`langgraphjs dev` with our
 * langgraph.json) on a free port, for tests that drive it with @langchain/langgraph-sdk as
 * Studio and chat UIs do. `env` is added to the server's environment (the model endpoint, the
 * data directory ...).
 */
export async function startLangGraphDev(
  env: Record<string, string>,
  readyMs = 90_000,
): Promise<{ client: Client; url: string; log: () => string; stop(): void }> {
  const root = resolve(import.meta.dirname, "../..");
  const port = await freePort();
  let log = "";
  const api: ChildProcess = spawn(
    process.execPath,
    [
      join(root, "node_modules/@langchain/langgraph-cli/dist/cli/cli.mjs"),
      "dev",
      "--port",
      String(port),
      "--host",
      "127.0.0.1",
      "--no-browser",
      "--no-reload",
    ],
    {
      cwd: root,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, LANGSMITH_TRACING: "false", LANGCHAIN_TRACING_V2: "false", ...env },
    },
  );
  api.stdout?.on("data", (d) => (log += d));
  api.stderr?.on("data", (d) => (log += d));
  const stop = () => {
    if (api.pid && api.exitCode == null) {
      try {
        process.kill(-api.pid, "SIGKILL");
      } catch {
        api.kill("SIGKILL");
      }
    }
  };
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + readyMs;
  for (;;) {
    if (api.exitCode != null)
      throw new Error(`langgraph dev exited (${api.exitCode}):\n${log.slice(-3000)}`);
    try {
      if ((await fetch(`${url}/ok`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      stop();
      throw new Error(`langgraph dev not ready after ${readyMs} ms:\n${log.slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { client: new Client({ apiUrl: url }), url, log: () => log, stop };
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
