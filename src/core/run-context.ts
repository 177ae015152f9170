import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { z } from "zod";
import type { RunnableConfig } from "@langchain/core/runnables";
import { readEnv } from "../config/env.ts";
import { clientSettable, oneOf, upTo } from "./client-settings.ts";
import { operatorModelLimits } from "./model-defaults.ts";
import type { CodeSandbox } from "../sandbox/contract.ts";
import type { CallJournal } from "./journal.ts";
import type { CodeTool } from "../tools/define-tool.ts";
import type { UploadReader } from "./uploads.ts";
import type { UsageByAgent } from "./usage.ts";

/** Endpoint and sampling settings; each falls back to its environment variable. */
export interface ModelSettings {
  /** OPENAI_BASE_URL, e.g. http://localhost:8000/v1. */
  baseURL?: string;
  /** OPENAI_API_KEY; defaults to "EMPTY" for a custom endpoint (vLLM / Ollama accept any key). */
  apiKey?: string;
  /** CODEHOP_TEMPERATURE (default 0). */
  temperature?: number;
  /** CODEHOP_MAX_TOKENS (default 1024). */
  maxTokens?: number;
  /** CODEHOP_MAX_RETRIES (default 3; exponential backoff between attempts). */
  maxRetries?: number;
  /** CODEHOP_MODEL_TIMEOUT_MS (default 120000). */
  timeoutMs?: number;
}

/** Memory settings of a run (run context `memory`; src/core/memory.ts uses them). */
export interface MemorySettings {
  /** The run's root agent gets remember / recall / forget. */
  tools?: boolean;
  /** The chat app recalls what it knows about the user at each round. */
  recall?: boolean;
  /** Lessons: written after a failed run, recalled for similar tasks. */
  reflection?: boolean;
  /** A scored run below this score (0..1) leaves a lesson too (default 0.5). */
  minScore?: number;
  /** The user whose memories a run uses when no authenticated user is given (default "local"). */
  user?: string;
}

/**
 * What a run gives its agents, typed: LangGraph's own runtime context (`config.context`, which
 * LangGraph hands to every node and, through the node's config, to every agent invoked inside one),
 * read and written only through this module.
 *
 * Apps add their own keys by augmenting the interface, so the framework never imports them:
 * ```ts
 * declare module "codehop/core/run-context" { interface RunContext { knowledgeSource?: KnowledgeSource } }
 * ```
 * (inside this repository: `declare module "../../core/run-context.ts"`).
 */
export interface RunContext {
  /** Call journal: a resumed or replayed action is served the calls it already made. */
  journal?: CallJournal;
  /** Model for every agent (name for the configured endpoint, or an instance). */
  model?: string | BaseChatModel;
  /** Per-agent models by agent name (win over `model`). */
  models?: Readonly<Record<string, string | BaseChatModel>>;
  /** Endpoint and sampling settings for model names (each falls back to its environment variable). */
  modelSettings?: ModelSettings;
  /** Sandbox for every agent of the run that was built without one. */
  sandbox?: CodeSandbox;
  /**
   * More tools for this run, by agent name (`"*"`: every agent), after the agent's own: e.g. the
   * tools of MCP servers (src/tools/mcp.ts). They show in the agent's prompt like its own tools.
   */
  agentTools?: Readonly<Record<string, readonly CodeTool<any>[]>>;
  /**
   * Framework-internal: the `taskEpoch` of every agent above the one running (root first), set by
   * the act node for the tools it calls, so a sub-agent's journal keys carry the whole path.
   */
  taskEpochs?: readonly number[];
  /**
   * Framework-internal: the names of the agents above the one running (root first), set by the act
   * node for the tools it calls, so an approval request names the whole path to the call.
   */
  agentPath?: readonly string[];
  /**
   * Framework-internal: where an agent-as-tool call collects its sub-agent's usage as it is spent,
   * so tokens of a sub-agent that fails instead of answering still reach the parent.
   */
  usageSink?: (usage: UsageByAgent) => void;
  /**
   * Files the run's input uploaded, stored by the server that received them (src/core/uploads.ts):
   * what reference blocks (`upload: "sha256:..."`) in the input's messages are read from.
   */
  uploads?: UploadReader;
  /**
   * Long-term memory of the run (src/core/memory.ts): memory tools for the root agent, the chat
   * app's recall, reflection lessons, and the user of runs without an authenticated one.
   */
  memory?: MemorySettings;
  /**
   * Lessons from earlier attempts at similar tasks (the reflection step recalled them): shown to
   * the run's root agent after its task.
   */
  lessons?: readonly string[];
}

const isObject = (v: unknown) => typeof v === "object" && v !== null;
const modelField = () =>
  z
    .union([z.string().min(1), z.custom<BaseChatModel>(isObject, "a chat model instance")])
    .describe("model name for the configured endpoint (or a chat model instance)");

/** Model names a client may choose: the operator's allow-list (CODEHOP_CLIENT_MODELS). */
const clientModels = oneOf(
  () => readEnv().clientModels,
  "the models the operator allows clients (CODEHOP_CLIENT_MODELS)",
);
const limit = (key: "maxTokens" | "maxRetries" | "timeoutMs", variable: string) =>
  upTo(() => operatorModelLimits()[key], `the operator's ${variable}`);

/**
 * The run context's schema, given to LangGraph as each code agent graph's context schema: LangGraph
 * validates a run's context (or, without one, its `configurable`) against it, and the LangGraph
 * server shows the JSON-able fields in Studio's configuration form. Loose: apps' keys and
 * LangGraph's own pass. Apps extend it for their keys (`RunContextSchema.extend({ ... })`).
 *
 * Keys marked with `clientSettable` are the ones a client of a served graph may set
 * (src/core/client-settings.ts): a model on the operator's allow-list, the temperature, and token,
 * retry and time limits up to the operator's. The endpoint, its key and every code-made object
 * are the operator's.
 */
export const RunContextSchema = z.looseObject({
  model: clientSettable(modelField().optional(), clientModels),
  models: z
    .record(z.string(), clientSettable(modelField(), clientModels))
    .optional()
    .describe("per-agent model names, by agent name (win over `model`)"),
  modelSettings: z
    .looseObject({
      baseURL: z
        .string()
        .optional()
        .describe("OpenAI-compatible endpoint, e.g. http://localhost:8000/v1"),
      apiKey: z.string().optional().describe("the endpoint's API key"),
      temperature: clientSettable(z.number().min(0).max(2).optional()),
      maxTokens: clientSettable(
        z.number().int().positive().optional(),
        limit("maxTokens", "CODEHOP_MAX_TOKENS"),
      ),
      maxRetries: clientSettable(
        z.number().int().min(0).optional(),
        limit("maxRetries", "CODEHOP_MAX_RETRIES"),
      ),
      timeoutMs: clientSettable(
        z.number().positive().optional(),
        limit("timeoutMs", "CODEHOP_MODEL_TIMEOUT_MS"),
      ),
    })
    .optional()
    .describe("endpoint and sampling settings (each falls back to its environment variable)"),
  journal: z.custom<CallJournal>(isObject, "a call journal").optional(),
  sandbox: z.custom<CodeSandbox>(isObject, "a code sandbox").optional(),
  // The operator's (unmarked): a client choosing `memory.user` would read another user's memories.
  memory: z
    .looseObject({
      tools: z.boolean().optional(),
      recall: z.boolean().optional(),
      reflection: z.boolean().optional(),
      minScore: z.number().min(0).max(1).optional(),
      user: z.string().optional(),
    })
    .optional()
    .describe("long-term memory: tools, chat recall, reflection lessons, the run's user"),
  // The operator's: set by the run lifecycle's reflection step.
  lessons: z.array(z.string()).optional().describe("lessons recalled for this run's task"),
  uploads: z
    .custom<UploadReader>(
      (v) => isObject(v) && typeof (v as UploadReader).get === "function",
      "an upload store (set by the server, code only)",
    )
    .optional(),
  // Framework-internal keys, set by code (declared so a client cannot set them unnoticed).
  agentTools: z
    .custom<RunContext["agentTools"]>(isObject, "tools for this run (code only)")
    .optional(),
  taskEpochs: z.custom<readonly number[]>(Array.isArray, "framework-internal").optional(),
  agentPath: z.custom<readonly string[]>(Array.isArray, "framework-internal").optional(),
  usageSink: z
    .custom<RunContext["usageSink"]>((v) => typeof v === "function", "framework-internal")
    .optional(),
});

/** `configurable` keys that belong to LangGraph (never read as run context). */
const LANGGRAPH_KEYS = new Set(["thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map"]);

/**
 * The run context of a config. LangGraph's `config.context` wins; plain `configurable` keys are read
 * too (`{ configurable: { model: "..." } }` as Studio and the LangGraph SDK send it, and the API of
 * earlier codehop versions: `configurable.journal`, `configurable.knowledgeSource` ...).
 */
export function readRunContext(config: RunnableConfig | undefined): Readonly<RunContext> {
  const configurable = (config?.configurable ?? {}) as Record<string, unknown>;
  const context = (config as { context?: unknown } | undefined)?.context;
  const own = context && typeof context === "object" ? (context as RunContext) : undefined;
  const legacy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(configurable)) {
    if (!key.startsWith("__") && !LANGGRAPH_KEYS.has(key) && value !== undefined)
      legacy[key] = value;
  }
  return own ? { ...legacy, ...own } : legacy;
}

/** `config` with `patch` merged into its run context (the rest of the config is kept). */
export function withRunContext<C extends RunnableConfig>(
  config: C,
  patch: Partial<RunContext>,
): C & { context: RunContext } {
  const current = (config as { context?: RunContext }).context ?? {};
  return { ...config, context: { ...current, ...patch } };
}

/** A run context from values (for `graph.invoke(input, { configurable: { thread_id }, ...runContext(...) })`). */
export function runContext(values: RunContext): { context: RunContext } {
  return { context: { ...values } };
}

/** Passes usage to the run's usage sink, if the agent runs as a sub-agent (see {@link RunContext.usageSink}). */
export function reportUsage(
  config: RunnableConfig | undefined,
  usage: UsageByAgent | undefined,
): void {
  const sink = readRunContext(config).usageSink;
  if (usage && typeof sink === "function") sink(usage);
}

/** The authenticated user of a served run, as LangGraph Platform hands it to graphs and tools. */
export interface RunAuthUser {
  identity: string;
  display_name?: string;
  permissions?: string[];
  is_authenticated?: boolean;
  [field: string]: unknown;
}

/**
 * The user a served run acts for (`config.configurable.langgraph_auth_user`, set by `codehop serve`
 * or LangGraph's server from the request's authentication, never by the client), or undefined for
 * a run without one (the CLI, a server without authentication). Tools read it from their call's
 * `config` to act on behalf of their user.
 */
export function authUserOf(config: RunnableConfig | unknown): RunAuthUser | undefined {
  const user = (config as RunnableConfig | undefined)?.configurable?.langgraph_auth_user as
    RunAuthUser | undefined;
  return user && typeof user === "object" && typeof user.identity === "string" ? user : undefined;
}
