import { type CliRun, spawnCli } from "../app/cli-helpers.ts";

/**
 * Waits until a long-running `codehop` process (serve, worker) prints `pattern` on stderr, and
 * returns the match; fails with its output if it exits or takes longer than 90 s.
 */
export async function waitForStderr(
  run: CliRun,
  pattern: RegExp,
  what: string,
): Promise<RegExpMatchArray> {
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    const m = pattern.exec(run.stderr());
    if (m) return m;
    if (run.child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not start:\n${run.stderr()}`);
}

/** Starts `codehop serve --port 0 ...args` and returns it with the URL it listens on. */
export async function startServe(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ run: CliRun; url: string }> {
  const run = spawnCli(["serve", "--port", "0", ...args], env);
  const url = (await waitForStderr(run, /listening on (http:\/\/\S+)/, "codehop serve"))[1];
  return { run, url };
}

/** Starts `codehop worker --worker-id <id> ...args` and returns it once it is ready. */
export async function startWorker(
  id: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<CliRun> {
  const run = spawnCli(["worker", "--worker-id", id, ...args], env);
  await waitForStderr(run, new RegExp(`${id} ready`), "codehop worker");
  return run;
}

/** Kills what is still running of `runs` (SIGKILL) and waits for every one to end. */
export async function killAll(runs: (CliRun | undefined)[]): Promise<void> {
  const all = runs.filter((r): r is CliRun => !!r);
  for (const run of all) if (run.child.exitCode === null) run.child.kill("SIGKILL");
  await Promise.all(all.map((r) => r.done));
}
