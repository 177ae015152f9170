import { CodehopError, ErrorCodes } from "../errors.ts";
import { openPersistenceFor } from "../persistence/index.ts";
import type { RunApp, RunOptions } from "../runs/app.ts";
import { loadAppConfig, type AppConfig } from "../runs/config.ts";
import { replayRun, resumeRun, type ReplayOptions, type ResumeOptions } from "../runs/lifecycle.ts";
import type { AskResult } from "../runs/result.ts";
import { assistantApp } from "./assistant/app.ts";
import { chatApp } from "./chat/app.ts";
import { qaApp, withVerification } from "./qa/app.ts";
import { researchApp } from "./research/app.ts";
import { appNameOf, appNameOfThread } from "./registry.ts";

export { historyOfThread, traceOfThread } from "./inspect.ts";

export { verificationOf } from "./qa/app.ts";

/** Every app by name: what a thread's record (`options.app`) names. */
export const APPS: Readonly<Record<string, RunApp>> = {
  qa: qaApp,
  research: researchApp,
  chat: chatApp,
  assistant: assistantApp,
};

/** The app a thread was started with (threads recorded before apps existed are QA threads). */
export function appNamed(name: unknown): RunApp {
  return APPS[appNameOf(name)];
}

/**
 * The app of an existing thread, from its registry record (QA when the thread is unknown: the
 * lifecycle then reports it as not found, with its own message).
 */
export async function appForThread(
  threadId: string,
  options: Pick<RunOptions, "config" | "persistence"> = {},
): Promise<RunApp> {
  return appNamed(await appNameOfThread(threadId, options));
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
  const app = await appForThread(threadId, rest);
  if (verify && app !== qaApp) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `--verify checks a QA answer; thread "${threadId}" is a ${app.name} thread${app.name === "research" ? " (its report was verified as it was written)" : ""}.`,
    );
  }
  const result = await resumeRun(app, threadId, rest);
  return verify ? withVerification(result, rest) : result;
}

/** Re-runs (forks) a thread of any app from one of its checkpoints. */
export async function replayThread(
  threadId: string,
  checkpointId: string,
  options: ReplayOptions = {},
): Promise<AskResult> {
  return replayRun(await appForThread(threadId, options), threadId, checkpointId, options);
}

/**
 * Deletes what every app keeps about a thread outside the persistence (`RunApp.deleteThread`: the
 * chat's file index ...) under `config`'s home; true when there was something. What `codehop
 * worker` does for threads deleted through `codehop serve` (each worker has its own home).
 */
export async function deleteAppThreadData(
  threadId: string,
  config: AppConfig = loadAppConfig(),
): Promise<boolean> {
  let found = false;
  for (const app of Object.values(APPS))
    if ((await app.deleteThread?.(config, threadId)) === true) found = true;
  return found;
}

/**
 * Deletes a thread: what every app keeps about it outside the persistence (the chat's attached
 * files), then its checkpoints (all namespaces), call-journal rows and registry row. Returns
 * whether there was anything to delete.
 */
export async function deleteThread(
  threadId: string,
  options: Pick<RunOptions, "config" | "persistence"> = {},
): Promise<boolean> {
  const config = loadAppConfig(options.config);
  const persistence = options.persistence ?? (await openPersistenceFor({ home: config.home }));
  try {
    const record = await persistence.threads.get(threadId);
    if (record?.status === "running" && record.pid !== null && record.pid !== process.pid) {
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `Thread "${threadId}" is being run by process ${record.pid}; stop it before deleting the thread.`,
      );
    }
    // Every app's hook: a thread may hold an app's data before its first checkpoint (files
    // attached to a conversation that has not had a round yet).
    const existed = (await deleteAppThreadData(threadId, config)) || record !== undefined;
    await persistence.deleteThread(threadId);
    return existed;
  } finally {
    if (!options.persistence) await persistence.close();
  }
}
