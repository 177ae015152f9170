import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { runCodeWithTools } from "../core/run-code.ts";
import type { AgentRuntime } from "../core/runtime.ts";
import type { AgentState, AgentUpdate } from "../core/state.ts";
import { foldVariables, variablesUpdate } from "../core/variables.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";

/**
 * act: runs the pending code in the sandbox with the agent's tools (runCodeWithTools,
 * src/core/run-code.ts). Each tool call is validated against the tool's schema, served from the
 * call journal when it was already made (same thread, namespace, step, call index, tool and
 * arguments — so a resumed run never repeats a finished sub-agent call) and recorded otherwise.
 * Tools report usage and sources through `ctx.report`; they are merged into this node's update.
 * Framework errors raised inside tools fail the node. A reply without code skips the sandbox.
 */
export function makeActNode(rt: AgentRuntime) {
  return async function act(
    state: AgentState,
    config: LangGraphRunnableConfig,
  ): Promise<AgentUpdate> {
    const pending = state.pending;
    const step = state.stepCount + 1;
    if (!pending || pending.step !== step) {
      throw new CodehopError(
        ErrorCodes.GRAPH_INVARIANT,
        `Agent "${rt.name}": act reached without a pending action for step ${step} (pending step: ${pending?.step ?? "none"})`,
      );
    }
    if (pending.code === null) {
      return {
        outcome: {
          step,
          ok: false,
          logs: "",
          isFinalAnswer: false,
          finalAnswer: null,
          error: {
            name: "FormatError",
            message: pending.parseError ?? "No code found.",
            line: null,
          },
          toolCalls: [],
          durationMs: 0,
        },
      };
    }

    const tools = rt.tools(state.context ?? {}, config, state.steps);
    const { result, toolCalls, usage, sources } = await runCodeWithTools(rt, tools, config, {
      code: pending.code,
      step,
      variables: foldVariables(state.variables),
      taskEpoch: state.taskEpoch,
    });
    const update: AgentUpdate = {
      outcome: {
        step,
        ok: result.ok,
        logs: result.logs,
        isFinalAnswer: result.isFinalAnswer,
        finalAnswer: result.finalAnswer,
        error: result.error,
        toolCalls,
        durationMs: result.durationMs,
        ...(result.notCarriedOver && Object.keys(result.notCarriedOver).length > 0
          ? { notCarriedOver: result.notCarriedOver }
          : {}),
      },
    };
    // A crashed or killed action reports no snapshot worth keeping; keep the previous one. Only
    // what the action changed is written (the log keeps earlier steps' values).
    const variables = result.snapshot && variablesUpdate(state.variables, result.snapshot);
    if (variables) update.variables = variables;
    if (Object.keys(usage).length) update.usage = usage;
    if (sources.length) update.sources = sources;
    return update;
  };
}
