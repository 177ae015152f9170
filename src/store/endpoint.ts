import type { CodehopEnv } from "../config/env.ts";

/**
 * An OpenAI-compatible `/v1/embeddings` endpoint as configured (CODEHOP_EMBEDDINGS_BASE_URL,
 * _MODEL, _API_KEY). `model` is optional: a corpus with vectors is queried with the model it was
 * embedded with (its stored `embedding_model`); only online pages and new ingests need `model`.
 * A module of its own, without the embeddings client, so the configuration can name it cheaply.
 */
export interface EmbeddingsEndpoint {
  /** Base URL including /v1, e.g. http://localhost:8080/v1. */
  baseUrl: string;
  /** Model name; unset: a corpus's stored model. */
  model?: string;
  /** API key; local servers accept any non-empty string. */
  apiKey?: string;
}

/** The configured embeddings endpoint of an environment snapshot, when its base URL is set. */
export function embeddingsEndpointFromEnv(env: CodehopEnv): EmbeddingsEndpoint | undefined {
  if (!env.embeddingsBaseUrl) return undefined;
  return {
    baseUrl: env.embeddingsBaseUrl,
    model: env.embeddingsModel,
    apiKey: env.embeddingsApiKey,
  };
}
