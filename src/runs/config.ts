import { join, resolve } from "node:path";
import { cliCommand } from "../config/cli-command.ts";
import { agentEnvKey, readEnv, type CodehopEnv } from "../config/env.ts";
import type { ModelSettings } from "../core/models.ts";
import { parseModelName, providerEndpoint } from "../core/provider-names.ts";
import { v1Hint } from "../config/endpoint.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { embeddingsEndpointFromEnv, type EmbeddingsEndpoint } from "../store/endpoint.ts";
import { parseSources } from "../store/source-kinds.ts";
import type { SourceKind } from "../store/types.ts";
import type { WebSettings } from "../web/settings.ts";

/**
 * The application's configuration contract. Values come from the environment (through
 * src/config/env.ts, the only module reading process.env) and can be overridden by CLI flags or
 * API options.
 *
 * | variable | field | meaning |
 * | --- | --- | --- |
 * | OPENAI_BASE_URL | baseURL | OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp ...); unset = api.openai.com |
 * | OPENAI_API_KEY | apiKey | key for the endpoint (local servers accept any string) |
 * | CODEHOP_MODEL | model | default model for every agent |
 * | CODEHOP_MODEL_<AGENT> (e.g. CODEHOP_MODEL_MANAGER) | models | per-agent overrides |
 * | CODEHOP_HOME | home | data directory (checkpoints.db, caches), default .codehop |
 * | CODEHOP_DATABASE_URL | databaseUrl | postgres:// URL: checkpoints, journal and threads in Postgres instead of `<home>/checkpoints.db` |
 * | CODEHOP_CORPUS / --corpus | corpus | local corpus DB from `codehop ingest`; unset = online Wikipedia |
 * | CODEHOP_WIKIPEDIA_API | wikipediaApi | MediaWiki API endpoint for the online source |
 * | CODEHOP_SOURCES / --source | sources | knowledge sources searched: web, wikipedia, corpus or a comma list; unset = corpus if set, else Wikipedia |
 * | CODEHOP_WEB_ALLOW_DOMAINS, CODEHOP_WEB_DENY_DOMAINS | web | web research's domain lists (the operator's) |
 * | CODEHOP_EMBEDDINGS_BASE_URL, _MODEL, _API_KEY | embeddings | `/v1/embeddings` endpoint: hybrid ranking of corpora with vectors (their stored model) and of Wikipedia pages (`_MODEL`) |
 */
export interface AppConfig {
  baseURL?: string;
  apiKey?: string;
  model?: string;
  /** Per-agent model overrides keyed by agent name (e.g. manager, wikipedia_search, page_search). */
  models: Record<string, string>;
  /** Absolute data directory. */
  home: string;
  /** A postgres:// URL: persistence in Postgres instead of `<home>/checkpoints.db` (SQLite). */
  databaseUrl?: string;
  /** Absolute path of the local corpus DB, or undefined for online Wikipedia. */
  corpus?: string;
  wikipediaApi?: string;
  /** The embeddings endpoint (hybrid retrieval); unset: BM25 only. */
  embeddings?: EmbeddingsEndpoint;
  /** Knowledge sources the agents search, in order; unset: `corpus` when set, else Wikipedia. */
  sources?: SourceKind[];
  /** Web research: the operator's domain lists (src/apps/common/web-ranking.ts) and web settings. */
  web?: WebResearchConfig;
  /** The configuration file (CODEHOP_CONFIG); unset: looked up (src/config/config-file.ts). */
  configFile?: string;
  temperature?: number;
  maxTokens?: number;
  maxRetries?: number;
  timeoutMs?: number;
}

/** Web research settings of a configuration (operator settings: never a client's). */
export interface WebResearchConfig {
  /** Domains ranked as primary sources (a domain covers its subdomains). */
  allowDomains?: string[];
  /** Domains never searched or read. */
  denyDomains?: string[];
  /** The web port's settings over the environment's (search provider, browser, limits). */
  settings?: Partial<WebSettings>;
}

/** Explicit values that win over the environment (CLI flags, API options). */
export type AppConfigOverrides = Partial<Omit<AppConfig, "models">> & {
  models?: Record<string, string>;
};

/** Builds the app configuration from the environment plus overrides. */
export function loadAppConfig(
  overrides: AppConfigOverrides = {},
  env: CodehopEnv = readEnv(),
): AppConfig {
  const pick = <T>(o: T | undefined, e: T | undefined) => (o !== undefined ? o : e);
  const corpus = pick(overrides.corpus, env.corpus);
  return {
    baseURL: pick(overrides.baseURL, env.openaiBaseUrl),
    apiKey: pick(overrides.apiKey, env.openaiApiKey),
    model: pick(overrides.model, env.model),
    // Given per-agent models replace the environment's (so `models: {}` means "no overrides").
    models: overrides.models ?? env.agentModels,
    home: resolve(pick(overrides.home, env.home) ?? ".codehop"),
    databaseUrl: pick(overrides.databaseUrl, env.databaseUrl),
    corpus: corpus ? resolve(corpus) : undefined,
    wikipediaApi: pick(overrides.wikipediaApi, env.wikipediaApi),
    embeddings: pick(overrides.embeddings, embeddingsEndpointFromEnv(env)),
    sources: pick(
      overrides.sources,
      env.sources ? parseSources(env.sources, "CODEHOP_SOURCES") : undefined,
    ),
    web: pick(
      overrides.web,
      env.webAllowDomains || env.webDenyDomains
        ? { allowDomains: env.webAllowDomains, denyDomains: env.webDenyDomains }
        : undefined,
    ),
    configFile: pick(overrides.configFile, env.configFile),
    temperature: pick(overrides.temperature, env.temperature),
    maxTokens: pick(overrides.maxTokens, env.maxTokens),
    maxRetries: pick(overrides.maxRetries, env.maxRetries),
    timeoutMs: pick(overrides.timeoutMs, env.modelTimeoutMs),
  };
}

/** The run context's endpoint and sampling settings from a configuration. */
export function modelSettingsOf(config: AppConfig): ModelSettings {
  return {
    baseURL: config.baseURL,
    apiKey: config.apiKey,
    temperature: config.temperature,
    maxTokens: config.maxTokens,
    maxRetries: config.maxRetries,
    timeoutMs: config.timeoutMs,
  };
}

/** Model name an agent will use, or undefined if none is configured. */
export function modelFor(config: AppConfig, agent: string): string | undefined {
  return config.models[agent] ?? config.model;
}

/** The instructions printed when no model endpoint is configured, naming `agents`' own variables. */
export function modelSetupHelp(agents: readonly string[]): string {
  return [
    "Set the model endpoint with environment variables:",
    "  OPENAI_BASE_URL   your OpenAI-compatible server, e.g. http://localhost:8000/v1 (vLLM) or http://localhost:11434/v1 (Ollama); leave unset for api.openai.com",
    "  OPENAI_API_KEY    the key (required for api.openai.com; any non-empty string for local servers)",
    "  CODEHOP_MODEL     the model name for every agent, e.g. gpt-4o-mini or Qwen/Qwen2.5-7B-Instruct (with OPENAI_BASE_URL: default = the first model the endpoint lists)",
    "                    or provider:model, e.g. anthropic:claude-sonnet-4-5 (ANTHROPIC_API_KEY) or google-genai:gemini-2.5-flash (GOOGLE_API_KEY)",
    `  (optional) ${agents.map((a) => `CODEHOP_MODEL_${agentEnvKey(a)}`).join(", ")} per agent`,
    `Or run \`${cliCommand(["demo"])}\` for the offline demo with a scripted model.`,
  ].join("\n");
}

/**
 * Checks up front that every agent of `agents` has a model and an endpoint, so a misconfigured run
 * fails in milliseconds with the variables to set instead of after the first checkpoint.
 */
export function assertModelConfigured(
  config: AppConfig,
  agents: readonly string[],
  env: CodehopEnv = readEnv(),
): void {
  const problems: string[] = [];
  const names = agents.map((a) => modelFor(config, a));
  // Agents without a model, or with a name of the OpenAI-compatible endpoint, need that endpoint;
  // a `provider:model` name needs its provider's key.
  const providers = new Set(names.map((n) => (n ? parseModelName(n).provider : "openai")));
  if (providers.has("openai") && !config.baseURL && !config.apiKey)
    problems.push("neither OPENAI_BASE_URL nor OPENAI_API_KEY is set");
  for (const provider of providers) {
    const endpoint = provider === "openai" ? undefined : providerEndpoint(provider, env);
    if (endpoint?.keyVariable && !endpoint.apiKey)
      problems.push(`${endpoint.keyVariable} is not set (models ${provider}:...)`);
  }
  const missing = agents.filter((a) => !modelFor(config, a));
  if (missing.length === agents.length) problems.push("CODEHOP_MODEL is not set");
  else if (missing.length) {
    problems.push(
      `no model for ${missing.join(", ")} (set CODEHOP_MODEL or ${missing.map((m) => `CODEHOP_MODEL_${agentEnvKey(m)}`).join(", ")})`,
    );
  }
  if (problems.length) {
    throw new CodehopError(
      ErrorCodes.MODEL_NOT_CONFIGURED,
      `No model endpoint configured: ${problems.join("; ")}.\n${modelSetupHelp(agents)}`,
    );
  }
}

/**
 * With an endpoint but no CODEHOP_MODEL, asks the endpoint which models it serves
 * (`GET <OPENAI_BASE_URL>/models`, as vLLM, Ollama and llama.cpp answer) and returns the first
 * one; undefined when a model is configured for every agent or there is no custom endpoint. A
 * failing endpoint is a MODEL_NOT_CONFIGURED error that says to set CODEHOP_MODEL.
 */
export async function detectModel(
  config: AppConfig,
  agents: readonly string[],
  timeoutMs = 5_000,
): Promise<string | undefined> {
  if (!config.baseURL || agents.every((a) => modelFor(config, a))) return undefined;
  const url = `${config.baseURL.replace(/\/+$/, "")}/models`;
  let ids: string[] = [];
  try {
    const res = await fetch(url, {
      headers: config.apiKey ? { authorization: `Bearer ${config.apiKey}` } : {},
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (/\btext\/html\b/i.test(res.headers.get("content-type") ?? "")) {
      await res.body?.cancel().catch(() => {});
      throw new Error(
        `it answered an HTML page (HTTP ${res.status}), not an OpenAI-compatible model list${v1Hint(config.baseURL)}`,
      );
    }
    if (!res.ok)
      throw new Error(`HTTP ${res.status}${res.status === 404 ? v1Hint(config.baseURL) : ""}`);
    const body = (await res.json()) as { data?: Array<{ id?: unknown }> };
    ids = (body.data ?? [])
      .map((m) => m.id)
      .filter((id): id is string => typeof id === "string" && id.length > 0);
  } catch (err) {
    throw new CodehopError(
      ErrorCodes.MODEL_NOT_CONFIGURED,
      `CODEHOP_MODEL is not set and the endpoint's model list (${url}) could not be read: ${(err as Error).message}.\n${modelSetupHelp(agents)}`,
      { cause: err },
    );
  }
  if (!ids.length) {
    throw new CodehopError(
      ErrorCodes.MODEL_NOT_CONFIGURED,
      `CODEHOP_MODEL is not set and ${url} lists no models.\n${modelSetupHelp(agents)}`,
    );
  }
  return ids[0];
}

/** Where a configuration keeps its runs: Postgres when a database URL is set, else `<home>/checkpoints.db`. */
export function persistenceLocation(config: AppConfig): { home: string; databaseUrl?: string } {
  return config.databaseUrl
    ? { home: config.home, databaseUrl: config.databaseUrl }
    : { home: config.home };
}

/** Where the online Wikipedia source caches pages (inside the data directory). */
export function wikipediaCachePath(config: AppConfig): string {
  return join(config.home, "wikipedia-cache.db");
}
