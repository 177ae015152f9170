/**
 * Public contract of knowledge sources (online Wikipedia, local SQLite corpus). The agent tools in
 * src/tools/ and the evaluation harness depend only on these types.
 */

/** A search hit: a page title and a summary of ~1,000 characters. */
export interface PageSummary {
  title: string;
  summary: string;
  url?: string;
}

/** A page's full plain text. */
export interface Page {
  title: string;
  text: string;
  url?: string;
  /** Where it came from: "wikipedia", "web", or the corpus document's `source`. */
  source?: string;
  /** The kind of source that served it, when a source mixes several (web and corpus ...). */
  kind?: SourceKind;
}

/** The kinds of knowledge source: online Wikipedia, a local corpus, the open web. */
export type SourceKind = "wikipedia" | "corpus" | "web";

/** Result of looking a page up by title. */
export type PageLookup =
  | { status: "found"; page: Page }
  /** The title is a disambiguation page; `options` lists the pages it points to. */
  | { status: "disambiguation"; title: string; options: string[] }
  /** No such page; `suggestions` are close titles (possibly empty). */
  | { status: "missing"; title: string; suggestions: string[] };

/** A passage (chunk) of one page, ranked for a query. */
export interface Passage {
  title: string;
  /** Section heading the passage sits under ("" for the lead). */
  section: string;
  text: string;
  /** Higher is better; comparable only within one result list. */
  score: number;
  /**
   * Stable id of the passage within its source, for citations: the corpus row id of the passage
   * (one corpus file), or `<page title>#<chunk index>` for a page fetched online (same page text,
   * same chunking, same id).
   */
  id?: string;
  /** Id of the document the passage belongs to (the corpus document row id, or the page title online). */
  docId?: string;
  /** Where in its page: passage `index` (1-based) of the page's `of` passages (web pages). */
  position?: { index: number; of: number };
}

/** Where agents look things up. */
export interface KnowledgeSource {
  /**
   * "wikipedia" (online MediaWiki API), "corpus" (local SQLite file), "web" (search provider and
   * browser), or "mixed" (several of them: each page says its own `kind`).
   */
  readonly kind: SourceKind | "mixed";
  /** Top pages for a query, best first. */
  search(query: string, options?: { limit?: number }): Promise<PageSummary[]>;
  /** A page by (case-insensitive, redirect-following) title. */
  getPage(title: string): Promise<PageLookup>;
  /** Passages of one page ranked for a query, best first (up to `k`, default 5). */
  retrievePassages(
    title: string,
    query: string,
    options?: { k?: number },
  ): Promise<{ lookup: PageLookup; passages: Passage[] }>;
  /** Passages across the whole source, best first (used by the `rag` baseline). */
  searchPassages?(query: string, options?: { k?: number }): Promise<Passage[]>;
  close(): Promise<void>;
}
