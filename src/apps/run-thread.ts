import { CodehopError, ErrorCodes } from "../errors.ts";
import type { RunApp, RunOptions } from "../runs/app.ts";
import { replayRun, resumeRun, type ReplayOptions, type ResumeOptions } from "../runs/lifecycle.ts";
import type { AskResult } from "../runs/result.ts";
import { appNameOfThread, loadApp } from "./registry.ts";

// Continuing a thread of any app, loading only that app (src/apps/registry.ts): `codehop resume`
// and `codehop replay` of a QA thread never load the research, chat or assistant apps.
// Re-exported by src/apps/index.ts.

/** The app of an existing thread, loaded (QA when the thread is unknown; see appNameOfThread). */
async function threadApp(
  threadId: string,
  options: Pick<RunOptions, "config" | "persistence">,
): Promise<RunApp> {
  return loadApp(await appNameOfThread(threadId, options));
}

/**
 * Continues a thread of any app from its last checkpoint (the app it was started with); with
 * `approval`, answers the approval it waits for (see {@link ResumeOptions}).
 */
export async function resumeThread(
  threadId: string,
  options: ResumeOptions & {
    /**
     * Verify the answer once the thread has one (a QA thread: `ask --verify`'s verifier; a
     * finished thread is verified again without running its agents), recorded with the thread.
     */
    verify?: boolean;
  } = {},
): Promise<AskResult> {
  const { verify, ...rest } = options;
  const app = await threadApp(threadId, rest);
  if (verify && app.name !== "qa") {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `--verify checks a QA answer; thread "${threadId}" is a ${app.name} thread${app.name === "research" ? " (its report was verified as it was written)" : ""}.`,
    );
  }
  const result = await resumeRun(app, threadId, rest);
  if (!verify) return result;
  const { withVerification } = await import("./qa/app.ts");
  return withVerification(result, rest);
}

/** Re-runs (forks) a thread of any app from one of its checkpoints. */
export async function replayThread(
  threadId: string,
  checkpointId: string,
  options: ReplayOptions = {},
): Promise<AskResult> {
  return replayRun(await threadApp(threadId, options), threadId, checkpointId, options);
}
