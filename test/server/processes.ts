import type { CliRun } from "../app/cli-helpers.ts";

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
