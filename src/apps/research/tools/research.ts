import { isGraphBubbleUp } from "@langchain/langgraph";
import { z } from "zod";
import { agentAsTool } from "../../../core/agent-as-tool.ts";
import type { StepRecord } from "../../../core/state.ts";
import { isRequestRefused } from "../../../core/models.ts";
import { isFatalInTool } from "../../../errors.ts";
import type { CodeAgent } from "../../../framework/code-agent.ts";
import { type CodeTool, defineTool } from "../../../tools/define-tool.ts";
import { createLimiter } from "../../../util/concurrency.ts";
import {
  QUESTION_GRAPH,
  QUESTION_RECURSION_LIMIT,
  createQuestionGraph,
} from "../graphs/question-graph.ts";
import { questionRecord } from "../base/records.ts";

/** Name of the planner's tool. */
export const RESEARCH_TOOL = "research";

const parameters = z.object({
  question: z
    .string()
    .min(3)
    .describe("a specific sub-question that makes sense on its own (names its subject)"),
});

/**
 * `research(question)`: the researcher agent as the planner's tool, behind its sub-question
 * pipeline (investigate → condense). Returns the notes as text. A pipeline that fails for a reason
 * that is not a framework failure — or because the model endpoint refused one of its requests as it
 * is (`isRequestRefused`: HTTP 400/413/422, e.g. a context too long) — returns why instead of
 * throwing (one failed sub-question must not reject the planner's whole `Promise.all`) and reports
 * the gap as the sub-question's record.
 */
export function createResearchTool(researcher: CodeAgent): CodeTool<typeof parameters.shape> {
  const pipeline = createQuestionGraph(researcher);
  const inner = agentAsTool(
    {
      name: QUESTION_GRAPH,
      prompts: researcher.prompts,
      recursionLimit: QUESTION_RECURSION_LIMIT,
      graph: pipeline as any,
    },
    {
      name: RESEARCH_TOOL,
      description:
        "Researches one sub-question: a researcher agent searches and reads pages, and what it read is condensed into short notes. Returns the notes and the pages they come from, or why nothing was found.",
      parameters,
      toInput: ({ question }) => ({ task: question.trim() }),
      wrapTask: false,
    },
  );
  return defineTool({
    ...inner,
    invoke: async (args, ctx) => {
      try {
        return await inner.invoke(args, ctx);
      } catch (err) {
        const run = (ctx.config as { signal?: AbortSignal } | undefined)?.signal;
        // A pause for a human approval, framework errors and aborts go up as they are; so does a
        // model endpoint that is down (the run stops, resumable). A request the endpoint refuses as
        // it is (too long for the model ...) would be refused again on resume: that is a gap.
        if (
          (isFatalInTool(err) && !isRequestRefused(err)) ||
          isGraphBubbleUp(err) ||
          ctx.signal.aborted ||
          run?.aborted
        )
          throw err;
        const question = args.question.trim();
        const reason = err instanceof Error ? err.message : String(err);
        ctx.report?.({
          sources: [questionRecord({ question, status: "failed", notes: 0, reason })],
        });
        return `Research failed for "${question}": ${reason}. This sub-question is left out of the report (the report notes the gap).`;
      }
    },
  });
}

/**
 * The planner's `research` tool for one action, bounded: at most `maxQuestions` research() calls
 * over the planner's whole run, and at most `concurrency` pipelines at once; the other calls of a
 * `Promise.all` wait their turn. A call past the limit is not researched and says so.
 *
 * Only research() calls with valid arguments count, wherever they are: those of earlier actions
 * are read from the planner's trajectory (checkpointed, so exact after a resume), those of this
 * action by their position among its research() calls (`ctx.toolCallIndex`, which counts calls
 * served from the call journal too, so a resumed action counts the same). Other calls of the action
 * (an MCP tool, a research() call refused for its arguments) use no sub-question.
 */
export function withResearchBudget(
  tool: CodeTool<any>,
  budget: { steps: readonly StepRecord[]; maxQuestions: number; concurrency: number },
): CodeTool<any> {
  const earlier = budget.steps
    .flatMap((s) => s.toolCalls ?? [])
    .filter((c) => c.tool === tool.name && tool.parameters.safeParse(c.args).success).length;
  const limiter = createLimiter(budget.concurrency);
  // Outside an agent (no `toolCallIndex`): the calls that reach this tool, in order.
  let reached = 0;
  return defineTool({
    ...tool,
    invoke: async (args, ctx) => {
      const position = ctx.toolCallIndex ?? reached;
      reached++;
      if (earlier + position >= budget.maxQuestions) {
        return `Not researched: "${String(args.question ?? "").trim()}". The limit of ${budget.maxQuestions} sub-questions for this report is reached: finish with final_answer("<title>"), the report is written from the notes you have.`;
      }
      return limiter.run(() => tool.invoke(args, ctx), ctx.signal);
    },
  });
}
