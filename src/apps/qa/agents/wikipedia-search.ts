import { z } from "zod";
import { createCodeAgent, type CodeAgent } from "../../../framework/code-agent.ts";
import { memberBase, type MemberBuild } from "../../../framework/team.ts";
import { defineTool, type CodeTool } from "../../../tools/define-tool.ts";
import { sourceFromConfig } from "../../common/knowledge-source.ts";
import { createSearchWikipediaTool } from "../tools/search-wikipedia.ts";
import type { ReferenceAgentOptions } from "./page-search.ts";

/**
 * wikipedia_search: searches Wikipedia (`search_wikipedia(query)` → titles and summaries) and, when
 * a summary is not enough, asks its children (the page_search agent: `search_info(query, page)`).
 * Returns a short answer naming its source page(s).
 */
export function createWikipediaSearchMember(
  build: MemberBuild<ReferenceAgentOptions>,
): CodeAgent<any, any> {
  const { deps, children } = build;
  return createCodeAgent({
    ...memberBase(build),
    description: "answers a factual question from Wikipedia pages, citing the page(s) used",
    tools: [
      createSearchWikipediaTool((ctx) => sourceFromConfig(ctx.config as any, deps)),
      ...children,
    ],
    maxSteps: 6,
    maxStepsPolicy: "final_answer_prompt",
  });
}

/**
 * `wikipedia_search_agent(query)`: the wikipedia_search agent as a tool of its parent. The pages its
 * answer cites ("Source: <title>", "Sources: A, B") are reported as sources of the run when such a
 * page exists (the pages it read in detail are reported by search_info).
 */
export function wikipediaSearchAgentTool(
  agent: CodeAgent,
  deps: ReferenceAgentOptions,
): CodeTool<any> {
  const tool = agent.asTool({
    name: "wikipedia_search_agent",
    description:
      "Asks the Wikipedia search agent one self-contained question (it does not see your task). Returns a short answer with the fact(s) found and the source page(s).",
    parameters: z.object({
      query: z.string().min(1).describe("a complete, self-contained question"),
    }),
    toInput: ({ query }) => ({ task: query }),
  });
  return defineTool({
    ...tool,
    invoke: async (args, ctx) => {
      const answer = await tool.invoke(args, ctx);
      if (typeof answer !== "string") return answer;
      const titles = new Set<string>();
      for (const m of answer.matchAll(/Sources?:\s*([^\n]+)/gi)) {
        titles.add(m[1].trim().replace(/[.]+$/, ""));
        for (const t of m[1].split(/[;,]/)) {
          const title = t
            .trim()
            .replace(/^["'“]|["'”.]+$/g, "")
            .trim();
          if (title) titles.add(title);
        }
      }
      const source = sourceFromConfig(ctx.config as any, deps);
      const found: Array<Record<string, string>> = [];
      for (const title of titles) {
        const lookup = await source.getPage(title).catch(() => undefined);
        if (lookup?.status === "found") {
          found.push({
            title: lookup.page.title,
            ...(lookup.page.url ? { url: lookup.page.url } : {}),
          });
        }
      }
      if (found.length) ctx.report?.({ sources: found });
      return answer;
    },
  });
}
