import { resolve } from "node:path";
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { openCodehopDatabase } from "../persistence/database.ts";
import { ThreadRegistry } from "../persistence/threads.ts";
import type { KnowledgeSource } from "../store/types.ts";
import {
  assertModelConfigured,
  loadAppConfig,
  type AppConfig,
  type AppConfigOverrides,
} from "./config.ts";

/** What a thread records to be resumed the same way: its knowledge source and model names. */
export function runRecord(
  config: AppConfig,
  options: { source?: KnowledgeSource; model?: BaseChatModel | string },
): Record<string, unknown> {
  const record: Record<string, unknown> = options.source
    ? options.source.kind === "corpus" && config.corpus
      ? { source: "corpus", corpus: resolve(config.corpus) }
      : { source: options.source.kind }
    : config.corpus
      ? { source: "corpus", corpus: resolve(config.corpus) }
      : { source: "wikipedia" };
  const model = typeof options.model === "string" ? options.model : config.model;
  if (model) record.model = model;
  if (typeof options.model !== "object" && Object.keys(config.models).length)
    record.models = { ...config.models };
  return record;
}

/**
 * Records a new question on a thread in the registry, with only light modules loaded (the CLI
 * calls it before importing the agents, which takes a second or two). Best effort: anything
 * unusual — no model configured, a bad data directory, a thread that already has checkpoints — is
 * left for `ask()` to report; it records the same thing again anyway.
 */
export function recordQuestionEarly(
  question: string,
  threadId: string,
  overrides?: AppConfigOverrides,
): void {
  if (!question.trim()) return;
  try {
    const config = loadAppConfig(overrides);
    if (!config.baseURL) assertModelConfigured(config);
    const db = openCodehopDatabase(config.home);
    try {
      const threads = new ThreadRegistry(db);
      if ((threads.get(threadId)?.checkpoints ?? 0) > 0) return;
      threads.start(threadId, {
        question,
        options: runRecord(config, {}),
        replaceQuestion: true,
      });
    } finally {
      db.close();
    }
  } catch {
    // ask() reports the problem with its full message.
  }
}
