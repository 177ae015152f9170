import type { BaseMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { callModel, messageText } from "./models.ts";
import { reportUsage } from "./run-context.ts";
import type { AgentRuntime } from "./runtime.ts";
import { type UsageTotals, usageFromMessage } from "./usage.ts";

/**
 * One model call of an agent node (plan, planning, final_answer): the agent's model with its
 * streaming setting and the run's abort signal; the usage is reported to the calling agent (so it
 * rolls up through agent tools) and returned for the node's own state update.
 */
export async function callAgentModel(
  rt: AgentRuntime,
  config: LangGraphRunnableConfig,
  messages: BaseMessage[],
  stop?: string[],
): Promise<{ text: string; usage: UsageTotals }> {
  const reply = await callModel(await rt.model(config), messages, {
    agentName: rt.name,
    ...(stop ? { stop } : {}),
    stream: rt.settings.streamModel,
    signal: config.signal,
  });
  const usage = usageFromMessage(reply);
  reportUsage(config, { [rt.name]: usage });
  return { text: messageText(reply), usage };
}
