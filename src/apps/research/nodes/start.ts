import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { checkTopic, researchSettingsOf } from "../base/settings.ts";
import type { ResearchStateValue, ResearchUpdate } from "../base/state.ts";

/** Name the researcher graph stamps into its root checkpoints (trees and histories label them by it). */
export const RESEARCH_STAMP = "research";

/**
 * start: checks the topic (not empty, not huge: CODEHOP_INPUT_INVALID) and the run's limits
 * (CODEHOP_CONFIG_INVALID) before any model call, and writes the topic as the task trees show.
 */
export function start(state: ResearchStateValue, config: LangGraphRunnableConfig): ResearchUpdate {
  const topic = checkTopic(state.topic);
  const settings = researchSettingsOf(config, state.maxQuestions);
  return {
    agent: RESEARCH_STAMP,
    task: topic,
    stage: `up to ${settings.maxQuestions} sub-question(s), ${settings.concurrency} at once`,
  };
}
