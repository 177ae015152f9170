import type { AIMessage } from "@langchain/core/messages";

/** Token usage and model calls of one agent. */
export interface UsageTotals {
  /** Model calls (actions, planning and final-answer prompts). */
  calls: number;
  inputTokens: number;
  outputTokens: number;
  /** Prompt tokens the server reported as served from its prefix cache. */
  cachedInputTokens: number;
}

/** Usage keyed by agent name; an agent's state holds its own entry plus its sub-agents' (rolled up). */
export type UsageByAgent = Record<string, UsageTotals>;

/** An all-zero usage record. */
export function emptyUsage(): UsageTotals {
  return { calls: 0, inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 };
}

/** Sum of two usage records. */
export function addUsage(a: UsageTotals, b: Partial<UsageTotals>): UsageTotals {
  return {
    calls: a.calls + (b.calls ?? 0),
    inputTokens: a.inputTokens + (b.inputTokens ?? 0),
    outputTokens: a.outputTokens + (b.outputTokens ?? 0),
    cachedInputTokens: a.cachedInputTokens + (b.cachedInputTokens ?? 0),
  };
}

/** Reducer of the `usage` channel: sums per agent name (sub-agents' usage rolls up into the parent). */
export function mergeUsage(left: UsageByAgent, right: UsageByAgent | undefined): UsageByAgent {
  if (!right) return left;
  const out: UsageByAgent = { ...left };
  for (const [agent, u] of Object.entries(right))
    out[agent] = addUsage(out[agent] ?? emptyUsage(), u);
  return out;
}

/** Usage of one model call, read from the AIMessage's `usage_metadata` (zeros if the server sent none). */
export function usageFromMessage(message: Pick<AIMessage, "usage_metadata">): UsageTotals {
  const m = message.usage_metadata;
  return {
    calls: 1,
    inputTokens: m?.input_tokens ?? 0,
    outputTokens: m?.output_tokens ?? 0,
    cachedInputTokens: m?.input_token_details?.cache_read ?? 0,
  };
}
