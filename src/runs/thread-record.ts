import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { openPersistenceFor } from "../persistence/open.ts";
import type { RunApp } from "./app.ts";
import {
  loadAppConfig,
  persistenceLocation,
  type AppConfig,
  type AppConfigOverrides,
} from "./config.ts";
import type { KnowledgeSource } from "../store/types.ts";

/** The parts of an app a thread record needs (light: no agent is loaded for it). */
export type RecordingApp = Pick<RunApp, "name" | "record">;

/**
 * What a thread records to be resumed the same way: its app, what the app records (e.g. its
 * knowledge source) and the model names.
 */
export function runRecord(
  app: RecordingApp,
  config: AppConfig,
  options: { source?: KnowledgeSource; model?: BaseChatModel | string },
): Record<string, unknown> {
  const record: Record<string, unknown> = { app: app.name, ...app.record(config, options) };
  const model = typeof options.model === "string" ? options.model : config.model;
  if (model) record.model = model;
  if (typeof options.model !== "object" && Object.keys(config.models).length)
    record.models = { ...config.models };
  return record;
}

/**
 * Records a new input on a thread in the registry, with only light modules loaded (the CLI calls it
 * before importing the agents, which takes a second or two). Best effort: anything unusual — no
 * model configured, a bad data directory, a thread that already has checkpoints — is left for the
 * run to report; it records the same thing again anyway.
 */
export async function recordInputEarly(
  app: RecordingApp,
  text: string,
  threadId: string,
  overrides?: AppConfigOverrides,
): Promise<void> {
  if (!text.trim()) return;
  try {
    const config = loadAppConfig(overrides);
    // Nothing can run without an endpoint and a model: don't create a data directory for it.
    if (!config.baseURL && !config.apiKey) return;
    if (!config.baseURL && !config.model && !Object.keys(config.models).length) return;
    const persistence = await openPersistenceFor(persistenceLocation(config));
    try {
      if (((await persistence.threads.get(threadId))?.checkpoints ?? 0) > 0) return;
      await persistence.threads.start(threadId, {
        question: text,
        options: runRecord(app, config, {}),
        replaceQuestion: true,
      });
    } finally {
      await persistence.close();
    }
  } catch {
    // The run reports the problem with its full message.
  }
}
