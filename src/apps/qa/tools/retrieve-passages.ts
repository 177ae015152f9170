import { z } from "zod";
import { type CodeTool, defineTool } from "../../../tools/define-tool.ts";
import { formatLookupProblem, formatPassages } from "../../../store/messages.ts";
import type { KnowledgeSource } from "../../../store/types.ts";

const parameters = z.object({
  query: z.string().describe('what to look for on the page, e.g. "year construction completed"'),
});

/**
 * `retrieve_passages(query)` for the page-search agent, bound to one page: up to 5 passages of
 * that page ranked for the query, as 'Retrieved passages for query "<q>":\nPassage 0: ...'.
 * An unknown page answers with close titles; a disambiguation page with its options. Reports the
 * page as a source (`ctx.report({ sources: [{ title, url?, source, sections }] })`) when it answered.
 */
export function createRetrievePassagesTool(
  source: KnowledgeSource,
  pageTitle: string,
  options: { k?: number } = {},
): CodeTool<typeof parameters.shape> {
  return defineTool({
    name: "retrieve_passages",
    description: `Returns up to ${options.k ?? 5} passages of the page "${pageTitle}" that best match the query, best first.`,
    parameters,
    returns: "string",
    async invoke({ query }, ctx) {
      const q = query.trim();
      if (!q) {
        return 'The query is empty. Describe what you are looking for, e.g. retrieve_passages("year construction completed").';
      }
      const { lookup, passages } = await source.retrievePassages(pageTitle, q, {
        k: options.k ?? 5,
      });
      const problem = formatLookupProblem(lookup);
      if (problem) return problem;
      if (passages.length === 0) return `The page "${pageTitle}" has no text to search.`;
      if (lookup.status === "found") {
        // The page the answer came from, for the agent's `sources` (citations in the final answer).
        const sections = [...new Set(passages.map((p) => p.section).filter(Boolean))];
        ctx.report?.({
          sources: [
            {
              title: lookup.page.title,
              ...(lookup.page.url ? { url: lookup.page.url } : {}),
              source: source.kind,
              sections,
            },
          ],
        });
      }
      return formatPassages(q, passages);
    },
  });
}
