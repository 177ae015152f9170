import { createCodeAgent, type CodeAgent } from "../../../framework/code-agent.ts";
import { memberBase, type MemberBuild } from "../../../framework/team.ts";
import { sourceFromConfig } from "../../common/knowledge-source.ts";
import type { ReferenceAgentOptions } from "../../qa/agents/page-search.ts";
import { createSearchWikipediaTool } from "../../qa/tools/search-wikipedia.ts";

/** Researcher actions before its max-steps policy ("final_answer_prompt") applies. */
export const RESEARCHER_MAX_STEPS = 6;

/**
 * researcher: gathers evidence for one sub-question — `search_wikipedia(query)` over the run's
 * knowledge source (online Wikipedia, a local corpus, the web or a mix), then reads the pages that answer it with
 * its children (page readers: `search_info(query, page)`). What the page readers retrieve is the
 * evidence the report may cite.
 */
export function createResearcherMember(
  build: MemberBuild<ReferenceAgentOptions>,
): CodeAgent<any, any> {
  const { deps, children } = build;
  return createCodeAgent({
    ...memberBase(build),
    description: "gathers evidence for one question by searching for pages and reading them",
    tools: [
      // The run's source may be Wikipedia, a corpus, the web or a mix: the tool says so.
      createSearchWikipediaTool((ctx) => sourceFromConfig(ctx.config as any, deps), {
        description:
          "Searches the run's sources (Wikipedia, a local corpus or the web) and returns up to 5 pages, " +
          "each with its exact title and a summary (web results start with their site). Use the exact titles to read a page in detail.",
      }),
      ...children,
    ],
    maxSteps: RESEARCHER_MAX_STEPS,
    maxStepsPolicy: "final_answer_prompt",
  });
}
