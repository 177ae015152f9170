import { isGraphBubbleUp, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { withoutInheritedAbortSignals } from "../../../core/pregel-internals.ts";
import { renderManagedTask } from "../../../core/prompts.ts";
import { isFatalInTool } from "../../../errors.ts";
import type { CodeAgent } from "../../../framework/code-agent.ts";
import { answerText } from "../../../runs/result.ts";
import { passagesIn } from "../base/records.ts";
import type { QuestionStateValue, QuestionUpdate } from "../base/state.ts";

/** Name the sub-question pipeline stamps into its checkpoints (trees, histories). */
export const QUESTION_GRAPH = "research_question";

const oneLine = (text: string, max = 160) => {
  const t = text.replace(/\s+/g, " ").trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
};

/**
 * investigate (sub-question pipeline): runs the researcher agent on the sub-question (it searches,
 * and reads pages through page readers, whose retrieved passages come back as its sources) and
 * keeps what it read. A researcher that fails (an error that is not a framework failure) or reads
 * no passage leaves `failure` set: the condensation then has nothing to condense and the report
 * notes the gap. Framework failures (model endpoint down ...) and aborts stop the run (resumable).
 */
export function makeInvestigateNode(researcher: CodeAgent) {
  return async function investigate(
    state: QuestionStateValue,
    config: LangGraphRunnableConfig,
  ): Promise<QuestionUpdate> {
    const question = state.task;
    const task = renderManagedTask(researcher.prompts, researcher.name, question);
    try {
      const out = await researcher.graph.invoke(
        { task, context: {}, agent: researcher.name },
        { ...withoutInheritedAbortSignals(config), recursionLimit: researcher.recursionLimit },
      );
      const read = passagesIn(out.sources);
      const findings = answerText(out.answer);
      const pages = new Set(read.map((p) => p.title)).size;
      if (read.length) {
        return {
          agent: QUESTION_GRAPH,
          findings,
          read,
          failure: null,
          usage: out.usage ?? {},
          stage: `read ${read.length} passage(s) from ${pages} page(s)`,
        };
      }
      // What the researcher said without reading anything is its own memory, not a finding: it
      // goes nowhere (not into the reason, the report's gaps or the planner's notes).
      const failure =
        out.status === "final_answer"
          ? "the researcher read no passage"
          : `the researcher read no passage and stopped (${out.status})`;
      return {
        agent: QUESTION_GRAPH,
        findings: "",
        read: [],
        failure,
        usage: out.usage ?? {},
        stage: failure,
      };
    } catch (err) {
      // A pause for a human approval inside the researcher, framework errors and aborts go up.
      if (isFatalInTool(err) || isGraphBubbleUp(err) || config.signal?.aborted) throw err;
      const failure = `the researcher failed: ${oneLine(err instanceof Error ? err.message : String(err), 300)}`;
      return { agent: QUESTION_GRAPH, read: [], failure, stage: failure };
    }
  };
}
