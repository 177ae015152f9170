import { HumanMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { historyToMessages } from "../agent/history.ts";
import { renderFinalAnswerPrompts, renderTaskMessage } from "../agent/prompts.ts";
import type { AgentRuntime } from "../agent/runtime.ts";
import type { AgentState, AgentUpdate } from "../agent/state.ts";
import { reportUsage, usageFromMessage } from "../agent/usage.ts";
import { callModel, messageText } from "../models/index.ts";

/**
 * The answer in a final-answer reply: strips a leading "Final answer:" and code fences; a model
 * that keeps writing actions (`final_answer("Paris")` in a code block) gets its literal argument.
 */
export function cleanFinalAnswer(text: string): string {
  const call = /final_answer\(\s*(?:(["'`])([\s\S]*?)\1|(-?\d+(?:\.\d+)?))\s*\)/.exec(text);
  if (call) return (call[2] ?? call[3]).trim();
  return text
    .replace(/^\s*(\*\*)?final answer:?(\*\*)?:?\s*/i, "")
    .replace(/^```[a-z]*\n([\s\S]*?)\n?```\s*$/i, "$1")
    .trim();
}

/**
 * final_answer (the "final_answer_prompt" max-steps policy): asks the model once, without stop
 * sequences or code, for the best answer from the observations it has. Keeps the run's status
 * ("max_steps" or "repeated_action") so callers can tell a forced answer from a natural one.
 */
export function makeFinalAnswerNode(rt: AgentRuntime) {
  return async function finalAnswer(
    state: AgentState,
    config: LangGraphRunnableConfig,
  ): Promise<AgentUpdate> {
    const tools = rt.tools(state.context ?? {}, config);
    const prompts = renderFinalAnswerPrompts(rt.prompts, rt.promptContext(tools), state.task);
    const messages = historyToMessages(
      prompts.system,
      renderTaskMessage(rt.prompts, state.task, rt.name),
      state.history,
    );
    messages.push(new HumanMessage(prompts.request));
    const reply = await callModel(rt.model(config), messages, {
      agentName: rt.name,
      stream: rt.settings.streamModel,
      signal: config.signal,
    });
    const text = messageText(reply);
    const usage = usageFromMessage(reply);
    reportUsage(config, { [rt.name]: usage });
    const answer = cleanFinalAnswer(text);
    return {
      answer,
      steps: {
        step: state.stepCount,
        kind: "final_answer",
        modelOutput: text,
        thought: "",
        code: null,
        observation: "",
        error: null,
        toolCalls: [],
        isFinalAnswer: true,
        finalAnswer: answer,
        usage,
        durationMs: 0,
      },
      usage: { [rt.name]: usage },
    };
  };
}
