import { Chunker } from "../../store/chunking.ts";
import { type Candidate, InMemoryRanker } from "../../store/rank.ts";
import { titleSimilarity } from "../../store/text.ts";
import type { KnowledgeSource, Page, PageLookup, PageSummary, Passage } from "../../store/types.ts";
import type { WebResearchConfig } from "../../runs/config.ts";
import {
  createSearchProvider,
  createPageLoader,
  resolveWebSettings,
  WebError,
  webSettingsFromEnv,
  type PageLoader,
  type SearchProvider,
} from "../../web/index.ts";
import { DEFAULT_WEB_RULES, isDenied, rankResults, type WebRules } from "./web-ranking.ts";

/**
 * The open web as a {@link KnowledgeSource}, so the research team's agents (researcher, page
 * readers) work on it as on Wikipedia or a corpus: `search` asks the search provider (the web
 * port's SearxNG, Brave, Tavily or Serper) and ranks the results by relevance and credibility
 * (web-ranking.ts); a page is read by the operator's browser (text: HTTP fetch, readable content,
 * Markdown; or headless Chromium for JavaScript pages) when a page reader first asks for it, chunked by its Markdown sections and ranked with BM25 like
 * a fetched Wikipedia page. Pages are named by the titles its searches showed (or by URL); a
 * passage's id is `<url>#<n>` and it knows its position in the page ("passage 3 of 12").
 */

/** Options of a {@link WebSource}. */
export interface WebSourceOptions {
  search: SearchProvider;
  /** Reads a URL into Markdown (the text browser, Chromium, or auto: text then Chromium). */
  loader: PageLoader;
  rules?: Partial<WebRules>;
  /** Results asked of the provider per search, before ranking (default 10). */
  fetchResults?: number;
  /** Passage size and overlap in characters (default 800 / 200: web pages are long). */
  chunkSize?: number;
  chunkOverlap?: number;
}

interface KnownPage {
  url: string;
  title: string;
}

/** Pages kept read per source (a research run reads a few per sub-question). */
const MAX_CACHED_PAGES = 48;

/** A page as the source keeps it once read. */
interface ReadPage {
  page: Page;
  chunks: Candidate[];
}

/** The open web through the search and browser ports (see the module comment). */
export class WebSource implements KnowledgeSource {
  readonly kind = "web" as const;
  readonly rules: WebRules;
  /** Pages fetched so far (a page read again from the cache is not counted). */
  pagesRead = 0;
  /** Searches made so far. */
  searches = 0;
  private readonly byTitle = new Map<string, KnownPage>();
  private readonly pages = new Map<string, Promise<ReadPage>>();
  private readonly chunker: Chunker;
  private readonly ranker = new InMemoryRanker();

  constructor(private readonly options: WebSourceOptions) {
    this.rules = { ...DEFAULT_WEB_RULES, ...options.rules };
    this.chunker = new Chunker({
      chunkSize: options.chunkSize ?? 800,
      chunkOverlap: options.chunkOverlap ?? 200,
    });
  }

  /**
   * The best results for `query` after ranking, each named by a title no other result of this
   * source uses ("Title (host)" when two pages share one); the summary starts with the host and
   * the credibility tier, so the agent sees where a page comes from. A search provider that is down
   * throws its WebError (the agent reads it as an observation).
   */
  async search(query: string, options: { limit?: number } = {}): Promise<PageSummary[]> {
    const limit = options.limit ?? 5;
    if (limit <= 0) return [];
    this.searches++;
    const found = await this.options.search.search(query, {
      limit: Math.max(limit, this.options.fetchResults ?? 10),
    });
    const { results } = rankResults(query, found.results, this.rules);
    return results.slice(0, limit).map((r) => {
      const title = this.nameFor(r.title || r.host, r.url, r.host);
      const tier = r.credibility === "general" ? "" : `, ${r.credibility.replace("_", "-")}`;
      return { title, url: r.url, summary: `(${r.host}${tier}) ${r.snippet}`.trim() };
    });
  }

  async getPage(title: string): Promise<PageLookup> {
    const known = await this.find(title);
    if (!known) return this.missing(title);
    return { status: "found", page: (await this.read(known)).page };
  }

  async retrievePassages(
    title: string,
    query: string,
    options: { k?: number } = {},
  ): Promise<{ lookup: PageLookup; passages: Passage[] }> {
    const known = await this.find(title);
    if (!known) return { lookup: this.missing(title), passages: [] };
    const read = await this.read(known);
    const of = read.chunks.length;
    const ranked = this.ranker.rank(read.chunks, query, options.k ?? 5);
    const passages = ranked.map((p) => ({
      ...p,
      position: { index: Number(p.id!.slice(p.id!.lastIndexOf("#") + 1)) + 1, of },
    }));
    return { lookup: { status: "found", page: read.page }, passages };
  }

  /** Passages of the top 3 results for the query, ranked together. */
  async searchPassages(query: string, options: { k?: number } = {}): Promise<Passage[]> {
    const hits = await this.search(query, { limit: 3 });
    const all: Candidate[] = [];
    for (const hit of hits) {
      try {
        all.push(...(await this.read(this.resolve(hit.title)!)).chunks);
      } catch (err) {
        if (!(err instanceof WebError)) throw err;
      }
    }
    return this.ranker.rank(all, query, options.k ?? 5);
  }

  async close(): Promise<void> {
    this.ranker.close();
    await this.options.loader.close();
  }

  /** A title for a result: its own, or "Title (host)" when another page of this source has it. */
  private nameFor(title: string, url: string, host: string): string {
    for (const candidate of [title, `${title} (${host})`, `${title} (${url})`]) {
      const known = this.byTitle.get(candidate);
      if (!known || known.url === url) {
        this.byTitle.set(candidate, { url, title: candidate });
        return candidate;
      }
    }
    return url;
  }

  /**
   * The page a name means; a title this source has not shown (a run resumed in a new process, a
   * title the model remembers) is searched for, and taken when a result has exactly that title.
   */
  private async find(name: string): Promise<KnownPage | undefined> {
    const known = this.resolve(name);
    if (known || !name.trim()) return known;
    try {
      await this.search(name, { limit: 5 });
    } catch (err) {
      if (!(err instanceof WebError)) throw err;
    }
    return this.resolve(name);
  }

  /** The page a name means: a title a search showed, or an http(s) URL. */
  private resolve(name: string): KnownPage | undefined {
    const key = name.trim();
    const known = this.byTitle.get(key);
    if (known) return known;
    if (/^https?:\/\//i.test(key)) return { url: key, title: "" };
    return undefined;
  }

  private missing(title: string): PageLookup {
    const suggestions = [...this.byTitle.keys()]
      .map((t) => ({ t, s: titleSimilarity(title, t) }))
      .filter((x) => x.s >= 0.25)
      .sort((a, b) => b.s - a.s)
      .slice(0, 5)
      .map((x) => x.t);
    return { status: "missing", title, suggestions };
  }

  /** Fetches a page once (concurrent readers share the fetch); a failed fetch is not kept. */
  private read(known: KnownPage): Promise<ReadPage> {
    if (isDenied(known.url, this.rules)) {
      return Promise.reject(
        new WebError(
          "refused",
          `${known.url} is on a domain the operator does not allow research to read; choose another result.`,
        ),
      );
    }
    let pending = this.pages.get(known.url);
    if (!pending) {
      pending = this.fetch(known);
      this.pages.set(known.url, pending);
      pending.catch(() => this.pages.delete(known.url));
      while (this.pages.size > MAX_CACHED_PAGES) this.pages.delete(this.pages.keys().next().value!);
    }
    return pending;
  }

  private async fetch(known: KnownPage): Promise<ReadPage> {
    const web = await this.options.loader.load(known.url);
    this.pagesRead++;
    const url = web.finalUrl || known.url;
    const title = known.title || web.title || url;
    const page: Page = { title, text: web.markdown, url, source: "web" };
    const chunks = (await this.chunker.chunk(web.markdown)).map((c, i) => ({
      title,
      section: c.section,
      text: c.text,
      id: `${url}#${i}`,
      docId: url,
    }));
    return { page, chunks };
  }
}

/**
 * The web source of a configuration: the environment's web settings (CODEHOP_SEARCH_*,
 * CODEHOP_BROWSER, CODEHOP_WEB_*) under `web.settings`, the operator's domain lists, and the page
 * loader the operator's browser setting chooses (src/web/loaders.ts): `text` (HTTP fetch +
 * readable content), `chromium` (every page in headless Chromium), `auto`, the default (text, and
 * Chromium for a page only its scripts fill in, when the executable exists). The loader — and its
 * Chromium process — is released by {@link WebSource.close}. Bad settings: CODEHOP_CONFIG_INVALID.
 */
export function openWebSource(web: WebResearchConfig = {}): WebSource {
  const settings = resolveWebSettings(web.settings, webSettingsFromEnv(), "the web settings");
  return new WebSource({
    search: createSearchProvider(settings),
    loader: createPageLoader(settings),
    rules: {
      ...(web.allowDomains ? { allowDomains: web.allowDomains } : {}),
      ...(web.denyDomains ? { denyDomains: web.denyDomains } : {}),
    },
  });
}
