import { z } from "zod";
import { formatLookupProblem, formatPassages } from "../../../store/messages.ts";
import type { KnowledgeSource } from "../../../store/types.ts";
import { type CodeTool, defineTool } from "../../../tools/define-tool.ts";
import { passageId } from "../../common/citations.ts";
import { type CitedPassage, passageRecord } from "../base/records.ts";

const parameters = z.object({
  query: z.string().describe('what to look for on the page, e.g. "year construction completed"'),
});

/**
 * `retrieve_passages(query)` for a page reader of the research team, bound to one page: the same
 * text as the QA app's tool (up to `k` passages, best first), and every passage shown is reported
 * as read — `{ kind: "research_passage", id, doc_id, title, section, url, source, text }` — so the
 * condensation step can tie each note to the exact passages it came from.
 */
export function createCitedPassagesTool(
  source: KnowledgeSource,
  pageTitle: string,
  options: { k?: number } = {},
): CodeTool<typeof parameters.shape> {
  const k = options.k ?? 4;
  return defineTool({
    name: "retrieve_passages",
    description: `Returns up to ${k} passages of the page "${pageTitle}" that best match the query, best first.`,
    parameters,
    returns: "string",
    async invoke({ query }, ctx) {
      const q = query.trim();
      if (!q) {
        return 'The query is empty. Describe what you are looking for, e.g. retrieve_passages("year construction completed").';
      }
      const { lookup, passages } = await source.retrievePassages(pageTitle, q, { k });
      const problem = formatLookupProblem(lookup);
      if (problem) return problem;
      if (passages.length === 0) return `The page "${pageTitle}" has no text to search.`;
      const url = lookup.status === "found" ? lookup.page.url : undefined;
      const read: CitedPassage[] = passages.map((p) => ({
        id: passageId(p),
        ...(p.docId ? { doc_id: p.docId } : {}),
        title: p.title,
        section: p.section,
        ...(url ? { url } : {}),
        source: source.kind,
        text: p.text,
      }));
      ctx.report?.({ sources: read.map(passageRecord) });
      return formatPassages(q, passages);
    },
  });
}
