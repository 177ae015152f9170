import { Overwrite } from "@langchain/langgraph";
import type { AgentRuntime } from "../core/runtime.ts";
import type { AgentState, AgentUpdate } from "../core/state.ts";

/**
 * new_task: the entry route of a new task on a thread whose previous task finished (routeEntry
 * sends a run here when the status it starts from is not "running"). The run starts from a clean
 * record — trajectory, counters, usage and sources replaced (LangGraph `Overwrite`) — while the
 * sandbox variables are kept, so a follow-up task can use what the previous one computed. The
 * task epoch is one more, so the call journal keeps this task's calls apart from the previous
 * one's (its step numbers restart at 1).
 */
export function makeNewTaskNode(rt: AgentRuntime) {
  return function newTask(state: AgentState): AgentUpdate {
    return {
      agent: rt.name,
      steps: new Overwrite([]),
      usage: new Overwrite({}),
      sources: new Overwrite([]),
      pending: null,
      outcome: null,
      stepCount: 0,
      answer: null,
      status: "running",
      repeat: { fingerprint: "", count: 0 },
      replan: false,
      taskEpoch: (state.taskEpoch ?? 0) + 1,
    };
  };
}
