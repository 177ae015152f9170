import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { callAgentModel } from "../core/model-call.ts";
import { parseAction } from "../core/parser.ts";
import { lessonsNote } from "../core/memory.ts";
import { promptMessages, sandboxCapabilities } from "../core/prompt-view.ts";
import { prepareSandbox } from "../core/run-code.ts";
import type { AgentRuntime } from "../core/runtime.ts";
import type { AgentState, AgentUpdate } from "../core/state.ts";

/**
 * The `plan` node, the action writer (its id is the one earlier versions checkpointed):
 * builds the prompt from the record (promptMessages: system, task, the trajectory under the
 * agent's history policy), calls the model with the stop sequences and parses the reply into
 * thought + code for the act node, and tells the sandbox the action is coming (prepareSandbox: its
 * process starts while the model thinks). Writes nothing when the model call fails
 * (CODEHOP_MODEL_ENDPOINT_FAILED), so the thread resumes at this node.
 */
export function makePlanNode(rt: AgentRuntime) {
  return async function writeAction(
    state: AgentState,
    config: LangGraphRunnableConfig,
  ): Promise<AgentUpdate> {
    const tools = rt.tools(state.context ?? {}, config, state.steps);
    const messages = promptMessages(
      rt,
      state,
      tools,
      "action",
      lessonsNote(config),
      await sandboxCapabilities(rt, config),
    );
    // The action this reply will hold needs a sandbox process: let the sandbox start it now, while
    // the model thinks (the run's first action would otherwise wait for a process to start).
    prepareSandbox(rt, config, state.taskEpoch);
    const { text, usage } = await callAgentModel(rt, config, messages, rt.settings.stopSequences);
    const parsed = parseAction(text);
    const update: AgentUpdate = {
      pending: {
        step: state.stepCount + 1,
        modelOutput: text,
        thought: parsed.thought,
        code: parsed.code,
        parseError: parsed.error,
        usage,
      },
      usage: { [rt.name]: usage },
    };
    if (state.agent !== rt.name) update.agent = rt.name;
    return update;
  };
}
