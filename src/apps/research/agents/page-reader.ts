import { createCodeAgent, type CodeAgent } from "../../../framework/code-agent.ts";
import { memberBase, type MemberBuild } from "../../../framework/team.ts";
import { sourceFromConfig } from "../../common/knowledge-source.ts";
import type { ReferenceAgentOptions } from "../../qa/agents/page-search.ts";
import { researchSettingsOf } from "../base/settings.ts";
import { createCitedPassagesTool } from "../tools/cited-passages.ts";

/**
 * page_reader: like the QA app's page_search, looks inside ONE page (`context.page`) with
 * `retrieve_passages(query)` — but every passage it is shown is reported as read, with its id, so
 * the notes made from it can cite it. At most 3 actions, then its last observation is its answer.
 */
export function createPageReaderMember(
  build: MemberBuild<ReferenceAgentOptions>,
): CodeAgent<any, any> {
  const { deps } = build;
  return createCodeAgent({
    ...memberBase(build),
    description: "finds the passages of one page that answer a query, quoting what they say",
    tools: ({ context, config }) => [
      createCitedPassagesTool(sourceFromConfig(config, deps), String(context.page ?? ""), {
        k: researchSettingsOf(config).passagesPerRead,
      }),
    ],
    maxSteps: 3,
    maxStepsPolicy: "last_observation",
  });
}
