import { type BaseMessage, HumanMessage } from "@langchain/core/messages";
import type { CodeTool } from "../tools/define-tool.ts";
import { applyHistoryPolicy, historyEntries, historyToMessages } from "./history.ts";
import {
  renderFinalAnswerPrompts,
  renderPlanningPrompt,
  renderSystemPrompt,
  renderTaskMessage,
} from "./prompts.ts";
import type { AgentRuntime } from "./runtime.ts";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { AgentState } from "./state.ts";

/** Which model call a prompt is for. */
export type PromptPurpose = "action" | "planning" | "final_answer";

/**
 * The messages of one model call, computed from the record: system prompt, task, then the
 * trajectory (`state.steps`) as the agent's history policy shows it. The one function the three
 * model nodes use:
 * - "action" (the plan node): the policy's view;
 * - "planning": the observations of that view only — a fresh plan is written from what was found,
 *   without the previous plan or actions (anchoring on a stale plan hurts, the GAIA finding);
 * - "final_answer": the policy's view, then the request for a final answer.
 */
export function promptMessages(
  rt: AgentRuntime,
  state: Pick<AgentState, "task" | "steps">,
  tools: readonly CodeTool<any>[],
  purpose: PromptPurpose,
  /** Added after the task (the run's lessons for its root agent, src/core/memory.ts). */
  taskNote = "",
  /** What the run's sandbox adds to guest code (its authorized libraries): more capability lines. */
  sandboxCapabilities: readonly string[] = [],
): BaseMessage[] {
  const base = rt.promptContext(tools);
  const ctx = sandboxCapabilities.length
    ? { ...base, capabilities: [...base.capabilities, ...sandboxCapabilities] }
    : base;
  const rendered = renderTaskMessage(rt.prompts, state.task, rt.name);
  const task = taskNote ? `${rendered}\n\n${taskNote}` : rendered;
  const view = applyHistoryPolicy(rt.settings.historyPolicy, historyEntries(state.steps ?? []));
  if (purpose === "planning") {
    return historyToMessages(
      renderPlanningPrompt(rt.prompts, ctx),
      task,
      view.filter((e) => e.kind === "observation"),
    );
  }
  if (purpose === "final_answer") {
    const { system, request } = renderFinalAnswerPrompts(rt.prompts, ctx, state.task);
    return [...historyToMessages(system, task, view), new HumanMessage(request)];
  }
  return historyToMessages(renderSystemPrompt(rt.prompts, ctx), task, view);
}

/**
 * The capability lines the run's sandbox adds (its authorized libraries); none when the sandbox
 * adds nothing. The same sandbox the act node will use (the agent's, the run context's, the default).
 */
export async function sandboxCapabilities(
  rt: AgentRuntime,
  config: RunnableConfig,
): Promise<readonly string[]> {
  return (await rt.sandbox(config)).guestCapabilities ?? [];
}
