import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { lessonsNote } from "../core/memory.ts";
import { promptMessages, sandboxCapabilities } from "../core/prompt-view.ts";
import type { AgentRuntime } from "../core/runtime.ts";
import type { AgentState, AgentUpdate } from "../core/state.ts";
import { foldVariables, variablesUpdate } from "../core/variables.ts";
import { parseAction, stripThinkBlocks } from "../core/parser.ts";
import { type CodeRun, endSandboxSession, runCodeWithTools } from "../core/run-code.ts";
import { callAgentModel } from "../core/model-call.ts";
import { mergeUsage } from "../core/usage.ts";

/**
 * The answer in a final-answer reply that has no code: drops think blocks and a leading
 * "Thought:" part, takes the text after the last "Final answer:" label (any case, optionally bold)
 * when there is one, and unwraps a fenced block.
 */
export function cleanFinalAnswer(text: string): string {
  let out = stripThinkBlocks((text ?? "").replace(/\r\n/g, "\n")).replace(/<end_action>/g, "");
  const labels = [...out.matchAll(/(?:\*\*)?final[ _]answer(?:\*\*)?\s*:\s*(?:\*\*)?/gi)];
  if (labels.length) {
    const last = labels.at(-1)!;
    out = out.slice(last.index + last[0].length);
  } else {
    out = out.replace(/^\s*(?:\*\*)?thought(?:\*\*)?\s*:\s*/i, "");
  }
  return out
    .trim()
    .replace(/^```[a-z]*\n([\s\S]*?)\n?```$/i, "$1")
    .trim();
}

/** Fallback when the reply's code ran without an answer: a literal `final_answer("...")` argument. */
function literalFinalAnswer(code: string): string | null {
  const call = /final_answer\(\s*(?:(["'])([\s\S]*?)\1|`([^`$]*)`|(-?\d+(?:\.\d+)?))\s*\)/.exec(
    code,
  );
  return call ? (call[2] ?? call[3] ?? call[4]).trim() : null;
}

/**
 * final_answer (the "final_answer_prompt" max-steps policy): asks the model once, without stop
 * sequences, for the best answer from the observations it has. A reply with code is run in the
 * sandbox with the saved variables and the agent's tools; the answer is the value passed to
 * final_answer(), else what the code printed. A reply without code is cleaned (cleanFinalAnswer).
 * Keeps the run's status ("max_steps" or "repeated_action") so callers can tell a forced answer
 * from a natural one.
 */
export function makeFinalAnswerNode(rt: AgentRuntime) {
  return async function finalAnswer(
    state: AgentState,
    config: LangGraphRunnableConfig,
  ): Promise<AgentUpdate> {
    const tools = rt.tools(state.context ?? {}, config, state.steps);
    const messages = promptMessages(
      rt,
      state,
      tools,
      "final_answer",
      lessonsNote(config),
      await sandboxCapabilities(rt, config),
    );
    const { text, usage } = await callAgentModel(rt, config, messages);
    const parsed = parseAction(text);
    // Journal key step of the reply's code: the action slot after the last one (never used by act).
    const step = state.stepCount + 1;
    let answer: unknown;
    let run: CodeRun | null = null;
    if (parsed.code === null) {
      answer = cleanFinalAnswer(text);
    } else {
      // The model kept writing actions: run them like the act node does (saved variables, tools,
      // journal), so `final_answer(`${y} years`)` or `final_answer(answer)` gives the value.
      run = await runCodeWithTools(rt, tools, config, {
        code: parsed.code,
        step,
        variables: foldVariables(state.variables),
        taskEpoch: state.taskEpoch,
      });
      const { result } = run;
      if (result.isFinalAnswer) answer = result.finalAnswer;
      else if (result.logs.trim()) answer = result.logs.trim();
      // Nothing came out (e.g. an unlabeled fence holding plain text, which fails as code).
      else
        answer =
          literalFinalAnswer(parsed.code) ||
          cleanFinalAnswer(parsed.thought) ||
          cleanFinalAnswer(text);
    }
    const update: AgentUpdate = {
      answer,
      steps: {
        step: state.stepCount,
        kind: "final_answer",
        modelOutput: text,
        thought: parsed.thought,
        code: parsed.code,
        observation: run?.result.logs ?? "",
        error: run?.result.error ?? null,
        toolCalls: run?.toolCalls ?? [],
        isFinalAnswer: true,
        finalAnswer: answer,
        usage,
        durationMs: run?.result.durationMs ?? 0,
      },
      usage: run ? mergeUsage({ [rt.name]: usage }, run.usage) : { [rt.name]: usage },
    };
    if (run) {
      // A crashed or killed run reports no snapshot worth keeping; keep the previous one.
      const variables =
        run.result.snapshot && variablesUpdate(state.variables, run.result.snapshot);
      if (variables) update.variables = variables;
      if (run.sources.length) update.sources = run.sources;
    }
    // The run ends with this answer: the sandbox may let its process go.
    endSandboxSession(rt, config, state.taskEpoch);
    return update;
  };
}
