import { type CodehopEnv, readEnv } from "../config/env.ts";

/** Defaults for model calls. */
export const MODEL_DEFAULTS = {
  temperature: 0,
  maxTokens: 1024,
  maxRetries: 3,
  timeoutMs: 120_000,
} as const;

/**
 * The operator's model limits: what this process's environment sets (CODEHOP_MAX_TOKENS,
 * CODEHOP_MAX_RETRIES, CODEHOP_MODEL_TIMEOUT_MS), else the defaults. A client of a served graph may
 * ask for less, never for more (see src/core/client-settings.ts).
 */
export function operatorModelLimits(env: CodehopEnv = readEnv()): {
  maxTokens: number;
  maxRetries: number;
  timeoutMs: number;
} {
  return {
    maxTokens: env.maxTokens ?? MODEL_DEFAULTS.maxTokens,
    maxRetries: env.maxRetries ?? MODEL_DEFAULTS.maxRetries,
    timeoutMs: env.modelTimeoutMs ?? MODEL_DEFAULTS.timeoutMs,
  };
}
