import { cliCommand, type CommandContext } from "../config/cli-command.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { Persistence, ThreadRecord } from "../persistence/index.ts";

// Apart from src/runs/lifecycle.ts (which re-exports it) so that inspecting a thread (`codehop
// history`, `codehop show`) does not load what running one needs.

/**
 * The registry record of a thread, or CODEHOP_THREAD_NOT_FOUND. With `toRun`, a thread another
 * live process is running is refused (two processes advancing one thread would interleave).
 */
export async function requireThread(
  persistence: Persistence,
  threadId: string,
  toRun = false,
  context: CommandContext = {},
): Promise<ThreadRecord> {
  const record = await persistence.threads.get(threadId);
  if (!record) {
    throw new CodehopError(
      ErrorCodes.THREAD_NOT_FOUND,
      `No thread "${threadId}" in ${persistence.location}. List threads with \`${cliCommand(["threads"], { home: context.home })}\`${context.home ? "" : " (and check CODEHOP_HOME)"}.`,
    );
  }
  if (toRun && record.status === "running" && record.pid !== null && record.pid !== process.pid) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Thread "${threadId}" is being run by process ${record.pid}. Wait for it to finish (or stop it) before resuming or replaying.`,
    );
  }
  return record;
}
