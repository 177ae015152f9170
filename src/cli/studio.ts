import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { ErrorCodes } from "../errors.ts";

/**
 * `npm run studio`: LangGraph's dev server (`langgraphjs dev`) for langgraph.json, which Studio
 * connects to. langgraphjs logs EADDRINUSE and keeps running without a server when its port is
 * taken; this wrapper checks the port first, watches the server's output for the same error (the
 * port can be taken between the check and the server's listen), and exits with codehop's error
 * format and code 2 instead. Everything else is langgraphjs's own behaviour and flags.
 */

const DEFAULT_PORT = 2024;
const DEFAULT_HOST = "localhost";

/** The `--port` / `--host` a langgraphjs dev command line asks for (its defaults otherwise). */
export function listenAddress(args: string[]): { port: number; host: string } {
  let port = DEFAULT_PORT;
  let host = DEFAULT_HOST;
  for (let i = 0; i < args.length; i++) {
    const [flag, inline] = args[i].split("=", 2);
    const value = inline ?? args[i + 1];
    if (flag === "--port" || flag === "-p") port = Number(value);
    if (flag === "--host" || flag === "-h") host = String(value);
  }
  return { port, host };
}

/** Resolves to the listen error's code ("EADDRINUSE", "EACCES" ...), or undefined if the port is free. */
export function portProblem(port: number, host: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? String(err)));
    probe.listen(port, host, () => probe.close(() => resolve(undefined)));
  });
}

function busyMessage(port: number, host: string, code: string): string {
  return code === "EADDRINUSE"
    ? `port ${port} on ${host} is already in use (another \`npm run studio\`?). Stop it, or use another port: npm run studio -- --port ${port + 1}`
    : `cannot listen on ${host}:${port} (${code})`;
}

/**
 * Runs langgraphjs dev with `args` (after --no-browser); resolves to the exit code to use.
 * `checkPort: false` skips the check before starting (tests use it to meet the error the server
 * itself reports when the port is taken after the check).
 */
export async function runStudio(
  args: string[],
  io: { out: (s: string) => void; err: (s: string) => void },
  options: { checkPort?: boolean } = {},
): Promise<number> {
  const { port, host } = listenAddress(args);
  const fail = (message: string) => {
    io.err(`codehop studio: ${message} [${ErrorCodes.CONFIG_INVALID}]\n`);
    return 2;
  };
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    return fail(`--port must be a port number, got ${port}`);
  const problem = options.checkPort === false ? undefined : await portProblem(port, host);
  if (problem) return fail(busyMessage(port, host, problem));
  const require = createRequire(import.meta.url);
  const cliPackage = require.resolve("@langchain/langgraph-cli/package.json");
  const entry = join(dirname(cliPackage), "dist/cli/cli.mjs");
  const child = spawn(process.execPath, [entry, "dev", "--no-browser", ...args], {
    stdio: ["inherit", "pipe", "pipe"],
    detached: true,
  });
  let portTaken = false;
  const watch = (write: (s: string) => void) => (chunk: Buffer) => {
    const text = String(chunk);
    write(text);
    if (!portTaken && /EADDRINUSE/.test(text)) {
      portTaken = true;
      try {
        process.kill(-child.pid!, "SIGTERM");
      } catch {
        child.kill("SIGTERM");
      }
    }
  };
  child.stdout!.on("data", watch(io.out));
  child.stderr!.on("data", watch(io.err));
  const stop = (signal: NodeJS.Signals) => () => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      child.kill(signal);
    }
  };
  const onInt = stop("SIGINT");
  const onTerm = stop("SIGTERM");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  const code = await new Promise<number>((resolve) =>
    child.on("close", (c, signal) => resolve(c ?? (signal === "SIGINT" ? 130 : 1))),
  );
  process.off("SIGINT", onInt);
  process.off("SIGTERM", onTerm);
  if (portTaken) return fail(busyMessage(port, host, "EADDRINUSE"));
  return code;
}
