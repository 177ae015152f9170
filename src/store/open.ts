import { join, resolve } from "node:path";
import type { CodehopEnv } from "../config/env.ts";
import { CorpusSource } from "./corpus-source.ts";
import { createEmbedder } from "./embeddings.ts";
import { embeddingsEndpointFromEnv, type EmbeddingsEndpoint } from "./endpoint.ts";
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
   * Embeddings endpoint for hybrid ranking: queries over a corpus with vectors are embedded with
   * the model the corpus stored at ingest (`model` may then be left out), and the passages of
   * fetched Wikipedia pages with `model` (vectors cached in the page cache; no `model`, no vectors).
   */
  embeddings?: EmbeddingsEndpoint;
  /** Corpus ranking: "bm25" ignores vectors; "hybrid" requires them (default: hybrid when possible). */
  ranking?: "bm25" | "hybrid";
  /**
   * Told when a corpus has vectors but `embeddings` is not set (ranking falls back to BM25). Default:
   * a process warning (`CODEHOP_BM25_ONLY`), once per corpus file per process.
   */
  onNotice?: (message: string) => void;
  /** Extra settings for the online source (timeouts, retries, fetch). */
  wikipedia?: Omit<WikipediaSourceOptions, "apiUrl" | "cacheDb">;
}

/**
 * Opens the knowledge source agents search: the local corpus when `corpus` is set, else online
 * Wikipedia. Both implement {@link KnowledgeSource}, so the same tools work on either.
 */
export function openKnowledgeSource(options: KnowledgeSourceOptions = {}): KnowledgeSource {
  const endpoint = options.embeddings;
  if (options.corpus) {
    const corpus = options.corpus;
    return CorpusSource.open(corpus, {
      embedderFor: endpoint ? (model) => createEmbedder({ ...endpoint, model }) : undefined,
      ranking: options.ranking,
      onNotice: options.onNotice ?? ((message) => warnOnce(resolve(corpus), message)),
    });
  }
  const embedder = endpoint?.model
    ? createEmbedder({ ...endpoint, model: endpoint.model })
    : undefined;
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
 * embeddings endpoint when its base URL is set.
 */
export function knowledgeSourceOptionsFromEnv(env: CodehopEnv): KnowledgeSourceOptions {
  return {
    corpus: env.corpus,
    wikipediaApi: env.wikipediaApi,
    cacheDb: join(env.home, "wikipedia-cache.db"),
    embeddings: embeddingsEndpointFromEnv(env),
  };
}

const warned = new Set<string>();

/** A process warning, once per key per process (the default notice of a BM25-only corpus). */
function warnOnce(key: string, message: string): void {
  if (warned.has(key)) return;
  warned.add(key);
  process.emitWarning(message, { code: "CODEHOP_BM25_ONLY" });
}
