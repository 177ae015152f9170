import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import {
  BaseChatModel,
  type BaseChatModelCallOptions,
  type LangSmithParams,
} from "@langchain/core/language_models/chat_models";
import type { BaseMessage } from "@langchain/core/messages";
import type { ChatGenerationChunk, ChatResult } from "@langchain/core/outputs";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { ModelName, ProviderEndpoint } from "./provider-names.ts";

export {
  parseModelName,
  providerEndpoint,
  PROVIDER_NAMES,
  type KnownProvider,
  type ModelName,
  type ProviderEndpoint,
} from "./provider-names.ts";

/**
 * Model providers beyond OpenAI-compatible endpoints: a model name `provider:model`
 * (`anthropic:claude-sonnet-4-5`, `google-genai:gemini-2.5-flash`) picks one of the providers of
 * LangChain's universal chat model init (`initChatModel` in `@langchain/classic/chat_models/universal`),
 * whose provider table (its names: provider-names.ts) and package loader this module uses, so the
 * provider names are LangChain's.
 * A name without a known provider prefix (`Qwen/Qwen2.5-7B-Instruct`, `qwen2.5:7b`) is a model of
 * the OpenAI-compatible endpoint, as it always was: codehop never guesses a provider from a name.
 *
 * The universal init and the provider's package are imported on the first call (nothing is
 * loaded for a run that does not use them), which is why the model is a {@link ProviderChatModel}: a chat model that builds the
 * provider's own class once and hands it every call (its `_generate` / `_streamResponseChunks`, so
 * tracing sees one model run per call, labelled with the provider and model).
 */

/** Settings a provider model is built with. */
export interface ProviderModelSpec extends ModelName {
  endpoint: ProviderEndpoint;
  temperature: number;
  maxTokens: number;
  maxRetries: number;
  timeoutMs: number;
  /** LangChain's retry hook (codehop's retry policy). */
  onFailedAttempt: (error: unknown) => void;
  /** fetch for providers whose client takes one (an HTML page answered fails at once). */
  fetch?: typeof fetch;
}

/**
 * Constructor fields of a provider's class: each names endpoint, key and sampling its own way.
 * `stop` is given only to providers that ignore call-time stop sequences.
 */
function constructorFields(spec: ProviderModelSpec, stop: string[] | undefined) {
  const common = {
    model: spec.model,
    temperature: spec.temperature,
    maxRetries: spec.maxRetries,
    onFailedAttempt: spec.onFailedAttempt,
  };
  const { apiKey, baseURL } = spec.endpoint;
  switch (spec.provider) {
    case "anthropic":
      return {
        ...common,
        apiKey,
        maxTokens: spec.maxTokens,
        ...(baseURL ? { anthropicApiUrl: baseURL } : {}),
        clientOptions: { timeout: spec.timeoutMs, ...(spec.fetch ? { fetch: spec.fetch } : {}) },
      };
    case "google-genai":
      return {
        ...common,
        apiKey,
        maxOutputTokens: spec.maxTokens,
        ...(baseURL ? { baseUrl: baseURL } : {}),
        ...(stop?.length ? { stopSequences: stop } : {}),
      };
    default:
      return { ...common, maxTokens: spec.maxTokens, ...(apiKey ? { apiKey } : {}) };
  }
}

/**
 * Providers whose class ignores the call's `stop` (ChatGoogleGenerativeAI sends only its
 * constructor's `stopSequences`): one instance is built per set of stop sequences.
 */
const STOP_IN_CONSTRUCTOR = new Set(["google-genai"]);

/**
 * A chat model of a LangChain provider, built on its first call: the provider's package is
 * imported then (LangChain's universal-init loader, which names the package to install when it is
 * missing), its class constructed once per stop set and cached. Each call runs the provider's own
 * generation code under this model's callbacks, with the call's stop sequences and a deadline of
 * `timeoutMs` (some providers' clients take none).
 */
export class ProviderChatModel extends BaseChatModel {
  /** The LangChain provider name ("anthropic", "google-genai" ...). */
  readonly provider: string;
  /** The provider's model name. */
  readonly model: string;
  /** The base URL requests go to (undefined: the provider's default). */
  readonly baseURL?: string;
  /** The variable that sets the base URL, for error messages. */
  readonly baseUrlVariable?: string;
  readonly temperature: number;
  readonly maxTokens: number;
  private readonly spec: ProviderModelSpec;
  private readonly instances = new Map<string, Promise<BaseChatModel>>();

  constructor(spec: ProviderModelSpec) {
    super({ maxRetries: spec.maxRetries });
    this.spec = spec;
    this.provider = spec.provider;
    this.model = spec.model;
    this.baseURL = spec.endpoint.baseURL;
    this.baseUrlVariable = spec.endpoint.baseUrlVariable;
    this.temperature = spec.temperature;
    this.maxTokens = spec.maxTokens;
  }

  static override lc_name(): string {
    return "ProviderChatModel";
  }

  _llmType(): string {
    return this.provider;
  }

  override getLsParams(options: this["ParsedCallOptions"]): LangSmithParams {
    return {
      ls_provider: this.provider,
      ls_model_name: this.model,
      ls_model_type: "chat",
      ls_temperature: this.temperature,
      ls_max_tokens: this.maxTokens,
      ls_stop: options.stop,
    };
  }

  /** The provider's model for a stop set (built once; a failed build is tried again next call). */
  private instance(stop: string[] | undefined): Promise<BaseChatModel> {
    const perStop = STOP_IN_CONSTRUCTOR.has(this.provider);
    const key = perStop ? JSON.stringify(stop ?? []) : "";
    let found = this.instances.get(key);
    if (!found) {
      found = this.build(perStop ? stop : undefined);
      found.catch(() => this.instances.delete(key));
      this.instances.set(key, found);
    }
    return found;
  }

  private async build(stop: string[] | undefined): Promise<BaseChatModel> {
    // LangChain's universal init (most of LangChain) is loaded by the first call, not at import.
    const { MODEL_PROVIDER_CONFIG, getChatModelByClassName } =
      await import("@langchain/classic/chat_models/universal");
    const className = MODEL_PROVIDER_CONFIG[this.provider as keyof typeof MODEL_PROVIDER_CONFIG]
      ?.className as string;
    let Model: (new (fields: Record<string, unknown>) => BaseChatModel) | undefined;
    try {
      Model = await getChatModelByClassName(className, this.provider);
    } catch (err) {
      throw new CodehopError(
        ErrorCodes.MODEL_NOT_CONFIGURED,
        `Model provider "${this.provider}" is not available: ${(err as Error).message}`,
        { cause: err },
      );
    }
    if (!Model)
      throw new CodehopError(
        ErrorCodes.MODEL_NOT_CONFIGURED,
        `Model provider "${this.provider}" has no chat model class ${className}.`,
      );
    try {
      return new Model(constructorFields(this.spec, stop));
    } catch (err) {
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `Model ${this.provider}:${this.model} cannot be built: ${(err as Error).message}`,
        { cause: err },
      );
    }
  }

  /** The call's options for the provider: its deadline added; stop left to the constructor where it must be. */
  private forward(options: this["ParsedCallOptions"]): this["ParsedCallOptions"] {
    const deadline = AbortSignal.timeout(this.spec.timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
    const out = { ...options, signal };
    if (STOP_IN_CONSTRUCTOR.has(this.provider)) delete (out as BaseChatModelCallOptions).stop;
    return out;
  }

  async _generate(
    messages: BaseMessage[],
    options: this["ParsedCallOptions"],
    runManager?: CallbackManagerForLLMRun,
  ): Promise<ChatResult> {
    const model = await this.instance(options.stop);
    return model._generate(messages, this.forward(options), runManager);
  }

  override async *_streamResponseChunks(
    messages: BaseMessage[],
    options: this["ParsedCallOptions"],
    runManager?: CallbackManagerForLLMRun,
  ): AsyncGenerator<ChatGenerationChunk> {
    const model = await this.instance(options.stop);
    yield* model._streamResponseChunks(messages, this.forward(options), runManager);
  }
}
