import { existsSync, readFileSync, realpathSync, statSync } from "node:fs";
import { delimiter, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseDotenv } from "dotenv";
import { CodehopError, ErrorCodes } from "../errors.ts";

/**
 * The ONLY module that reads process.env. Everything else receives configuration as arguments,
 * so tests and library users can pass values explicitly and nothing is read behind their back.
 *
 * A `.env` file in the current directory (or the file CODEHOP_ENV_FILE names; `none` turns it off)
 * supplies values the environment does not set. Precedence, highest first: CLI flags and API
 * options, then the process environment, then the .env file, then the defaults. The file is read
 * into codehop's snapshot only: process.env is left as it is.
 */

/** Snapshot of the environment variables codehop understands. */
export interface CodehopEnv {
  /** OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (vLLM) or http://localhost:11434/v1 (Ollama). */
  openaiBaseUrl?: string;
  /** API key for the endpoint; local servers accept any non-empty string. */
  openaiApiKey?: string;
  /** Anthropic API key for `anthropic:<model>` names (ANTHROPIC_API_KEY). */
  anthropicApiKey?: string;
  /** Anthropic Messages API base URL, without /v1 (ANTHROPIC_BASE_URL; default api.anthropic.com). */
  anthropicBaseUrl?: string;
  /** Gemini API key for `google-genai:<model>` names (GOOGLE_API_KEY, else GEMINI_API_KEY). */
  googleApiKey?: string;
  /** Gemini API base URL, without /v1beta (GOOGLE_GEMINI_BASE_URL; default generativelanguage.googleapis.com). */
  googleBaseUrl?: string;
  /** Long-term memory: the root agent's memory tools and the chat app's recall (CODEHOP_MEMORY=1). */
  memory?: boolean;
  /** Reflection: a lesson after a failed run, recalled for similar tasks (CODEHOP_REFLECTION=1). */
  reflection?: boolean;
  /**
   * Reflection: a scored run (the eval harness's score, the verifier's share of supported claims)
   * below this leaves a lesson too (CODEHOP_REFLECTION_MIN_SCORE, 0..1; default 0.5).
   */
  reflectionMinScore?: number;
  /** The user whose memories CLI and API runs use (CODEHOP_USER; default "local"). */
  memoryUser?: string;
  /** Days a memory lives after it is written or last recalled (CODEHOP_MEMORY_TTL_DAYS; unset or 0: forever). */
  memoryTtlDays?: number;
  /** LangSmith tracing on (LANGSMITH_TRACING=true, or the older LANGCHAIN_TRACING_V2=true). */
  langsmithTracing: boolean;
  /** LangSmith API endpoint (LANGSMITH_ENDPOINT, else LANGCHAIN_ENDPOINT; default api.smith.langchain.com). */
  langsmithEndpoint?: string;
  /** LangSmith API key (LANGSMITH_API_KEY, else LANGCHAIN_API_KEY). */
  langsmithApiKey?: string;
  /** LangSmith project the traces go to (LANGSMITH_PROJECT, else LANGCHAIN_PROJECT; default "default"). */
  langsmithProject?: string;
  /** OpenTelemetry spans exported over OTLP/HTTP (CODEHOP_OTEL=1; default off). */
  otelTracing: boolean;
  /**
   * OTLP/HTTP traces URL (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT +
   * /v1/traces; default http://localhost:4318/v1/traces).
   */
  otelEndpoint?: string;
  /** OTLP headers, `k=v,k2=v2` (OTEL_EXPORTER_OTLP_TRACES_HEADERS, else OTEL_EXPORTER_OTLP_HEADERS). */
  otelHeaders?: string;
  /** service.name of the spans (OTEL_SERVICE_NAME; default "codehop"). */
  otelServiceName?: string;
  /**
   * Authorized libraries of code actions (CODEHOP_SANDBOX_LIBRARIES; operator only, off by default):
   * `default` (the vetted set: papaparse, date-fns, decimal.js) or a comma-separated list of npm
   * packages, each optionally `name=Global` (src/sandbox/libraries.ts, docs/sandbox.md).
   */
  sandboxLibraries?: string;
  /** Default model name for every agent (CODEHOP_MODEL); `provider:model` picks a provider. */
  model?: string;
  /** Per-agent model overrides from CODEHOP_MODEL_<AGENT> (e.g. CODEHOP_MODEL_MANAGER), keyed by lower-case agent name. */
  agentModels: Record<string, string>;
  /**
   * Model names a client of a served graph (`codehop serve`, Studio's server) may choose in its run
   * context (CODEHOP_CLIENT_MODELS, comma-separated; unset: none, the operator's models only).
   */
  clientModels: string[];
  /** Data directory for checkpoints, caches and journals (CODEHOP_HOME, default ".codehop"). */
  home: string;
  /** Postgres URL (CODEHOP_DATABASE_URL): checkpoints, journal, threads and the run queue there instead of SQLite. */
  databaseUrl?: string;
  /** API key `codehop serve` requires from its clients (CODEHOP_API_KEY; unset = no key). */
  apiKey?: string;
  /** `codehop serve` authentication modes (CODEHOP_AUTH, e.g. "keys": the database's API keys). */
  auth?: string;
  /** JWKS URL of the identity provider whose JWTs `codehop serve` accepts (CODEHOP_JWKS_URL). */
  jwksUrl?: string;
  /** Issuer those JWTs must carry (CODEHOP_JWT_ISSUER). */
  jwtIssuer?: string;
  /** Audience those JWTs must carry (CODEHOP_JWT_AUDIENCE). */
  jwtAudience?: string;
  /** Browser origins `codehop serve` answers cross-origin (CODEHOP_CORS_ORIGINS, comma-separated; unset = none). */
  corsOrigins: string[];
  /** Running in CI (CI or CODEHOP_CI set): tests that need PostgreSQL or a browser fail instead of skipping. */
  ci: boolean;
  /** Local corpus DB made by `codehop ingest` (CODEHOP_CORPUS); unset = online Wikipedia. */
  corpus?: string;
  /** The configuration file to use (CODEHOP_CONFIG; default: see src/config/config-file.ts). */
  configFile?: string;
  /** MediaWiki API endpoint (CODEHOP_WIKIPEDIA_API), default https://en.wikipedia.org/w/api.php. */
  wikipediaApi?: string;
  /** OpenAI-compatible embeddings endpoint for corpus vectors (CODEHOP_EMBEDDINGS_BASE_URL). */
  embeddingsBaseUrl?: string;
  /** Embedding model name (CODEHOP_EMBEDDINGS_MODEL). */
  embeddingsModel?: string;
  /** API key for the embeddings endpoint (CODEHOP_EMBEDDINGS_API_KEY, falls back to OPENAI_API_KEY). */
  embeddingsApiKey?: string;
  /** Sampling temperature (CODEHOP_TEMPERATURE). */
  temperature?: number;
  /** Max output tokens per model call (CODEHOP_MAX_TOKENS). */
  maxTokens?: number;
  /** HTTP retries for model calls (CODEHOP_MAX_RETRIES). */
  maxRetries?: number;
  /** Model request timeout in ms (CODEHOP_MODEL_TIMEOUT_MS). */
  modelTimeoutMs?: number;
  /** Model for the eval harness's optional LLM-as-judge (CODEHOP_JUDGE_MODEL). */
  judgeModel?: string;
  /** OpenAI-compatible endpoint of the judge (CODEHOP_JUDGE_BASE_URL, falls back to OPENAI_BASE_URL). */
  judgeBaseUrl?: string;
  /** API key of the judge endpoint (CODEHOP_JUDGE_API_KEY, falls back to OPENAI_API_KEY). */
  judgeApiKey?: string;
  /** Chat: rounds kept verbatim in the agent's view, older ones summarized (CODEHOP_CHAT_KEEP_ROUNDS). */
  chatKeepRounds?: number;
  /** Chat: days an idle thread's attached files are kept (CODEHOP_CHAT_FILES_RETENTION_DAYS; 0 = forever). */
  chatFilesRetentionDays?: number;
  /** Chat: largest attachable file in MB (CODEHOP_CHAT_MAX_FILE_MB). */
  chatMaxFileMb?: number;
  /**
   * Document readers' limits (chat attachments, `codehop ingest`, inspect_file), each from its
   * CODEHOP_READER_* variable (see {@link READER_ENV}); unset ones keep the readers' defaults.
   */
  readerLimits: Partial<Record<keyof typeof READER_ENV, number>>;
  /**
   * `codehop serve`'s per-user limits, each from its CODEHOP_SERVE_* variable (see
   * {@link SERVE_LIMIT_ENV}; sizes in MB); unset ones keep src/server/limits.ts's defaults.
   */
  serveLimits: Partial<Record<keyof typeof SERVE_LIMIT_ENV, number>>;
  /** Chat: deadline for downloading an attached link in ms (CODEHOP_CHAT_URL_TIMEOUT_MS). */
  chatUrlTimeoutMs?: number;
  /**
   * Chat: a served chat graph (Studio's server, `codehop serve`) may fetch links to private,
   * loopback and link-local addresses (CODEHOP_CHAT_ALLOW_PRIVATE_URLS=1; default refused).
   */
  chatAllowPrivateUrls?: boolean;
  /**
   * Chat: the directory whose files a served chat graph may attach by path
   * (CODEHOP_CHAT_FILES_ROOT; unset: a served graph reads no local paths).
   */
  chatFilesRoot?: string;
  /** Web: the search provider (CODEHOP_SEARCH_PROVIDER: searxng, brave, tavily, serper; default searxng). */
  searchProvider?: string;
  /** Web: the provider's endpoint (CODEHOP_SEARCH_URL; SearxNG's base URL, e.g. http://localhost:8888). */
  searchUrl?: string;
  /** Web: the provider's API key (CODEHOP_SEARCH_API_KEY; Brave, Tavily, Serper). */
  searchApiKey?: string;
  /** Web: which browser reads pages (CODEHOP_BROWSER: text, chromium, auto; default auto). */
  browser?: string;
  /** Web: the Chromium executable of the real browser (CODEHOP_CHROMIUM_PATH, default /usr/bin/chromium). */
  chromiumPath?: string;
  /**
   * Web: a served graph's web tools may fetch private, loopback and link-local addresses
   * (CODEHOP_WEB_ALLOW_PRIVATE_URLS=1; default refused).
   */
  webAllowPrivateUrls?: boolean;
  /** Web: deadline of one page fetch in ms (CODEHOP_WEB_TIMEOUT_MS). */
  webTimeoutMs?: number;
  /** Web: largest page or download in MB (CODEHOP_WEB_MAX_MB). */
  webMaxMb?: number;
  /** Web: the Wayback Machine availability API (CODEHOP_WAYBACK_URL). */
  waybackUrl?: string;
  /**
   * Assistant: OpenAI-compatible `/v1/audio/transcriptions` endpoint for audio files
   * (CODEHOP_TRANSCRIPTION_BASE_URL; unset: the run's model endpoint).
   */
  transcriptionBaseUrl?: string;
  /** Assistant: the transcription model (CODEHOP_TRANSCRIPTION_MODEL, default whisper-1). */
  transcriptionModel?: string;
  /** Assistant: the transcription endpoint's key (CODEHOP_TRANSCRIPTION_API_KEY; unset: the run's model key). */
  transcriptionApiKey?: string;
  /**
   * Knowledge sources agents search (CODEHOP_SOURCES: web, wikipedia, corpus, or a comma list such
   * as web,corpus; unset: the corpus when CODEHOP_CORPUS is set, else Wikipedia). Checked where used.
   */
  sources?: string;
  /** Web research: domains ranked as primary sources (CODEHOP_WEB_ALLOW_DOMAINS, comma list). */
  webAllowDomains?: string[];
  /** Web research: domains never searched or read (CODEHOP_WEB_DENY_DOMAINS, comma list). */
  webDenyDomains?: string[];
}

/** A comma- or space-separated list (empty items dropped); undefined when unset. */
function list(value: string | undefined): string[] | undefined {
  const v = nonEmpty(value);
  return v === undefined ? undefined : v.split(/[\s,]+/).filter(Boolean);
}

function nonEmpty(value: string | undefined): string | undefined {
  const v = value?.trim();
  return v ? v : undefined;
}

function flag(name: string, value: string | undefined): boolean | undefined {
  const v = nonEmpty(value)?.toLowerCase();
  if (v === undefined) return undefined;
  if (["1", "true", "yes", "on"].includes(v)) return true;
  if (["0", "false", "no", "off"].includes(v)) return false;
  throw new CodehopError(ErrorCodes.CONFIG_INVALID, `${name} must be 1 or 0, got "${value}".`);
}

function num(name: string, value: string | undefined): number | undefined {
  const v = nonEmpty(value);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n))
    throw new CodehopError(ErrorCodes.CONFIG_INVALID, `${name} must be a number, got "${v}".`);
  return n;
}

/**
 * CODEHOP_MODEL_* variables that are settings, not per-agent model overrides: an agent with one of
 * these names cannot get its own model through the environment (use configurable.models instead).
 */
export const NON_AGENT_MODEL_KEYS: ReadonlySet<string> = new Set(["CODEHOP_MODEL_TIMEOUT_MS"]);

/**
 * The variables of the document readers' limits (src/ingest/reader-limits.ts says what each bounds
 * and its default). Sizes in MB, times in ms.
 */
export const READER_ENV = {
  timeoutMs: "CODEHOP_READER_TIMEOUT_MS",
  memoryMb: "CODEHOP_READER_MEMORY_MB",
  maxInflatedMb: "CODEHOP_READER_MAX_INFLATED_MB",
  maxEntries: "CODEHOP_READER_MAX_ENTRIES",
  maxRatio: "CODEHOP_READER_MAX_RATIO",
  maxXmlDepth: "CODEHOP_READER_MAX_XML_DEPTH",
  maxPages: "CODEHOP_READER_MAX_PAGES",
} as const;

function readerLimits(env: NodeJS.ProcessEnv): CodehopEnv["readerLimits"] {
  const out: CodehopEnv["readerLimits"] = {};
  for (const [key, name] of Object.entries(READER_ENV) as [keyof typeof READER_ENV, string][]) {
    const n = num(name, env[name]);
    if (n === undefined) continue;
    if (!(n > 0)) throw new CodehopError(ErrorCodes.CONFIG_INVALID, `${name} must be above 0.`);
    out[key] = n;
  }
  return out;
}

/**
 * The variables of `codehop serve`'s limits (src/server/limits.ts says what each bounds and its
 * default). Sizes in MB; 0 turns a per-user count off (not the body, depth and key limits).
 */
export const SERVE_LIMIT_ENV = {
  maxBodyMb: "CODEHOP_SERVE_MAX_BODY_MB",
  maxJsonDepth: "CODEHOP_SERVE_MAX_JSON_DEPTH",
  maxJsonMembers: "CODEHOP_SERVE_MAX_JSON_KEYS",
  requestsPerMinute: "CODEHOP_SERVE_REQUESTS_PER_MINUTE",
  maxActiveRuns: "CODEHOP_SERVE_MAX_ACTIVE_RUNS",
  maxRunningRuns: "CODEHOP_SERVE_MAX_RUNNING_RUNS",
  maxThreadUploadMb: "CODEHOP_SERVE_MAX_THREAD_UPLOAD_MB",
  maxUserUploadMb: "CODEHOP_SERVE_MAX_USER_UPLOAD_MB",
} as const;

/** Limits that must stay above 0 (a body, its depth and its keys always have a bound). */
const ALWAYS_BOUNDED = new Set(["maxBodyMb", "maxJsonDepth", "maxJsonMembers"]);

function serveLimits(env: NodeJS.ProcessEnv): CodehopEnv["serveLimits"] {
  const out: CodehopEnv["serveLimits"] = {};
  for (const [key, name] of Object.entries(SERVE_LIMIT_ENV) as [
    keyof typeof SERVE_LIMIT_ENV,
    string,
  ][]) {
    const n = num(name, env[name]);
    if (n === undefined) continue;
    if (!(n >= 0) || (n === 0 && ALWAYS_BOUNDED.has(key)))
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `${name} must be ${ALWAYS_BOUNDED.has(key) ? "above 0" : "0 (no limit) or more"}.`,
      );
    out[key] = n;
  }
  return out;
}

/** CODEHOP_ENV_FILE value that turns .env loading off. */
export const NO_ENV_FILE = "none";

/** The `.env` file codehop reads (undefined when turned off); see {@link readEnv}. */
export function envFilePath(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const named = nonEmpty(env.CODEHOP_ENV_FILE);
  if (named === NO_ENV_FILE) return undefined;
  return resolve(named ?? ".env");
}

/**
 * The variables of the `.env` file (empty when there is none). A file CODEHOP_ENV_FILE names
 * explicitly must exist; the default `.env` is optional.
 */
export function readEnvFile(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const path = envFilePath(env);
  if (!path) return {};
  const named = nonEmpty(env.CODEHOP_ENV_FILE) !== undefined;
  let stat: ReturnType<typeof statSync> | undefined;
  try {
    stat = statSync(path);
  } catch {
    stat = undefined;
  }
  if (!stat) {
    if (named)
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `CODEHOP_ENV_FILE names ${path}, which does not exist (set CODEHOP_ENV_FILE=${NO_ENV_FILE} to read no file).`,
      );
    return {};
  }
  if (!stat.isFile())
    throw new CodehopError(ErrorCodes.CONFIG_INVALID, `The env file ${path} is not a file.`);
  // Read on every readEnv() (model resolution calls it often): parsed again only when it changed.
  const key = `${path}:${stat.mtimeMs}:${stat.size}`;
  if (envFileCache?.key !== key) envFileCache = { key, values: parseDotenv(readFileSync(path)) };
  return envFileCache.values;
}

let envFileCache: { key: string; values: Record<string, string> } | undefined;

/**
 * Reads the environment into a typed snapshot: by default process.env over the `.env` file (see
 * the module comment); an explicit `env` object is read as it is (no file).
 */
export function readEnv(given?: NodeJS.ProcessEnv): CodehopEnv {
  const env: NodeJS.ProcessEnv = given ?? { ...readEnvFile(process.env), ...process.env };
  const agentModels: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    const m = /^CODEHOP_MODEL_([A-Z0-9_]+)$/.exec(key);
    const v = nonEmpty(value);
    if (m && v && !NON_AGENT_MODEL_KEYS.has(key)) agentModels[m[1].toLowerCase()] = v;
  }
  return {
    openaiBaseUrl: nonEmpty(env.OPENAI_BASE_URL),
    openaiApiKey: nonEmpty(env.OPENAI_API_KEY),
    anthropicApiKey: nonEmpty(env.ANTHROPIC_API_KEY),
    anthropicBaseUrl: nonEmpty(env.ANTHROPIC_BASE_URL),
    googleApiKey: nonEmpty(env.GOOGLE_API_KEY) ?? nonEmpty(env.GEMINI_API_KEY),
    googleBaseUrl: nonEmpty(env.GOOGLE_GEMINI_BASE_URL),
    memory: flag("CODEHOP_MEMORY", env.CODEHOP_MEMORY),
    reflection: flag("CODEHOP_REFLECTION", env.CODEHOP_REFLECTION),
    reflectionMinScore: num("CODEHOP_REFLECTION_MIN_SCORE", env.CODEHOP_REFLECTION_MIN_SCORE),
    memoryUser: nonEmpty(env.CODEHOP_USER),
    memoryTtlDays: num("CODEHOP_MEMORY_TTL_DAYS", env.CODEHOP_MEMORY_TTL_DAYS),
    langsmithTracing:
      (nonEmpty(env.LANGSMITH_TRACING) ?? nonEmpty(env.LANGCHAIN_TRACING_V2))?.toLowerCase() ===
      "true",
    langsmithEndpoint: nonEmpty(env.LANGSMITH_ENDPOINT) ?? nonEmpty(env.LANGCHAIN_ENDPOINT),
    langsmithApiKey: nonEmpty(env.LANGSMITH_API_KEY) ?? nonEmpty(env.LANGCHAIN_API_KEY),
    langsmithProject: nonEmpty(env.LANGSMITH_PROJECT) ?? nonEmpty(env.LANGCHAIN_PROJECT),
    otelTracing: flag("CODEHOP_OTEL", env.CODEHOP_OTEL) ?? false,
    otelEndpoint:
      nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) ??
      (nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT)
        ? `${nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT)!.replace(/\/+$/, "")}/v1/traces`
        : undefined),
    otelHeaders:
      nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS) ?? nonEmpty(env.OTEL_EXPORTER_OTLP_HEADERS),
    otelServiceName: nonEmpty(env.OTEL_SERVICE_NAME),
    sandboxLibraries: nonEmpty(env.CODEHOP_SANDBOX_LIBRARIES),
    model: nonEmpty(env.CODEHOP_MODEL),
    agentModels,
    clientModels: (env.CODEHOP_CLIENT_MODELS ?? "")
      .split(",")
      .map((m) => m.trim())
      .filter(Boolean),
    home: nonEmpty(env.CODEHOP_HOME) ?? ".codehop",
    corpus: nonEmpty(env.CODEHOP_CORPUS),
    databaseUrl: nonEmpty(env.CODEHOP_DATABASE_URL),
    apiKey: nonEmpty(env.CODEHOP_API_KEY),
    auth: nonEmpty(env.CODEHOP_AUTH),
    jwksUrl: nonEmpty(env.CODEHOP_JWKS_URL),
    jwtIssuer: nonEmpty(env.CODEHOP_JWT_ISSUER),
    jwtAudience: nonEmpty(env.CODEHOP_JWT_AUDIENCE),
    corsOrigins: (env.CODEHOP_CORS_ORIGINS ?? "")
      .split(",")
      .map((o) => o.trim())
      .filter(Boolean),
    ci: Boolean(nonEmpty(env.CI) && env.CI !== "false") || nonEmpty(env.CODEHOP_CI) === "1",
    configFile: nonEmpty(env.CODEHOP_CONFIG),
    wikipediaApi: nonEmpty(env.CODEHOP_WIKIPEDIA_API),
    embeddingsBaseUrl: nonEmpty(env.CODEHOP_EMBEDDINGS_BASE_URL),
    embeddingsModel: nonEmpty(env.CODEHOP_EMBEDDINGS_MODEL),
    embeddingsApiKey: nonEmpty(env.CODEHOP_EMBEDDINGS_API_KEY) ?? nonEmpty(env.OPENAI_API_KEY),
    temperature: num("CODEHOP_TEMPERATURE", env.CODEHOP_TEMPERATURE),
    maxTokens: num("CODEHOP_MAX_TOKENS", env.CODEHOP_MAX_TOKENS),
    maxRetries: num("CODEHOP_MAX_RETRIES", env.CODEHOP_MAX_RETRIES),
    modelTimeoutMs: num("CODEHOP_MODEL_TIMEOUT_MS", env.CODEHOP_MODEL_TIMEOUT_MS),
    judgeModel: nonEmpty(env.CODEHOP_JUDGE_MODEL),
    judgeBaseUrl: nonEmpty(env.CODEHOP_JUDGE_BASE_URL) ?? nonEmpty(env.OPENAI_BASE_URL),
    judgeApiKey: nonEmpty(env.CODEHOP_JUDGE_API_KEY) ?? nonEmpty(env.OPENAI_API_KEY),
    chatKeepRounds: num("CODEHOP_CHAT_KEEP_ROUNDS", env.CODEHOP_CHAT_KEEP_ROUNDS),
    chatFilesRetentionDays: num(
      "CODEHOP_CHAT_FILES_RETENTION_DAYS",
      env.CODEHOP_CHAT_FILES_RETENTION_DAYS,
    ),
    chatMaxFileMb: num("CODEHOP_CHAT_MAX_FILE_MB", env.CODEHOP_CHAT_MAX_FILE_MB),
    readerLimits: readerLimits(env),
    serveLimits: serveLimits(env),
    chatUrlTimeoutMs: num("CODEHOP_CHAT_URL_TIMEOUT_MS", env.CODEHOP_CHAT_URL_TIMEOUT_MS),
    chatAllowPrivateUrls: flag(
      "CODEHOP_CHAT_ALLOW_PRIVATE_URLS",
      env.CODEHOP_CHAT_ALLOW_PRIVATE_URLS,
    ),
    chatFilesRoot: nonEmpty(env.CODEHOP_CHAT_FILES_ROOT),
    searchProvider: nonEmpty(env.CODEHOP_SEARCH_PROVIDER)?.toLowerCase(),
    searchUrl: nonEmpty(env.CODEHOP_SEARCH_URL),
    searchApiKey: nonEmpty(env.CODEHOP_SEARCH_API_KEY),
    browser: nonEmpty(env.CODEHOP_BROWSER)?.toLowerCase(),
    chromiumPath: nonEmpty(env.CODEHOP_CHROMIUM_PATH),
    webAllowPrivateUrls: flag("CODEHOP_WEB_ALLOW_PRIVATE_URLS", env.CODEHOP_WEB_ALLOW_PRIVATE_URLS),
    webTimeoutMs: num("CODEHOP_WEB_TIMEOUT_MS", env.CODEHOP_WEB_TIMEOUT_MS),
    webMaxMb: num("CODEHOP_WEB_MAX_MB", env.CODEHOP_WEB_MAX_MB),
    waybackUrl: nonEmpty(env.CODEHOP_WAYBACK_URL),
    transcriptionBaseUrl: nonEmpty(env.CODEHOP_TRANSCRIPTION_BASE_URL),
    transcriptionModel: nonEmpty(env.CODEHOP_TRANSCRIPTION_MODEL),
    transcriptionApiKey: nonEmpty(env.CODEHOP_TRANSCRIPTION_API_KEY),
    sources: nonEmpty(env.CODEHOP_SOURCES)?.toLowerCase(),
    webAllowDomains: list(env.CODEHOP_WEB_ALLOW_DOMAINS),
    webDenyDomains: list(env.CODEHOP_WEB_DENY_DOMAINS),
  };
}

/** Env key suffix of an agent name ("page_search" → "PAGE_SEARCH" in CODEHOP_MODEL_PAGE_SEARCH). */
export function agentEnvKey(agentName: string): string {
  return agentName.replace(/[^A-Za-z0-9]+/g, "_").toUpperCase();
}

/** Where the `codehop` executable of this copy of codehop is (bin/codehop.mjs beside src/ or dist/). */
const OWN_BIN = fileURLToPath(new URL("../../bin/codehop.mjs", import.meta.url));

function realpathOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

let program: string | undefined;

/**
 * How a printed next-step command should start: `codehop` when that name on PATH is this very
 * CLI (a global install, or a project's node_modules/.bin on PATH), else `npx codehop` (a clone
 * or a project dependency, where only npx finds it). Under npm (`npx codehop`, `npm run demo`)
 * npm has put node_modules/.bin on PATH for this process only, so it is `npx codehop` too.
 */
export function cliProgram(env: NodeJS.ProcessEnv = process.env): string {
  if (env === process.env && program) return program;
  let found = "npx codehop";
  if (!nonEmpty(env.npm_command)) {
    const own = realpathOrSelf(OWN_BIN);
    for (const dir of (env.PATH ?? "").split(delimiter)) {
      if (!dir) continue;
      const candidate = join(dir, "codehop");
      if (existsSync(candidate) && realpathOrSelf(candidate) === own) {
        found = "codehop";
        break;
      }
    }
  }
  if (env === process.env) program = found;
  return found;
}

/**
 * Whether to colour output written to a stream: FORCE_COLOR set to anything but `0`/`false` turns
 * colour on (even in a pipe), then a non-empty NO_COLOR turns it off (https://no-color.org), then
 * a terminal (TTY, TERM not `dumb`) gets colour and anything else (a pipe, a file, CI logs) none.
 */
export function colorWanted(
  stream: { isTTY?: boolean },
  env: NodeJS.ProcessEnv = process.env,
): boolean {
  const force = env.FORCE_COLOR;
  if (force !== undefined) return !["0", "false"].includes(force.trim().toLowerCase());
  if (nonEmpty(env.NO_COLOR)) return false;
  return Boolean(stream.isTTY) && env.TERM !== "dumb";
}
