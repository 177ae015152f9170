import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { createHash } from "node:crypto";
import { formatObservation, repeatNudge, truncateMiddle } from "../core/observation.ts";
import { normalizeCode } from "../core/parser.ts";
import { routeAfterObserve } from "../core/routing.ts";
import { endSandboxSession } from "../core/run-code.ts";
import type { AgentRuntime } from "../core/runtime.ts";
import type { AgentState, AgentStatus, AgentUpdate } from "../core/state.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";

/**
 * A short hash of an action's normalized code and its observation: what the repeated-action
 * detector compares from one step to the next (the observation itself is in the record already).
 */
export function actionFingerprint(normalizedCode: string, observation: string): string {
  return createHash("sha256")
    .update(normalizedCode)
    .update("\u0000")
    .update(observation)
    .digest("base64url")
    .slice(0, 22);
}

/**
 * observe: turns the action's outcome into an observation and records the step in the trajectory
 * (the model sees it from there in the next prompt), counts the step, detects a final answer,
 * repeated actions (the same normalized code with the same observation k times: a nudge; 2k times:
 * replan or stop) and the step limit; when the run ends here, tells the sandbox its session is over
 * (endSandboxSession). Routing is done by `routeAfterObserve` from what this node
 * writes.
 */
export function makeObserveNode(rt: AgentRuntime) {
  return async function observe(
    state: AgentState,
    config: LangGraphRunnableConfig,
  ): Promise<AgentUpdate> {
    const { pending, outcome } = state;
    const step = state.stepCount + 1;
    if (!pending || !outcome || outcome.step !== step || pending.step !== step) {
      throw new CodehopError(
        ErrorCodes.GRAPH_INVARIANT,
        `Agent "${rt.name}": observe reached without an outcome for step ${step}`,
      );
    }
    // The tool names are only needed to answer an unknown name: the tools are built only then.
    const toolNames = () => rt.tools(state.context ?? {}, config, state.steps).map((t) => t.name);
    const { text, isError } = formatObservation(
      outcome,
      toolNames,
      rt.settings.maxObservationChars,
    );
    const { repeatThreshold: k, repeatPolicy, maxSteps } = rt.settings;

    const fingerprint =
      pending.code === null ? "" : actionFingerprint(normalizeCode(pending.code), text);
    const count =
      fingerprint && fingerprint === state.repeat.fingerprint ? state.repeat.count + 1 : 1;
    let observation = text;
    if (fingerprint && count >= k) observation += repeatNudge(count);

    let status: AgentStatus = "running";
    let answer: unknown = null;
    let replan = false;
    if (outcome.ok && outcome.isFinalAnswer) {
      status = "final_answer";
      answer = outcome.finalAnswer ?? null;
    } else if (fingerprint && count >= 2 * k && repeatPolicy === "stop") {
      status = "repeated_action";
    } else if (step >= maxSteps) {
      status = "max_steps";
    } else if (fingerprint && count >= 2 * k) {
      replan = true;
    }
    // Under "last_observation" the result of a stopped run is what the agent saw last: the printed
    // output itself when the action succeeded (so a parent's code can use it), else the observation.
    if (status === "max_steps" || status === "repeated_action") {
      const logs = outcome.logs.trim();
      answer =
        rt.settings.maxStepsPolicy === "last_observation"
          ? outcome.ok && logs
            ? truncateMiddle(logs, rt.settings.maxObservationChars)
            : text
          : null;
    }

    const update: AgentUpdate = {
      stepCount: step,
      steps: {
        step,
        kind: "action",
        modelOutput: pending.modelOutput,
        thought: pending.thought,
        code: pending.code,
        observation,
        // A failed action always carries an error, so the view can tell it from a success.
        error:
          outcome.error ??
          (isError ? { name: "Error", message: "the action failed", line: null } : null),
        toolCalls: outcome.toolCalls,
        isFinalAnswer: outcome.ok && outcome.isFinalAnswer,
        ...(outcome.ok && outcome.isFinalAnswer ? { finalAnswer: outcome.finalAnswer } : {}),
        usage: pending.usage,
        durationMs: outcome.durationMs,
      },
      repeat: { fingerprint, count },
      replan,
      status,
      pending: null,
      outcome: null,
    };
    if (status !== "running") update.answer = answer;
    // The run ends here: the sandbox may let its process go.
    if (routeAfterObserve({ status, stepCount: step, replan }, rt.settings) === "end")
      endSandboxSession(rt, config, state.taskEpoch);
    return update;
  };
}
