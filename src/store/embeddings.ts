import type { OpenAIEmbeddings } from "@langchain/openai";
import { CodehopError, ErrorCodes } from "../errors.ts";

/** Settings for an OpenAI-compatible `/v1/embeddings` endpoint (vLLM, Ollama, TEI, OpenAI). */
/**
 * The text embedded for a passage: "title — section: text", so the page and its section contribute
 * to the passage's meaning (as in BM25's field weighting). Corpus vectors and the online source's
 * cached page vectors must use the same form to be comparable.
 */
export function passageEmbeddingText(title: string, section: string, text: string): string {
  return `${title}${section ? ` — ${section}` : ""}: ${text}`;
}

export interface EmbeddingsOptions {
  /** Base URL including /v1, e.g. http://localhost:8080/v1. */
  baseUrl: string;
  /** Model name sent in the request. */
  model: string;
  /** API key; local servers accept any non-empty string (default "none"). */
  apiKey?: string;
  /** Texts per request (default 128). */
  batchSize?: number;
  /** Request timeout in ms (default 60,000). */
  timeoutMs?: number;
  /** Retries on HTTP errors and timeouts (default 3). */
  maxRetries?: number;
}

/** Turns texts into vectors. */
export interface Embedder {
  /** The model name; stored in the corpus so queries are embedded with the same model. */
  readonly model: string;
  embed(texts: string[]): Promise<number[][]>;
}

/**
 * An {@link Embedder} backed by @langchain/openai's OpenAIEmbeddings (which brings batching,
 * retries with backoff and timeouts). `encodingFormat: "float"` is set because the openai SDK
 * otherwise asks for base64, which several local servers do not implement.
 */
export function createEmbedder(options: EmbeddingsOptions): Embedder {
  if (!options.baseUrl || !options.model) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      "embeddings need a base URL and a model (CODEHOP_EMBEDDINGS_BASE_URL and CODEHOP_EMBEDDINGS_MODEL)",
    );
  }
  // Built at the first embedding: @langchain/openai is loaded only by what embeds something.
  let client: Promise<OpenAIEmbeddings> | undefined;
  const embeddings = () =>
    (client ??= import("@langchain/openai").then(
      ({ OpenAIEmbeddings }) =>
        new OpenAIEmbeddings({
          model: options.model,
          apiKey: options.apiKey ?? "none",
          batchSize: options.batchSize ?? 128,
          maxRetries: options.maxRetries ?? 3,
          timeout: options.timeoutMs ?? 60_000,
          encodingFormat: "float",
          configuration: { baseURL: options.baseUrl },
        }),
    ));
  return {
    model: options.model,
    async embed(texts: string[]): Promise<number[][]> {
      if (texts.length === 0) return [];
      try {
        const vectors = await (await embeddings()).embedDocuments(texts);
        if (
          vectors.length !== texts.length ||
          vectors.some((v) => !Array.isArray(v) || v.length === 0)
        ) {
          throw new Error(`expected ${texts.length} vectors, got ${vectors.length}`);
        }
        return vectors;
      } catch (err) {
        throw new CodehopError(
          ErrorCodes.SOURCE_UNAVAILABLE,
          `embeddings endpoint ${options.baseUrl} (model ${options.model}) failed: ${(err as Error).message}`,
          { cause: err },
        );
      }
    },
  };
}
