import type { CodehopEnv } from "../config/env.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";

/**
 * Model names and where each provider's endpoint and key come from: the part of the providers
 * (providers.ts) that reading a configuration needs, with nothing of LangChain loaded.
 */

/** A model name split into provider and model. */
export interface ModelName {
  /** A provider of LangChain's universal init ("openai" for names without a known prefix). */
  provider: string;
  model: string;
}

/** Names of providers codehop knows the fields and variables of (the others get generic fields). */
export type KnownProvider = "anthropic" | "google-genai";

/** Where a provider's endpoint and key come from, for settings, errors and docs. */
export interface ProviderEndpoint {
  apiKey?: string;
  baseURL?: string;
  /** The variable that holds the key (undefined: the provider's package reads its own). */
  keyVariable?: string;
  /** The variable that holds the base URL. */
  baseUrlVariable?: string;
  /** Where requests go when no base URL is set. */
  defaultBaseURL?: string;
}

/**
 * The providers LangChain's universal init knows: the keys of its `MODEL_PROVIDER_CONFIG`
 * (`@langchain/classic/chat_models/universal`), written out so that reading a model name does not
 * load that module and with it most of LangChain (about a second at every command's start); a
 * test keeps the list equal to the installed table.
 */
export const PROVIDER_NAMES: readonly string[] = [
  "openai",
  "anthropic",
  "azure_openai",
  "cohere",
  "google-vertexai",
  "google-vertexai-web",
  "google-genai",
  "ollama",
  "mistralai",
  "groq",
  "cerebras",
  "bedrock",
  "aws",
  "deepseek",
  "xai",
  "fireworks",
  "together",
  "perplexity",
];

/**
 * Splits `provider:model`. Only a prefix that names a LangChain provider counts (split at the
 * first colon, so `openai:qwen2.5:7b` keeps its tag); anything else is the OpenAI-compatible
 * endpoint's model name as written.
 */
export function parseModelName(name: string): ModelName {
  const i = name.indexOf(":");
  if (i > 0) {
    const provider = name.slice(0, i);
    if (PROVIDER_NAMES.includes(provider)) {
      const model = name.slice(i + 1).trim();
      if (!model)
        throw new CodehopError(
          ErrorCodes.CONFIG_INVALID,
          `Model "${name}" names the provider ${provider} but no model: write ${provider}:<model>.`,
        );
      return { provider, model };
    }
  }
  return { provider: "openai", model: name };
}

/** The endpoint and key a provider's models use, from the environment snapshot. */
export function providerEndpoint(provider: string, env: CodehopEnv): ProviderEndpoint {
  switch (provider) {
    case "anthropic":
      return {
        apiKey: env.anthropicApiKey,
        baseURL: env.anthropicBaseUrl,
        keyVariable: "ANTHROPIC_API_KEY",
        baseUrlVariable: "ANTHROPIC_BASE_URL",
        defaultBaseURL: "https://api.anthropic.com",
      };
    case "google-genai":
      return {
        apiKey: env.googleApiKey,
        baseURL: env.googleBaseUrl,
        keyVariable: "GOOGLE_API_KEY",
        baseUrlVariable: "GOOGLE_GEMINI_BASE_URL",
        defaultBaseURL: "https://generativelanguage.googleapis.com",
      };
    case "openai":
      return {
        apiKey: env.openaiApiKey,
        baseURL: env.openaiBaseUrl,
        keyVariable: "OPENAI_API_KEY",
        baseUrlVariable: "OPENAI_BASE_URL",
        defaultBaseURL: "https://api.openai.com/v1",
      };
    default:
      return {};
  }
}
