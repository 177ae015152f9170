import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { resolveModel } from "../../../core/models.ts";
import { currentTurn, roundsToSummarize, summarize } from "../conversation/memory.ts";
import { chatSettingsOf } from "../conversation/settings.ts";
import type { ChatStateValue, ChatUpdate } from "../conversation/state.ts";

/** Usage key of the summary calls (the summaries are written with the chat agent's model). */
export const SUMMARY_USAGE_KEY = "chat_summary";

/** Whether rounds have left the verbatim window unsummarized (the router runs `summarize` then). */
export function needsSummary(state: ChatStateValue, config: LangGraphRunnableConfig): boolean {
  const { earlier } = currentTurn(state.messages);
  const { keepRounds, summaryBatch } = chatSettingsOf(config);
  return roundsToSummarize(earlier, state.summary, keepRounds, summaryBatch).length > 0;
}

/**
 * summarize: folds the rounds that left the verbatim window (the last `keepRounds` rounds) into
 * the conversation's rolling summary, with one call to the chat agent's model (round-based
 * retention, src/apps/chat/memory.ts). The messages themselves stay in the state untouched.
 */
export function makeSummarizeNode(agentName: string) {
  return async function summarizeRounds(
    state: ChatStateValue,
    config: LangGraphRunnableConfig,
  ): Promise<ChatUpdate> {
    const settings = chatSettingsOf(config);
    const { earlier } = currentTurn(state.messages);
    const rounds = roundsToSummarize(
      earlier,
      state.summary,
      settings.keepRounds,
      settings.summaryBatch,
    );
    if (!rounds.length) return {};
    const { summary, usage } = await summarize(
      await resolveModel(agentName, config),
      state.summary,
      rounds,
      {
        words: settings.summaryWords,
        agentName,
        ...(config.signal ? { signal: config.signal } : {}),
      },
    );
    return { summary, usage: { [SUMMARY_USAGE_KEY]: usage } };
  };
}
