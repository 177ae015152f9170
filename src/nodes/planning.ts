import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { callAgentModel } from "../core/model-call.ts";
import { lessonsNote } from "../core/memory.ts";
import { promptMessages, sandboxCapabilities } from "../core/prompt-view.ts";
import type { AgentRuntime } from "../core/runtime.ts";
import type { AgentState, AgentUpdate } from "../core/state.ts";

/** Stop sequence closing a plan. */
export const END_PLAN = "<end_plan>";

/**
 * planning: a facts survey (given / to look up / to derive) and a step-by-step plan, written from
 * the task and the observations so far WITHOUT showing the previous plan (a fresh plan avoids
 * anchoring on a stale one — the GAIA finding, see docs/code-agent.md). The plan is recorded as a
 * planning step; the next action's prompt shows it (the condensed view keeps only the latest).
 */
export function makePlanningNode(rt: AgentRuntime) {
  return async function planning(
    state: AgentState,
    config: LangGraphRunnableConfig,
  ): Promise<AgentUpdate> {
    const tools = rt.tools(state.context ?? {}, config, state.steps);
    const messages = promptMessages(
      rt,
      state,
      tools,
      "planning",
      lessonsNote(config),
      await sandboxCapabilities(rt, config),
    );
    const reply = await callAgentModel(rt, config, messages, [END_PLAN]);
    const text = reply.text.replace(END_PLAN, "").trim();
    const { usage } = reply;
    const update: AgentUpdate = {
      replan: false,
      steps: {
        step: state.stepCount + 1,
        kind: "planning",
        modelOutput: text,
        thought: text,
        code: null,
        observation: "",
        error: null,
        toolCalls: [],
        isFinalAnswer: false,
        usage,
        durationMs: 0,
      },
      usage: { [rt.name]: usage },
    };
    if (state.agent !== rt.name) update.agent = rt.name;
    return update;
  };
}
