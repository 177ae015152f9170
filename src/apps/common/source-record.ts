import { resolve } from "node:path";
import type { AppConfig } from "../../runs/config.ts";
import { parseSources } from "../../store/source-kinds.ts";
import type { KnowledgeSource } from "../../store/types.ts";

/**
 * What a thread of an app that searches a knowledge source records to be resumed with the same
 * one: the corpus DB (absolute path), or that it used online Wikipedia. Light on purpose: the CLI
 * records a thread before loading any agent.
 */
export function knowledgeSourceRecord(
  config: AppConfig,
  given: { source?: KnowledgeSource },
): Record<string, unknown> {
  if (given.source) {
    return given.source.kind === "corpus" && config.corpus
      ? { source: "corpus", corpus: resolve(config.corpus) }
      : { source: given.source.kind };
  }
  // Sources chosen by name (--source web,corpus): the list, and the corpus when it is one.
  if (config.sources) {
    return {
      source: config.sources.join(","),
      sources: config.sources,
      ...(config.sources.includes("corpus") && config.corpus
        ? { corpus: resolve(config.corpus) }
        : {}),
    };
  }
  return config.corpus
    ? { source: "corpus", corpus: resolve(config.corpus) }
    : { source: "wikipedia" };
}

/**
 * The configuration a thread continues with: its own corpus (or online Wikipedia) unless the
 * caller names one explicitly (`--corpus`, `config.corpus`); the environment only decides for
 * new threads.
 */
export function configForStoredSource(
  config: AppConfig,
  explicitCorpus: boolean,
  stored?: Record<string, unknown>,
): AppConfig {
  if (explicitCorpus || !stored) return config;
  if (Array.isArray(stored.sources) && stored.sources.length) {
    return {
      ...config,
      sources: parseSources(stored.sources.map(String), "the thread's recorded sources"),
      ...(typeof stored.corpus === "string" && stored.corpus ? { corpus: stored.corpus } : {}),
    };
  }
  // A thread from before source lists (or a single source): the environment's list does not apply.
  const own = { ...config, sources: undefined };
  if (typeof stored.corpus === "string" && stored.corpus) return { ...own, corpus: stored.corpus };
  if (stored.source === "wikipedia") return { ...own, corpus: undefined };
  return config;
}
