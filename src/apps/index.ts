import { CodehopError, ErrorCodes } from "../errors.ts";
import { openPersistenceFor } from "../persistence/open.ts";
import type { RunApp, RunOptions } from "../runs/app.ts";
import { loadAppConfig, type AppConfig } from "../runs/config.ts";
import { assistantApp } from "./assistant/app.ts";
import { chatApp } from "./chat/app.ts";
import { qaApp } from "./qa/app.ts";
import { researchApp } from "./research/app.ts";
import { appNameOf, appNameOfThread } from "./registry.ts";

export { historyOfThread, traceOfThread } from "./inspect.ts";
export { replayThread, resumeThread } from "./run-thread.ts";

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
