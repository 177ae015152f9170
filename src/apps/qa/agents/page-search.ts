import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { z } from "zod";
import { createCodeAgent, type CodeAgent } from "../../../framework/code-agent.ts";
import { memberBase, type MemberBuild } from "../../../framework/team.ts";
import type { CallJournal } from "../../../core/journal.ts";
import type { CodeSandbox } from "../../../sandbox/contract.ts";
import { formatLookupProblem } from "../../../store/messages.ts";
import type { KnowledgeSource } from "../../../store/types.ts";
import { defineTool, type CodeTool } from "../../../tools/define-tool.ts";
import { sourceFromConfig, type KnowledgeSourceDeps } from "../../common/knowledge-source.ts";
import { createRetrievePassagesTool } from "../tools/retrieve-passages.ts";

/** Options shared by the three reference agents (the QA team's dependencies). */
export interface ReferenceAgentOptions extends KnowledgeSourceDeps {
  /** Chat model instance or name (default: resolved per run from the run context / environment). */
  model?: string | BaseChatModel;
  /** Sandbox for code actions (default: the run context's, else the process-wide sandbox). */
  sandbox?: CodeSandbox;
  /** Call journal for runs whose context brings none (graphs served by `langgraphjs dev`). */
  journal?: CallJournal;
}

/** The page agent's task for a query on one page (the reference design's wording). */
export function pageSearchTask(query: string, page: string): string {
  return `Retrieve information about the query: "${query}" from the Wikipedia page "${page}".`;
}

/**
 * page_search: looks inside ONE Wikipedia page with `retrieve_passages(query)`, bound to the page
 * given as `context.page`. At most 3 actions; if it has not called final_answer by then, its last
 * observation (the passages it retrieved) is its answer ("last_observation" policy).
 */
export function createPageSearchMember(
  build: MemberBuild<ReferenceAgentOptions>,
): CodeAgent<any, any> {
  const { deps } = build;
  return createCodeAgent({
    ...memberBase(build),
    description:
      "finds information inside one Wikipedia page by retrieving its most relevant passages",
    tools: ({ context, config }) => [
      createRetrievePassagesTool(sourceFromConfig(config, deps), String(context.page ?? "")),
    ],
    maxSteps: 3,
    maxStepsPolicy: "last_observation",
  });
}

/**
 * `search_info(query, page)`: the page_search agent as a tool. The page is looked up first, so an
 * unknown title costs no model call and the model is told which titles exist instead. `source`:
 * a fixed source, or where to find the run's (default: the run context's).
 */
export function createSearchInfoTool(
  pageAgent: CodeAgent,
  source?: KnowledgeSource | KnowledgeSourceDeps,
): CodeTool<any> {
  const agentTool = pageAgent.asTool({
    name: "search_info",
    description:
      "Asks the page_search agent to find information about `query` inside the Wikipedia page titled `page` (use an exact title printed by search_wikipedia). Returns what it found in that page.",
    parameters: z.object({
      query: z.string().min(1).describe("what to look for in the page"),
      page: z.string().min(1).describe("exact title of the Wikipedia page"),
    }),
    toInput: ({ query, page }) => ({ task: pageSearchTask(query, page), context: { page } }),
    wrapTask: false,
  });
  return defineTool({
    ...agentTool,
    invoke: async (args, ctx) => {
      const lookup = await sourceFromConfig(ctx.config as any, source).getPage(args.page);
      if (lookup.status !== "found") return formatLookupProblem(lookup);
      const page = lookup.page.title;
      ctx.report?.({
        sources: [{ title: page, ...(lookup.page.url ? { url: lookup.page.url } : {}) }],
      });
      return agentTool.invoke({ query: args.query, page }, ctx);
    },
  });
}
