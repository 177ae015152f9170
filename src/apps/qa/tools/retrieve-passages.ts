import { z } from "zod";
import { type CodeTool, type ToolCallContext, defineTool } from "../../../tools/define-tool.ts";
import { formatLookupProblem, formatPassages } from "../../../store/messages.ts";
import type { KnowledgeSource, Page, Passage } from "../../../store/types.ts";

const parameters = z.object({
  query: z.string().describe('what to look for on the page, e.g. "year construction completed"'),
});

/** Passages a `retrieve_passages` call shows by default (what `ask --verify` reads again). */
export const RETRIEVE_PASSAGES_K = 5;

/** What a `retrieve_passages` call showed: the page it read and the passages, best first. */
export interface PassagesShown {
  page: Page;
  passages: Passage[];
}

/** The default report of `retrieve_passages`: the page as a source, with the sections shown. */
function reportPage({ page, passages }: PassagesShown, ctx: ToolCallContext, kind: string): void {
  // The page the answer came from, for the agent's `sources` (citations in the final answer).
  const sections = [...new Set(passages.map((p) => p.section).filter(Boolean))];
  ctx.report?.({
    sources: [
      { title: page.title, ...(page.url ? { url: page.url } : {}), source: kind, sections },
    ],
  });
}

/**
 * `retrieve_passages(query)` for the page-search agent, bound to one page: up to 5 passages of
 * that page ranked for the query, as 'Retrieved passages for query "<q>":\nPassage 0: ...'.
 * An unknown page answers with close titles; a disambiguation page with its options. Reports the
 * page as a source (`ctx.report({ sources: [{ title, url?, source, sections }] })`) when it answered,
 * or what `options.report` reports instead (the research app reports each passage, with its id).
 */
export function createRetrievePassagesTool(
  source: KnowledgeSource,
  pageTitle: string,
  options: {
    k?: number;
    report?: (shown: PassagesShown, ctx: ToolCallContext) => void;
  } = {},
): CodeTool<typeof parameters.shape> {
  return defineTool({
    name: "retrieve_passages",
    description: `Returns up to ${options.k ?? RETRIEVE_PASSAGES_K} passages of the page "${pageTitle}" that best match the query, best first.`,
    parameters,
    returns: "string",
    async invoke({ query }, ctx) {
      const q = query.trim();
      if (!q) {
        return 'The query is empty. Describe what you are looking for, e.g. retrieve_passages("year construction completed").';
      }
      const { lookup, passages } = await source.retrievePassages(pageTitle, q, {
        k: options.k ?? RETRIEVE_PASSAGES_K,
      });
      const problem = formatLookupProblem(lookup);
      if (problem) return problem;
      if (passages.length === 0) return `The page "${pageTitle}" has no text to search.`;
      if (lookup.status === "found") {
        const shown = { page: lookup.page, passages };
        if (options.report) options.report(shown, ctx);
        else reportPage(shown, ctx, source.kind);
      }
      return formatPassages(q, passages);
    },
  });
}
