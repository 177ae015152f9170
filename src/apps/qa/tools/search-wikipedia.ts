import { z } from "zod";
import { type CodeTool, type ToolCallContext, defineTool } from "../../../tools/define-tool.ts";
import { formatSearchResults } from "../../../store/messages.ts";
import type { KnowledgeSource } from "../../../store/types.ts";

const parameters = z.object({
  query: z.string().describe('a few keywords, e.g. "Eiffel Tower construction"'),
});

/**
 * `search_wikipedia(query)`: the top 5 pages of the knowledge source (online Wikipedia or the local
 * corpus) as "Pages found for query '<q>':\nPage: <title>\nSummary: <~1,000 chars>" entries.
 * An empty query gets a usage hint instead of results. `source` is a fixed source or, for tools
 * shared by every run, a function finding the run's source from the call's context.
 */
export function createSearchWikipediaTool(
  source: KnowledgeSource | ((ctx: ToolCallContext) => KnowledgeSource),
  options: { limit?: number; description?: string } = {},
): CodeTool<typeof parameters.shape> {
  return defineTool({
    name: "search_wikipedia",
    description:
      options.description ??
      "Searches Wikipedia and returns up to 5 pages, each with its exact title and a summary. " +
        "Use the exact titles to read a page in detail.",
    parameters,
    returns: "string",
    async invoke({ query }, ctx) {
      const q = query.trim();
      if (!q) {
        return 'The query is empty. Pass a few keywords, e.g. search_wikipedia("Eiffel Tower construction").';
      }
      // A fixed source, or the run's (read per call: the tool list stays the same for every run).
      const from = typeof source === "function" ? source(ctx) : source;
      return formatSearchResults(q, await from.search(q, { limit: options.limit ?? 5 }));
    },
  });
}
