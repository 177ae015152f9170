import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { historyToMessages } from "../agent/history.ts";
import { renderPlanningPrompt, renderTaskMessage } from "../agent/prompts.ts";
import { newTaskOnFinishedThread } from "../agent/new-task.ts";
import type { AgentRuntime } from "../agent/runtime.ts";
import type { AgentState, AgentUpdate } from "../agent/state.ts";
import { callAgentModel } from "../agent/model-call.ts";

/** Stop sequence closing a plan. */
export const END_PLAN = "<end_plan>";

/**
 * planning: a facts survey (given / to look up / to derive) and a step-by-step plan, written from
 * the task and the observations so far WITHOUT showing the previous plan (a fresh plan avoids
 * anchoring on a stale one — the GAIA finding from the seed). The plan enters the history, so the
 * next action sees it; the condensed policy keeps only the latest plan.
 */
export function makePlanningNode(rt: AgentRuntime) {
  return async function planning(
    input: AgentState,
    config: LangGraphRunnableConfig,
  ): Promise<AgentUpdate> {
    // A new task on a finished thread starts from a clean history (variables are kept).
    const fresh = newTaskOnFinishedThread(input);
    const state = fresh?.view ?? input;
    const tools = rt.tools(state.context ?? {}, config);
    const system = renderPlanningPrompt(rt.prompts, rt.promptContext(tools));
    const observations = state.history.filter((e) => e.kind === "observation");
    const messages = historyToMessages(
      system,
      renderTaskMessage(rt.prompts, state.task, rt.name),
      observations,
    );
    const reply = await callAgentModel(rt, config, messages, [END_PLAN]);
    const text = reply.text.replace(END_PLAN, "").trim();
    const { usage } = reply;
    const step = state.stepCount + 1;
    const update: AgentUpdate = {
      currentPlan: text,
      replan: false,
      history: { kind: "plan", step, content: text || "(empty plan)" },
      steps: {
        step,
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
    return fresh ? fresh.wrap(update) : update;
  };
}
