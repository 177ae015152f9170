import type { KnowledgeSource } from "../../../store/types.ts";
import type { CodeTool } from "../../../tools/define-tool.ts";
import { citedPassage } from "../../common/citations.ts";
import { createRetrievePassagesTool } from "../../qa/tools/retrieve-passages.ts";
import { passageRecord } from "../base/records.ts";

/**
 * `retrieve_passages(query)` for a page reader of the research team, bound to one page: the QA
 * app's tool (up to `k` passages, best first, the same text), except that every passage shown is
 * reported as read — `{ kind: "research_passage", id, doc_id, title, section, url, source, text }`
 * — so the condensation step can tie each note to the exact passages it came from.
 */
export function createCitedPassagesTool(
  source: KnowledgeSource,
  pageTitle: string,
  options: { k?: number } = {},
): CodeTool<any> {
  return createRetrievePassagesTool(source, pageTitle, {
    k: options.k ?? 4,
    report: ({ page, passages }, ctx) =>
      ctx.report?.({
        sources: passages.map((p) =>
          // A mixed source's page says which source served it.
          passageRecord(citedPassage(p, { url: page.url, source: page.kind ?? source.kind })),
        ),
      }),
  });
}
