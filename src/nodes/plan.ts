import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { historyToMessages } from "../agent/history.ts";
import { parseAction, stripThinkBlocks } from "../agent/parser.ts";
import { renderSystemPrompt, renderTaskMessage } from "../agent/prompts.ts";
import { newTaskOnFinishedThread } from "../agent/new-task.ts";
import type { AgentRuntime } from "../agent/runtime.ts";
import type { AgentState, AgentUpdate } from "../agent/state.ts";
import { callAgentModel } from "../agent/model-call.ts";

/**
 * plan: builds the prompt (system, task, history under the agent's policy), calls the model with
 * the stop sequences, parses the reply into thought + code and records usage. Writes nothing when
 * the model call fails (CODEHOP_MODEL_ENDPOINT_FAILED), so the thread resumes at this node.
 */
export function makePlanNode(rt: AgentRuntime) {
  return async function plan(
    input: AgentState,
    config: LangGraphRunnableConfig,
  ): Promise<AgentUpdate> {
    // A new task on a finished thread starts from a clean history (variables are kept).
    const fresh = newTaskOnFinishedThread(input);
    const state = fresh?.view ?? input;
    const tools = rt.tools(state.context ?? {}, config);
    const system = renderSystemPrompt(rt.prompts, rt.promptContext(tools));
    const messages = historyToMessages(
      system,
      renderTaskMessage(rt.prompts, state.task, rt.name),
      state.history,
    );
    const { text, usage } = await callAgentModel(rt, config, messages, rt.settings.stopSequences);
    const parsed = parseAction(text);
    const step = state.stepCount + 1;
    // The model sees its own past action closed with <end_action>, as the format asks, so it keeps
    // closing its actions even though the server cut the marker off. Think blocks stay out of the
    // prompt (as reasoning models' chat templates do): they are long and never run.
    const visible = stripThinkBlocks(text).trim();
    const shown =
      parsed.code !== null && !visible.includes("<end_action>")
        ? `${visible}<end_action>`
        : visible;
    const update: AgentUpdate = {
      pending: {
        step,
        modelOutput: text,
        thought: parsed.thought,
        code: parsed.code,
        parseError: parsed.error,
        usage,
      },
      history: { kind: "action", step, content: shown.trim() ? shown : "(empty reply)" },
      usage: { [rt.name]: usage },
    };
    return fresh ? fresh.wrap(update) : update;
  };
}
