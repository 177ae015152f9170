import { z } from "zod";
import { sourceFromConfig } from "../app/source.ts";
import { defineTool, type CodeTool } from "../tools/define-tool.ts";
import { createSearchWikipediaTool } from "../tools/search-wikipedia.ts";
import { formatLookupProblem } from "../store/messages.ts";
import type { KnowledgeSource } from "../store/types.ts";
import { createCodeAgent, type CodeAgent } from "./code-agent.ts";
import {
  createPageSearchAgent,
  pageSearchTask,
  type ReferenceAgentOptions,
} from "./page-search.ts";

/**
 * `search_info(query, page)`: the page_search agent as a tool. The page is looked up first, so an
 * unknown title costs no model call and the model is told which titles exist instead.
 */
export function createSearchInfoTool(pageAgent: CodeAgent, source: KnowledgeSource): CodeTool<any> {
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
    name: agentTool.name,
    description: agentTool.description,
    parameters: agentTool.parameters,
    returns: agentTool.returns,
    isAgent: agentTool.isAgent,
    subgraphs: agentTool.subgraphs,
    invoke: async (args, ctx) => {
      const lookup = await source.getPage(args.page);
      if (lookup.status !== "found") return formatLookupProblem(lookup);
      const page = lookup.page.title;
      ctx.report?.({
        sources: [{ title: page, ...(lookup.page.url ? { url: lookup.page.url } : {}) }],
      });
      return agentTool.invoke({ query: args.query, page }, ctx);
    },
  });
}

/**
 * wikipedia_search: searches Wikipedia (`search_wikipedia(query)` → titles and summaries) and, when
 * a summary is not enough, delegates to the page_search agent (`search_info(query, page)`).
 * Returns a short answer naming its source page(s).
 */
export function createWikipediaSearchAgent(options: ReferenceAgentOptions = {}): CodeAgent {
  const pageAgent = createPageSearchAgent(options);
  return createCodeAgent({
    name: "wikipedia_search",
    description: "answers a factual question from Wikipedia pages, citing the page(s) used",
    prompts: "wikipedia_search",
    tools: ({ config }) => {
      const source = sourceFromConfig(config, options.source);
      return [createSearchWikipediaTool(source), createSearchInfoTool(pageAgent, source)];
    },
    subgraphs: [pageAgent.graph],
    maxSteps: 6,
    maxStepsPolicy: "final_answer_prompt",
    model: options.model,
    sandbox: options.sandbox,
  });
}

/** Uncompiled wikipedia_search graph (input: `{ task }`). */
export function createWikipediaSearchBuilder(options: ReferenceAgentOptions = {}) {
  return createWikipediaSearchAgent(options).builder;
}

/** wikipedia_search for langgraph.json (no checkpointer). */
export const graph = createWikipediaSearchAgent().graph;
