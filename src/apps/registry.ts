import { CodehopError, ErrorCodes } from "../errors.ts";
import { openPersistenceFor } from "../persistence/open.ts";
import type { AppOutline, RunApp, RunOptions } from "../runs/app.ts";
import { loadAppConfig, persistenceLocation } from "../runs/config.ts";

/**
 * Every app by name, without loading any: what a thread's record (`options.app`) names, each
 * app's outline (enough to read its threads back as trees, `codehop show`) and a loader of the
 * app itself (its graph, agents, models and tools: about a thousand modules). The CLI's commands
 * load one app, the one they run, when they run it; src/apps/index.ts is the eager view (APPS).
 * The outlines are copies of the teams: test/app/app-registry.test.ts keeps them equal.
 */
export const APP_OUTLINES: Readonly<Record<string, AppOutline>> = {
  qa: {
    name: "qa",
    team: {
      root: "manager",
      members: [
        { name: "manager", children: ["wikipedia_search"] },
        { name: "wikipedia_search", children: ["page_search"] },
        { name: "page_search", children: [] },
      ],
    },
  },
  research: {
    name: "research",
    rootName: "research",
    team: {
      root: "planner",
      members: [
        { name: "planner", children: ["researcher"] },
        { name: "researcher", children: ["page_reader"] },
        { name: "page_reader", children: [] },
      ],
    },
  },
  chat: { name: "chat", team: { root: "chat", members: [{ name: "chat", children: [] }] } },
  assistant: {
    name: "assistant",
    team: {
      root: "assistant",
      members: [
        { name: "assistant", children: ["web_search"] },
        { name: "web_search", children: [] },
      ],
    },
  },
};

const LOADERS: Readonly<Record<string, () => Promise<RunApp>>> = {
  qa: async () => (await import("./qa/app.ts")).qaApp,
  research: async () => (await import("./research/app.ts")).researchApp,
  chat: async () => (await import("./chat/app.ts")).chatApp,
  assistant: async () => (await import("./assistant/app.ts")).assistantApp,
};

/**
 * The app name a thread's record gives (threads recorded before apps existed are QA threads);
 * CODEHOP_CONFIG_INVALID for an app this codehop does not have.
 */
export function appNameOf(name: unknown): string {
  const key = typeof name === "string" && name ? name : "qa";
  if (!Object.hasOwn(APP_OUTLINES, key)) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `The thread was started by app "${key}", which this codehop does not have (apps: ${Object.keys(APP_OUTLINES).join(", ")}).`,
    );
  }
  return key;
}

/** The app named `name` ({@link appNameOf}), loaded (once: modules are cached). */
export async function loadApp(name: unknown): Promise<RunApp> {
  return LOADERS[appNameOf(name)]();
}

/**
 * The app name of an existing thread, from its registry record ("qa" when the thread is unknown:
 * the caller then reports it as not found, with its own message).
 */
export async function appNameOfThread(
  threadId: string,
  options: Pick<RunOptions, "config" | "persistence"> = {},
): Promise<string> {
  const persistence =
    options.persistence ??
    (await openPersistenceFor(persistenceLocation(loadAppConfig(options.config)), {
      mustExist: true,
    }).catch(() => undefined));
  if (!persistence) return "qa";
  try {
    return appNameOf((await persistence.threads.get(threadId))?.options.app);
  } finally {
    if (!options.persistence) await persistence.close();
  }
}
