import { createCodeAgent, type CodeAgent } from "../../../framework/code-agent.ts";
import { memberBase, type MemberBuild } from "../../../framework/team.ts";
import type { ReferenceAgentOptions } from "../../qa/agents/page-search.ts";
import { resolveResearchSettings } from "../base/settings.ts";
import { RESEARCH_TOOL, withResearchBudget } from "../tools/research.ts";

/** Planner actions before its max-steps policy ("final_answer_prompt") applies. */
export const PLANNER_MAX_STEPS = 4;

/**
 * planner: decomposes the topic into sub-questions and researches them in parallel
 * (`Promise.all` over `research(question)`, its child), possibly with a follow-up round, then
 * ends with a title for the report. Its input context carries the run's limits (`maxQuestions`,
 * `concurrency`), which bound its `research` tool per action (see `withResearchBudget`).
 */
export function createPlannerMember(
  build: MemberBuild<ReferenceAgentOptions>,
): CodeAgent<any, any> {
  const { children } = build;
  return createCodeAgent({
    ...memberBase(build),
    description:
      "plans the research of a topic: sub-questions researched in parallel by researcher agents",
    tools: ({ context, steps }) => {
      const limits = resolveResearchSettings({
        ...(typeof context.maxQuestions === "number" ? { maxQuestions: context.maxQuestions } : {}),
        ...(typeof context.concurrency === "number" ? { concurrency: context.concurrency } : {}),
      });
      return children.map((tool) =>
        tool.name === RESEARCH_TOOL
          ? withResearchBudget(tool, {
              steps,
              maxQuestions: limits.maxQuestions,
              concurrency: limits.concurrency,
            })
          : tool,
      );
    },
    subgraphs: children.flatMap((t) => t.subgraphs ?? []),
    maxSteps: PLANNER_MAX_STEPS,
    maxStepsPolicy: "final_answer_prompt",
  });
}
