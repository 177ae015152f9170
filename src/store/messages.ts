import type { PageLookup, PageSummary, Passage } from "./types.ts";

/** How many disambiguation options / suggestions a message lists. */
const MAX_LISTED = 10;

const quoteList = (titles: string[]) =>
  titles
    .slice(0, MAX_LISTED)
    .map((t) => `"${t}"`)
    .join(", ");

/**
 * The message an agent sees when a page cannot be used: a missing page with "did you mean"
 * suggestions, or a disambiguation page with the pages it may refer to. Undefined when found.
 */
export function formatLookupProblem(lookup: PageLookup): string | undefined {
  if (lookup.status === "found") return undefined;
  if (lookup.status === "disambiguation") {
    return lookup.options.length > 0
      ? `"${lookup.title}" is a disambiguation page. It may refer to: ${quoteList(lookup.options)}. Call again with one of these exact titles.`
      : `"${lookup.title}" is a disambiguation page. Search for a more specific title.`;
  }
  return lookup.suggestions.length > 0
    ? `No page titled "${lookup.title}" was found. Did you mean: ${quoteList(lookup.suggestions)}? Call again with one of these exact titles.`
    : `No page titled "${lookup.title}" was found, and no similar titles exist. Search for the topic first to get exact page titles.`;
}

/** `search_wikipedia` output: "Pages found for query '<q>':\nPage: <title>\nSummary: <...>" per page. */
export function formatSearchResults(query: string, pages: PageSummary[]): string {
  if (pages.length === 0)
    return `No pages found for query '${query}'. Try fewer or different keywords.`;
  const body = pages.map((p) => `Page: ${p.title}\nSummary: ${p.summary}`).join("\n");
  return `Pages found for query '${query}':\n${body}`;
}

/**
 * `retrieve_passages` output: 'Retrieved passages for query "<q>":\nPassage 0: ...' best first.
 * A passage under a section starts with the heading in brackets ("[Construction] ..."), so the
 * agent can tell the lead from, say, "Legacy".
 */
export function formatPassages(query: string, passages: Passage[]): string {
  if (passages.length === 0) return `No passages found for query "${query}".`;
  const body = passages
    .map(
      (p, i) =>
        `Passage ${i}: ${p.section ? `[${p.section}] ` : ""}${p.text.replace(/\s+/g, " ").trim()}`,
    )
    .join("\n");
  return `Retrieved passages for query "${query}":\n${body}`;
}
