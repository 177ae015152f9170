/** Knowledge sources: online Wikipedia, the local SQLite corpus, and what they share. */
export type {
  KnowledgeSource,
  Page,
  PageLookup,
  PageSummary,
  Passage,
  SourceKind,
} from "./types.ts";
export {
  openKnowledgeSource,
  knowledgeSourceOptionsFromEnv,
  type KnowledgeSourceOptions,
} from "./open.ts";
export { embeddingsEndpointFromEnv, type EmbeddingsEndpoint } from "./endpoint.ts";
export {
  CorpusSource,
  BM25_ONLY_NOTICE,
  type CorpusSourceOptions,
  type RankingMode,
} from "./corpus-source.ts";
export {
  WikipediaSource,
  DEFAULT_WIKIPEDIA_API,
  type WikipediaSourceOptions,
} from "./wikipedia-source.ts";
export { PageCache } from "./page-cache.ts";
export { createEmbedder, type Embedder, type EmbeddingsOptions } from "./embeddings.ts";
export { openCorpusDb, corpusStats, CORPUS_SCHEMA_VERSION, type CorpusStats } from "./corpus-db.ts";
export {
  Chunker,
  chunkDocument,
  splitSections,
  DEFAULT_CHUNK_SIZE,
  DEFAULT_CHUNK_OVERLAP,
  type Chunk,
  type ChunkOptions,
} from "./chunking.ts";
export { formatLookupProblem, formatSearchResults, formatPassages } from "./messages.ts";
