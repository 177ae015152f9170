import type { RunnableConfig } from "@langchain/core/runnables";
import { z } from "zod";
import { createCodeAgent, type CodeAgent } from "../../../framework/code-agent.ts";
import { memberBase, type MemberBuild } from "../../../framework/team.ts";
import type { CodeTool } from "../../../tools/define-tool.ts";
import { webSettingsOf } from "../base/context.ts";
import { createInspectFileTool } from "../tools/inspect-file.ts";
import { createWebTools } from "../tools/web.ts";
import type { AssistantAgentOptions } from "./options.ts";

/** Actions of the web agent before its max-steps policy applies. */
export const WEB_SEARCH_MAX_STEPS = 12;
/** The web agent plans before its first action and then every 5 (the GAIA submission's). */
export const WEB_SEARCH_PLANNING_INTERVAL = 5;

/**
 * web_search: finds information on the web with the text browser (or the real one, per the web
 * settings): web_search, visit_page, page_down, page_up, find_in_page, find_next, archive_search,
 * download_file, and inspect_file for the files it downloads. Answers with the facts and their
 * source addresses.
 */
export function createWebSearchMember(
  build: MemberBuild<AssistantAgentOptions>,
): CodeAgent<any, any> {
  const { deps, name } = build;
  return createCodeAgent({
    ...memberBase(build),
    description:
      "finds facts on the web (search, read pages, archives and files) and reports them with their sources",
    tools: ({ config, steps }) => [
      ...createWebTools({
        config: config as RunnableConfig,
        steps,
        settings: webSettingsOf(config),
        agent: name,
        files: deps,
      }),
      createInspectFileTool(deps),
    ],
    maxSteps: WEB_SEARCH_MAX_STEPS,
    planningInterval: WEB_SEARCH_PLANNING_INTERVAL,
    maxStepsPolicy: "final_answer_prompt",
  });
}

/** `web_search_agent(task)`: the web agent as a tool of the assistant. */
export function webSearchAgentTool(agent: CodeAgent): CodeTool<any> {
  return agent.asTool({
    name: "web_search_agent",
    description:
      "Asks the web search agent to find something on the web (it does not see your task: say exactly what to find). Returns the facts found with their source addresses.",
    parameters: z.object({
      task: z.string().min(1).describe("a complete, self-contained request"),
    }),
    toInput: ({ task }) => ({ task }),
  });
}
