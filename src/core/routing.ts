import type { AgentSettings } from "./settings.ts";
import type { AgentState } from "./state.ts";

/** Where a task's first step goes: a planning step first when a planning interval is set. */
export function routeStart(
  _state: Pick<AgentState, "stepCount">,
  settings: Pick<AgentSettings, "planningInterval">,
): "planning" | "plan" {
  return settings.planningInterval ? "planning" : "plan";
}

/**
 * Where a run enters the agent: `new_task` when the state it starts from belongs to a finished
 * task (a new task on the thread: the record is reset first), else the first step of the task.
 * A resumed run does not pass here: it continues at the node it stopped in.
 */
export function routeEntry(
  state: Pick<AgentState, "status" | "stepCount">,
  settings: Pick<AgentSettings, "planningInterval">,
): "new_task" | "planning" | "plan" {
  return state.status !== "running" ? "new_task" : routeStart(state, settings);
}

/** Nodes observe can route to. */
export type ObserveRoute = "plan" | "planning" | "final_answer" | "end";

/**
 * After an observation: finish on a final answer; when the run stopped (max steps, repeated
 * action) ask for a final answer or end per `maxStepsPolicy`; otherwise plan again, with a planning
 * step first when one is forced (repeated action) or due (every `planningInterval` actions).
 */
export function routeAfterObserve(
  state: Pick<AgentState, "status" | "stepCount" | "replan">,
  settings: Pick<AgentSettings, "planningInterval" | "maxStepsPolicy">,
): ObserveRoute {
  if (state.status === "final_answer") return "end";
  if (state.status !== "running")
    return settings.maxStepsPolicy === "final_answer_prompt" ? "final_answer" : "end";
  if (state.replan) return "planning";
  if (settings.planningInterval && state.stepCount % settings.planningInterval === 0)
    return "planning";
  return "plan";
}
