import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { AIMessage, AIMessageChunk, BaseMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { ChatOpenAI, ChatOpenAIFields } from "@langchain/openai";
import { v1Hint } from "../config/endpoint.ts";
import { agentEnvKey, type CodehopEnv, readEnv } from "../config/env.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { MODEL_DEFAULTS } from "./model-defaults.ts";
import { parseModelName, providerEndpoint, ProviderChatModel } from "./providers.ts";
import { readRunContext } from "./run-context.ts";

export { v1Hint };

/**
 * Model factory: every agent's chat model is resolved here, from (in order of precedence)
 * 1. a BaseChatModel instance given to `createCodeAgent({ model })`,
 * 2. the run context's `models[agentName]` (model name or instance),
 * 3. the run context's `model` (model name or instance),
 * 4. a model name given to `createCodeAgent({ model: "name" })`,
 * 5. CODEHOP_MODEL_<AGENT> (e.g. CODEHOP_MODEL_PAGE_SEARCH), 6. CODEHOP_MODEL.
 * Names become a ChatOpenAI for the OpenAI-compatible endpoint in OPENAI_BASE_URL (or the run
 * context's `modelSettings.baseURL`). Never built with `streaming: true` (it hangs offline:
 * token counting downloads a tiktoken encoding). A name `provider:model` with a provider of
 * LangChain's universal init (`anthropic:...`, `google-genai:...`) becomes that provider's model
 * (src/core/providers.ts), with its endpoint and key from its own variables; the run context's
 * `modelSettings` then give only the sampling settings.
 */

// (The run context's `modelSettings`; declared there, beside the other keys a run gives.)
export type { ModelSettings } from "./run-context.ts";

export { MODEL_DEFAULTS } from "./model-defaults.ts";

function isChatModel(value: unknown): value is BaseChatModel {
  return typeof value === "object" && value !== null && typeof (value as any).invoke === "function";
}

const cache = new Map<string, BaseChatModel>();

/** HTTP statuses that retrying cannot fix (bad request, auth, not found ...): fail at once. */
const STATUS_NO_RETRY = new Set([400, 401, 402, 403, 404, 405, 406, 407, 409, 413, 422]);
/** A 429 whose message says the account is out of quota will not recover by waiting. */
const QUOTA_EXHAUSTED =
  /insufficient[_ -]?quota|exceeded (?:your|the current).+quota|quota (?:has been )?exhausted|billing|credit balance|out of credits/i;

/**
 * The HTTP status of a failed model request: on the error, or on one it wraps (LangChain turns a
 * 400 "maximum context length" reply into a ContextOverflowError whose cause has the status).
 */
function httpStatus(error: unknown): number | undefined {
  const withStatus = inCauses(error, (e: any): e is unknown => typeof statusOf(e) === "number");
  return withStatus === undefined ? undefined : statusOf(withStatus);
}

function statusOf(error: any): number | undefined {
  const s = error?.status ?? error?.response?.status ?? error?.statusCode;
  return typeof s === "number" ? s : undefined;
}

/** Statuses of an endpoint refusing one request as it is (too long, invalid for the model). */
const STATUS_REQUEST_REFUSED = new Set([400, 413, 422]);

/**
 * True when a model call failed because the endpoint refused that request as it is — HTTP 400,
 * 413 or 422 (e.g. "maximum context length exceeded") — rather than because the endpoint is down,
 * overloaded or misconfigured (no connection, 5xx, 429, 401, 403, 404): sending the same request
 * again, now or after a resume, gets the same answer. Callers that run independent parts of a job
 * can give up that part instead of stopping the run (the research app: a sub-question's gap).
 */
export function isRequestRefused(err: unknown): boolean {
  if (!CodehopError.isInstance(err) || err.code !== ErrorCodes.MODEL_ENDPOINT_FAILED) return false;
  const status = httpStatus(err.cause);
  return status !== undefined && STATUS_REQUEST_REFUSED.has(status);
}

/**
 * The endpoint answered, but not as an OpenAI-compatible API: an HTML page with a 2xx status (a
 * web UI, a base URL without /v1 served by a single-page app). Retrying cannot fix it.
 */
export class EndpointAnswerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EndpointAnswerError";
  }
}

/** The first error in `err`'s cause chain that satisfies `test`. */
function inCauses<T>(err: unknown, test: (e: any) => e is T): T | undefined {
  let e: any = err;
  for (let i = 0; e && i < 8; i++, e = e.cause) if (test(e)) return e;
  return undefined;
}

const isAnswerError = (e: any): e is EndpointAnswerError => e?.name === "EndpointAnswerError";

/**
 * fetch for the model client: a 2xx reply that is an HTML page fails at once with an
 * {@link EndpointAnswerError} saying so, instead of reaching LangChain as a reply with no choices.
 */
export function checkedFetch(baseURL: string | undefined): typeof fetch {
  return async (input, init) => {
    const res = await fetch(input, init);
    const type = res.headers.get("content-type") ?? "";
    if (res.ok && /\btext\/html\b/i.test(type)) {
      await res.body?.cancel().catch(() => {});
      throw new EndpointAnswerError(
        `the endpoint answered an HTML page (HTTP ${res.status} from ${String(input instanceof Request ? input.url : input)}), not an OpenAI-compatible JSON reply${v1Hint(baseURL)}`,
      );
    }
    return res;
  };
}

/** The message of an error body an OpenAI-compatible server sent (`{error: {message}}`, `{detail}` ...). */
function bodyMessage(body: unknown): string | undefined {
  if (typeof body === "string") return body;
  if (!body || typeof body !== "object") return undefined;
  const b = body as Record<string, any>;
  const found =
    b.message ??
    b.error?.message ??
    (typeof b.error === "string" ? b.error : undefined) ??
    b.detail;
  if (typeof found === "string") return found;
  return found === undefined ? undefined : JSON.stringify(found);
}

function shortText(text: string, max = 300): string {
  const t = text.replace(/\s+/g, " ").trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

/**
 * A model endpoint failure as a sentence a person can act on: "HTTP 404: model not found", "cannot
 * connect to http://... (ECONNREFUSED)", "the endpoint answered an HTML page ...", never the raw
 * JSON body or LangChain's troubleshooting suffix; with a hint when the base URL misses /v1.
 */
export function endpointErrorText(
  err: unknown,
  baseURL?: string,
  baseUrlVariable = "OPENAI_BASE_URL",
): string {
  const answer = inCauses(err, isAnswerError);
  if (answer) return answer.message;
  const e = err as any;
  const raw = String(e?.message ?? err)
    .replace(/\s*Troubleshooting URL: \S+\s*$/, "")
    .trim();
  const status = httpStatus(e);
  if (status !== undefined) {
    const detail = bodyMessage(e?.error) ?? raw.replace(/^\d{3}\s*/, "");
    const html = /<(?:!doctype|html|head|body)\b/i.test(detail);
    const what = html
      ? "an HTML page, not an OpenAI-compatible reply"
      : shortText(detail) || "(no message)";
    return `HTTP ${status}: ${what}${status === 404 || status === 405 || html ? v1Hint(baseURL) : ""}`;
  }
  const refused = inCauses(err, (c: any): c is { code: string } =>
    ["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ECONNRESET", "EHOSTUNREACH"].includes(c?.code),
  );
  if (refused)
    return `cannot connect to ${baseURL ?? "the endpoint"} (${refused.code}): is the server running and ${baseUrlVariable} right?`;
  return shortText(raw, 500);
}

/**
 * Retry policy for model calls (LangChain's AsyncCaller calls it after each failed attempt: return
 * to retry with exponential backoff, throw to give up). Unlike LangChain's default, a 429 without a
 * Retry-After hint is retried too: local servers (vLLM, llama.cpp, proxies) send bare 429s when
 * their queue is full, which is exactly when waiting helps. Quota exhaustion, client errors and
 * aborts fail at once.
 */
export function modelFailedAttemptHandler(error: unknown): void {
  const e = error as any;
  if (e?.name === "AbortError" || /^(Cancel|AbortError)/.test(String(e?.message ?? "")))
    throw error;
  if (inCauses(error, isAnswerError)) throw error;
  const status = httpStatus(e);
  if (status !== undefined && STATUS_NO_RETRY.has(status)) throw error;
  if (e?.code === "insufficient_quota" || e?.error?.code === "insufficient_quota") throw error;
  if (status === 429 && QUOTA_EXHAUSTED.test(String(e?.message ?? ""))) throw error;
  // Everything else (429, 5xx, timeouts, connection resets, unparsable bodies): retry.
}

/**
 * What {@link resolveModel} chose, decided without loading a model library: a model (an instance
 * given, or a `provider:model` name's model, which loads its library at its first call), or the
 * settings of the ChatOpenAI to build for an OpenAI-compatible endpoint.
 */
export type ModelChoice =
  { model: BaseChatModel; openai?: undefined } | { model?: undefined; openai: OpenAIModelFields };

/** The ChatOpenAI settings {@link resolveModel} builds a model from (its cache key). */
interface OpenAIModelFields {
  model: string;
  apiKey: string;
  temperature: number;
  maxTokens: number;
  maxRetries: number;
  timeout: number;
  baseURL: string | undefined;
}

/**
 * The chat model for `agentName` in a run with `config`. Throws CODEHOP_MODEL_NOT_CONFIGURED
 * naming the variables to set when no model or endpoint can be found. Asynchronous because
 * @langchain/openai (some 270 modules) is loaded at the first model built, not when codehop
 * is imported: commands and programs that never call a model do not pay for it.
 */
export async function resolveModel(
  agentName: string,
  config: RunnableConfig | undefined,
  options: { model?: string | BaseChatModel; env?: CodehopEnv } = {},
): Promise<BaseChatModel> {
  const choice = resolveModelChoice(agentName, config, options);
  return choice.model ?? (await openAIModel(choice.openai));
}

/**
 * The choice {@link resolveModel} makes, synchronously and with the same errors, without building
 * a ChatOpenAI (e.g. for a caller that builds its own, src/eval/model.ts).
 */
export function resolveModelChoice(
  agentName: string,
  config: RunnableConfig | undefined,
  options: { model?: string | BaseChatModel; env?: CodehopEnv } = {},
): ModelChoice {
  if (isChatModel(options.model)) return { model: options.model };
  const conf = readRunContext(config);
  const env = options.env ?? readEnv();
  const candidates: unknown[] = [
    conf.models?.[agentName],
    conf.model,
    options.model,
    env.agentModels[agentEnvKey(agentName).toLowerCase()],
    env.model,
  ];
  const chosen = candidates.find((c) => isChatModel(c) || (typeof c === "string" && c.trim()));
  if (isChatModel(chosen)) return { model: chosen };
  const settings = conf.modelSettings ?? {};
  const key = agentEnvKey(agentName);
  if (typeof chosen !== "string") {
    throw new CodehopError(
      ErrorCodes.MODEL_NOT_CONFIGURED,
      `No model configured for agent "${agentName}": set CODEHOP_MODEL (or CODEHOP_MODEL_${key} for this agent) ` +
        `and OPENAI_BASE_URL (e.g. http://localhost:8000/v1), or give the run a model (the run context's model).`,
    );
  }
  const name = parseModelName(chosen);
  const sampling = {
    temperature: settings.temperature ?? env.temperature ?? MODEL_DEFAULTS.temperature,
    maxTokens: settings.maxTokens ?? env.maxTokens ?? MODEL_DEFAULTS.maxTokens,
    maxRetries: settings.maxRetries ?? env.maxRetries ?? MODEL_DEFAULTS.maxRetries,
    timeoutMs: settings.timeoutMs ?? env.modelTimeoutMs ?? MODEL_DEFAULTS.timeoutMs,
  };
  if (name.provider !== "openai") return { model: providerModel(agentName, name, sampling, env) };
  const baseURL = settings.baseURL ?? env.openaiBaseUrl;
  const apiKey = settings.apiKey ?? env.openaiApiKey ?? (baseURL ? "EMPTY" : undefined);
  if (!apiKey) {
    throw new CodehopError(
      ErrorCodes.MODEL_NOT_CONFIGURED,
      `No model endpoint configured for agent "${agentName}" (model "${chosen}"): set OPENAI_BASE_URL ` +
        `(e.g. http://localhost:8000/v1) for a local server, or OPENAI_API_KEY for api.openai.com.`,
    );
  }
  return {
    openai: {
      model: name.model,
      apiKey,
      temperature: sampling.temperature,
      maxTokens: sampling.maxTokens,
      maxRetries: sampling.maxRetries,
      timeout: sampling.timeoutMs,
      baseURL,
    },
  };
}

/** @langchain/openai's ChatOpenAI, imported once, at the first model built. */
let chatOpenAI: Promise<typeof ChatOpenAI> | undefined;

/** The ChatOpenAI of `fields`, one per distinct settings (cached like every resolved model). */
async function openAIModel(fields: OpenAIModelFields): Promise<BaseChatModel> {
  const cacheKey = JSON.stringify(fields);
  let model = cache.get(cacheKey);
  if (model) return model;
  chatOpenAI ??= import("@langchain/openai").then((m) => m.ChatOpenAI);
  const Chat = await chatOpenAI;
  // Another call may have built it while the library loaded: one instance per settings.
  model = cache.get(cacheKey);
  if (model) return model;
  const { baseURL: url, ...rest } = fields;
  const settings: ChatOpenAIFields = {
    ...rest,
    onFailedAttempt: modelFailedAttemptHandler,
    configuration: { ...(url ? { baseURL: url } : {}), fetch: checkedFetch(url) },
  };
  model = new Chat(settings);
  cache.set(cacheKey, model);
  return model;
}

/**
 * The model of a `provider:model` name: endpoint and key from the provider's own variables
 * (ANTHROPIC_*, GOOGLE_*); a provider codehop knows the key variable of fails here, before any
 * call, when it is unset.
 */
function providerModel(
  agentName: string,
  name: { provider: string; model: string },
  sampling: { temperature: number; maxTokens: number; maxRetries: number; timeoutMs: number },
  env: CodehopEnv,
): BaseChatModel {
  const endpoint = providerEndpoint(name.provider, env);
  if (endpoint.keyVariable && !endpoint.apiKey)
    throw new CodehopError(
      ErrorCodes.MODEL_NOT_CONFIGURED,
      `No key for model "${name.provider}:${name.model}" of agent "${agentName}": set ${endpoint.keyVariable}` +
        (endpoint.baseUrlVariable
          ? ` (and ${endpoint.baseUrlVariable} for another endpoint than the provider's).`
          : "."),
    );
  const cacheKey = JSON.stringify({ ...name, ...sampling, ...endpoint });
  let model = cache.get(cacheKey);
  if (!model) {
    model = new ProviderChatModel({
      ...name,
      ...sampling,
      endpoint,
      onFailedAttempt: modelFailedAttemptHandler,
      fetch: checkedFetch(endpoint.baseURL),
    });
    cache.set(cacheKey, model);
  }
  return model;
}

/** A short description of a model for error messages ("scripted at http://127.0.0.1:1234/v1"). */
export function describeModel(model: BaseChatModel): string {
  const m = model as any;
  const name = m.model ?? m.modelName ?? model.getName?.() ?? "model";
  const url = m.clientConfig?.baseURL ?? m.configuration?.baseURL ?? m.baseURL;
  const provider = m instanceof ProviderChatModel ? `${m.provider}:` : "";
  return url ? `${provider}${name} at ${url}` : `${provider}${name}`;
}

/** Message of an empty-choices reply in CODEHOP_MODEL_ENDPOINT_FAILED. */
export const EMPTY_CHOICES_REASON = "the endpoint returned no choices (empty response)";

/**
 * LangChain's invoke() reads `generations[0][0].message`; a reply with `choices: []` gives no
 * generation, so it fails with this TypeError instead of a useful message.
 */
function isEmptyChoicesError(err: unknown): boolean {
  return err instanceof TypeError && /\(reading 'message'\)/.test(err.message);
}

class EmptyChoicesError extends Error {
  constructor() {
    super(EMPTY_CHOICES_REASON);
    this.name = "EmptyChoicesError";
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }
    function onAbort() {
      clearTimeout(timer);
      reject(signal!.reason);
    }
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Calls the model once (invoke, or stream + concatenated chunks) with stop sequences. Any failure
 * after the client's own retries becomes CODEHOP_MODEL_ENDPOINT_FAILED naming the agent and
 * endpoint; since it happens before the calling node writes state, the thread stays resumable.
 * A reply without choices (overloaded proxies send `choices: []`) happens after the client's HTTP
 * retry loop, so it is retried here like a garbage body: as many times as the client retries
 * (CODEHOP_MAX_RETRIES), with exponential backoff.
 */
export async function callModel(
  model: BaseChatModel,
  messages: BaseMessage[],
  options: {
    agentName: string;
    stop?: string[];
    stream?: boolean;
    signal?: AbortSignal;
    /** Tags of the call's run (e.g. LangGraph's no-stream tag for a call that is not a reply). */
    tags?: string[];
  },
): Promise<AIMessage | AIMessageChunk> {
  const callOptions: Record<string, unknown> = {};
  if (options.stop?.length) callOptions.stop = options.stop;
  if (options.tags?.length) callOptions.tags = options.tags;
  // Each call listens on a signal of its own that follows the caller's: the OpenAI client adds an
  // abort listener per request to the signal it is given, so a node making many calls on its one
  // signal (a writer's sections, a verifier's batches) would trip Node's MaxListeners warning.
  if (options.signal) callOptions.signal = AbortSignal.any([options.signal]);
  const once = async (): Promise<AIMessage | AIMessageChunk> => {
    if (!options.stream) {
      try {
        return (await model.invoke(messages, callOptions)) as AIMessage;
      } catch (err) {
        if (isEmptyChoicesError(err)) throw new EmptyChoicesError();
        throw err;
      }
    }
    let acc: AIMessageChunk | undefined;
    for await (const chunk of await model.stream(messages, callOptions))
      acc = acc ? acc.concat(chunk) : chunk;
    if (!acc) throw new EmptyChoicesError();
    return acc;
  };
  const retries = Math.max(0, Number((model as any).caller?.maxRetries ?? 0) || 0);
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        return await once();
      } catch (err) {
        if (!(err instanceof EmptyChoicesError) || attempt >= retries) throw err;
        await sleep(Math.min(250 * 2 ** attempt, 8000), options.signal);
      }
    }
  } catch (err) {
    if (CodehopError.isInstance(err)) throw err;
    const m = model as any;
    const reason = endpointErrorText(
      err,
      m.clientConfig?.baseURL ?? m.configuration?.baseURL ?? m.baseURL,
      m.baseUrlVariable,
    );
    throw new CodehopError(
      ErrorCodes.MODEL_ENDPOINT_FAILED,
      `Model call for agent "${options.agentName}" failed (${describeModel(model)}): ${reason}`,
      { cause: err },
    );
  }
}

/** Text of message content: a string, or content parts (text parts joined). */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content.map((p: any) => (typeof p === "string" ? p : (p?.text ?? ""))).join("");
  return String(content ?? "");
}

/** Text of a model reply (content parts joined). */
export function messageText(message: Pick<AIMessage, "content">): string {
  return contentText(message.content);
}
