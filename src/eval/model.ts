import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { ChatOpenAI } from "@langchain/openai";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { readEnv, type CodehopEnv } from "../config/env.ts";
import { MODEL_DEFAULTS, resolveModelChoice } from "../core/models.ts";
import { parseModelName } from "../core/provider-names.ts";

/** Model settings recorded in the report, so a run says exactly what it measured. */
export interface EvalModelSettings {
  model: string;
  baseURL?: string;
  temperature?: number;
  maxTokens?: number;
  maxRetries: number;
  timeoutMs?: number;
}

/** Settings of the model under test, from the environment snapshot. */
export function evalModelSettings(env: CodehopEnv): EvalModelSettings {
  if (!env.model) {
    throw new CodehopError(
      ErrorCodes.MODEL_NOT_CONFIGURED,
      "No model configured: set CODEHOP_MODEL (and OPENAI_BASE_URL / OPENAI_API_KEY for a local or hosted OpenAI-compatible endpoint)",
    );
  }
  // The app's defaults (src/models), so the agentic system and the baselines behave the same;
  // temperature 0 also makes evaluation figures reproducible.
  return {
    model: env.model,
    baseURL: env.openaiBaseUrl,
    temperature: env.temperature ?? MODEL_DEFAULTS.temperature,
    maxTokens: env.maxTokens ?? MODEL_DEFAULTS.maxTokens,
    maxRetries: env.maxRetries ?? MODEL_DEFAULTS.maxRetries,
    timeoutMs: env.modelTimeoutMs ?? MODEL_DEFAULTS.timeoutMs,
  };
}

/**
 * A ChatOpenAI for the baselines and the judge. Never `streaming: true`: with it, invoke()
 * estimates tokens with tiktoken, which downloads an encoding and hangs offline. A
 * `provider:model` name is that provider's model, as for the agents (src/core/providers.ts).
 */
export function createChatModel(
  settings: EvalModelSettings,
  apiKey: string | undefined,
  env: CodehopEnv = readEnv(),
): BaseChatModel {
  if (parseModelName(settings.model).provider !== "openai") {
    // A provider's model, built synchronously like every agent's (it loads its library later).
    const { model } = resolveModelChoice(
      "eval",
      {
        context: {
          model: settings.model,
          modelSettings: {
            temperature: settings.temperature,
            maxTokens: settings.maxTokens,
            maxRetries: settings.maxRetries,
            timeoutMs: settings.timeoutMs,
          },
        },
      } as never,
      { env },
    );
    if (model) return model;
  }
  return new ChatOpenAI({
    model: settings.model,
    apiKey: apiKey ?? "not-needed",
    temperature: settings.temperature,
    maxTokens: settings.maxTokens,
    maxRetries: settings.maxRetries,
    timeout: settings.timeoutMs,
    configuration: settings.baseURL ? { baseURL: settings.baseURL } : undefined,
  });
}
