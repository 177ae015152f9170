import { join } from "node:path";
import type { CodehopEnv } from "../config/env.ts";
import { CorpusSource } from "./corpus-source.ts";
import { createEmbedder, type EmbeddingsOptions } from "./embeddings.ts";
import type { KnowledgeSource } from "./types.ts";
import { WikipediaSource, type WikipediaSourceOptions } from "./wikipedia-source.ts";

/** Options for {@link openKnowledgeSource}. */
export interface KnowledgeSourceOptions {
  /** Local corpus DB (made by `codehop ingest`). When set, the source is offline. */
  corpus?: string;
  /** MediaWiki API endpoint for the online source (default English Wikipedia). */
  wikipediaApi?: string;
  /** SQLite page cache for the online source, e.g. `<CODEHOP_HOME>/wikipedia-cache.db` (default in memory). */
  cacheDb?: string;
  /**
   * Embeddings endpoint for hybrid ranking: queries over a corpus with vectors (same model as at
   * ingest), and the passages of fetched Wikipedia pages (vectors cached in the page cache).
   */
  embeddings?: EmbeddingsOptions;
  /** Corpus ranking: "bm25" ignores vectors; "hybrid" requires them (default: hybrid when possible). */
  ranking?: "bm25" | "hybrid";
  /** Extra settings for the online source (timeouts, retries, fetch). */
  wikipedia?: Omit<WikipediaSourceOptions, "apiUrl" | "cacheDb">;
}

/**
 * Opens the knowledge source agents search: the local corpus when `corpus` is set, else online
 * Wikipedia. Both implement {@link KnowledgeSource}, so the same tools work on either.
 */
export function openKnowledgeSource(options: KnowledgeSourceOptions = {}): KnowledgeSource {
  const embedder = options.embeddings ? createEmbedder(options.embeddings) : undefined;
  if (options.corpus)
    return CorpusSource.open(options.corpus, { embedder, ranking: options.ranking });
  return new WikipediaSource({
    ...options.wikipedia,
    apiUrl: options.wikipediaApi,
    cacheDb: options.cacheDb,
    embedder,
  });
}

/**
 * {@link openKnowledgeSource} options from the environment snapshot: CODEHOP_CORPUS,
 * CODEHOP_WIKIPEDIA_API, the page cache at `<CODEHOP_HOME>/wikipedia-cache.db`, and the
 * embeddings endpoint when both its base URL and model are set.
 */
export function knowledgeSourceOptionsFromEnv(env: CodehopEnv): KnowledgeSourceOptions {
  return {
    corpus: env.corpus,
    wikipediaApi: env.wikipediaApi,
    cacheDb: join(env.home, "wikipedia-cache.db"),
    embeddings:
      env.embeddingsBaseUrl && env.embeddingsModel
        ? {
            baseUrl: env.embeddingsBaseUrl,
            model: env.embeddingsModel,
            apiKey: env.embeddingsApiKey,
          }
        : undefined,
  };
}
