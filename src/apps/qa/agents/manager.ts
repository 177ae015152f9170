import { createCodeAgent, type CodeAgent } from "../../../framework/code-agent.ts";
import { memberBase, type MemberBuild } from "../../../framework/team.ts";
import type { ReferenceAgentOptions } from "./page-search.ts";

/** Manager actions before its max-steps policy ("final_answer_prompt") applies. */
export const MANAGER_MAX_STEPS = 8;

/**
 * manager: breaks the question into sub-questions for its team members (the wikipedia_search
 * agent: `wikipedia_search_agent(query)`; parallel ones with Promise.all), computes in code, and
 * ends with final_answer. As the QA app's root it takes `{ question }` (the team's input mapping).
 */
export function createManagerMember(
  build: MemberBuild<ReferenceAgentOptions>,
): CodeAgent<any, any> {
  return createCodeAgent({
    ...memberBase(build),
    description:
      "answers multi-hop questions by delegating look-ups to a Wikipedia search agent and computing in code",
    tools: build.children,
    maxSteps: MANAGER_MAX_STEPS,
    maxStepsPolicy: "final_answer_prompt",
  });
}
