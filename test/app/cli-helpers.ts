import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";

/** Path of the `codehop` executable (package.json bin). */
export const CODEHOP_BIN = join(process.cwd(), "bin/codehop.mjs");

/**
 * Environment for a CLI run: only what the test sets, plus PATH/HOME so node works. No `.env` file
 * is read (a developer's .env in the repository must not change what a test sees).
 */
export function cliEnv(vars: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NO_COLOR: "1",
    CODEHOP_ENV_FILE: "none",
  };
  for (const [k, v] of Object.entries(vars)) if (v !== undefined) env[k] = v;
  return env;
}

/** A spawned `codehop` process with its output collected. */
export interface CliRun {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  done: Promise<{
    code: number | null;
    signal: NodeJS.Signals | null;
    stdout: string;
    stderr: string;
  }>;
}

/**
 * Spawns `node bin/codehop.mjs <args>` (the same entry `npx codehop` runs); `input`, when given,
 * is its whole stdin (else it has none); `nodeArgs` go to node (e.g. `--import` a hook).
 */
export function spawnCli(
  args: string[],
  env: NodeJS.ProcessEnv,
  cwd = process.cwd(),
  input?: string,
  nodeArgs: string[] = [],
): CliRun {
  const child = spawn(process.execPath, [...nodeArgs, CODEHOP_BIN, ...args], {
    env,
    cwd,
    stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  });
  if (input !== undefined) child.stdin!.end(input);
  let out = "";
  let err = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (err += d));
  const done = new Promise<{
    code: number | null;
    signal: NodeJS.Signals | null;
    stdout: string;
    stderr: string;
  }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal, stdout: out, stderr: err })),
  );
  return { child, stdout: () => out, stderr: () => err, done };
}

/** Runs the CLI to completion (`input`: its stdin, see {@link spawnCli}). */
export async function runCli(args: string[], env: NodeJS.ProcessEnv, cwd?: string, input?: string) {
  return spawnCli(args, env, cwd, input).done;
}
