import { CodehopError, ErrorCodes } from "../errors.ts";
import { Chunker, type ChunkOptions } from "./chunking.ts";
import { PageCache } from "./page-cache.ts";
import { type Candidate, InMemoryRanker } from "./rank.ts";
import { type Embedder, passageEmbeddingText } from "./embeddings.ts";
import { reciprocalRankFusion, summarize, titleKey } from "./text.ts";
import type { KnowledgeSource, PageLookup, PageSummary, Passage } from "./types.ts";

/** How long a "missing page" answer is trusted before asking again. */
const MISSING_TTL_MS = 24 * 3600 * 1000;

/** Default MediaWiki API endpoint. */
export const DEFAULT_WIKIPEDIA_API = "https://en.wikipedia.org/w/api.php";

/** Options for {@link WikipediaSource}. */
export interface WikipediaSourceOptions extends ChunkOptions {
  /** MediaWiki API endpoint (default English Wikipedia). */
  apiUrl?: string;
  /** SQLite page cache file (default ":memory:", i.e. this process only). */
  cacheDb?: string;
  /** Cache entries older than this are refetched (default 30 days). */
  cacheTtlMs?: number;
  /** Per-request timeout in ms (default 15,000). */
  timeoutMs?: number;
  /** Retries after a failed request (HTTP 429/5xx, network error, timeout, maxlag); default 3. */
  retries?: number;
  /** First retry delay in ms, doubled each time (default 500). */
  retryDelayMs?: number;
  /** Summary length in characters (default 1,000). */
  summaryChars?: number;
  /** User-Agent sent to the API (Wikimedia asks clients to identify themselves). */
  userAgent?: string;
  /** fetch implementation (default global fetch). */
  fetch?: typeof fetch;
  /**
   * Ranks a page's passages by BM25 and embedding similarity fused with reciprocal rank fusion
   * (hybrid, as for the corpus). Passage vectors are cached in the page cache per model.
   */
  embedder?: Embedder;
}

interface ApiPage {
  title: string;
  ns?: number;
  index?: number;
  missing?: boolean;
  invalid?: boolean;
  extract?: string;
  fullurl?: string;
  pageprops?: Record<string, unknown>;
  links?: { title: string; ns?: number }[];
}

interface ApiResponse {
  error?: { code: string; info: string };
  query?: {
    pages?: ApiPage[];
    search?: { title: string }[];
    redirects?: { from: string; to: string }[];
    normalized?: { from: string; to: string }[];
  };
}

/**
 * Online Wikipedia through the MediaWiki Action API with plain fetch. (@langchain/community's
 * WikipediaQueryRun returns one pre-formatted string and has no disambiguation handling, caching
 * or retries; the `wikipedia` npm package hard-codes the REST API host, which breaks mirrors and
 * the local test server. The Action API calls used here are few and stable.)
 *
 * Page lookups and searches are cached in SQLite; requests have a timeout and retry with
 * exponential backoff; persistent failures throw SOURCE_UNAVAILABLE.
 */
export class WikipediaSource implements KnowledgeSource {
  readonly kind = "wikipedia" as const;
  readonly apiUrl: string;
  /** Requests actually sent (cache hits excluded), for tests and diagnostics. */
  requestCount = 0;
  private readonly cache: PageCache;
  private readonly chunker: Chunker;
  private readonly ranker = new InMemoryRanker();
  private readonly chunkCache = new Map<string, Candidate[]>();
  private readonly inflight = new Map<string, Promise<PageLookup>>();
  private readonly opts: Required<
    Pick<
      WikipediaSourceOptions,
      "timeoutMs" | "retries" | "retryDelayMs" | "summaryChars" | "userAgent"
    >
  >;
  private readonly fetchImpl: typeof fetch;
  private readonly embedder?: Embedder;

  constructor(options: WikipediaSourceOptions = {}) {
    this.apiUrl = options.apiUrl ?? DEFAULT_WIKIPEDIA_API;
    try {
      new URL(this.apiUrl);
    } catch {
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `Wikipedia API URL "${this.apiUrl}" is not a valid URL`,
      );
    }
    this.cache = new PageCache(options.cacheDb ?? ":memory:", options.cacheTtlMs);
    this.chunker = new Chunker(options);
    this.opts = {
      timeoutMs: options.timeoutMs ?? 15_000,
      retries: options.retries ?? 3,
      retryDelayMs: options.retryDelayMs ?? 500,
      summaryChars: options.summaryChars ?? 1000,
      userAgent:
        options.userAgent ?? "codehop/0.1 (multi-hop research agent; https://github.com/codehop)",
    };
    this.fetchImpl = options.fetch ?? fetch;
    this.embedder = options.embedder;
  }

  /** "hybrid" when an embedder is configured (in-page ranking), else "bm25". */
  get mode(): "bm25" | "hybrid" {
    return this.embedder ? "hybrid" : "bm25";
  }

  async search(query: string, options: { limit?: number } = {}): Promise<PageSummary[]> {
    const limit = Math.min(Math.max(options.limit ?? 5, 1), 20);
    const q = query.trim();
    if (!q) return [];
    const key = `${this.apiUrl}|${limit}|${q.toLowerCase()}`;
    const cached = this.cache.get<PageSummary[]>("search", key);
    if (cached) return cached;
    const data = await this.call({
      action: "query",
      generator: "search",
      gsrsearch: q,
      gsrlimit: String(limit),
      gsrnamespace: "0",
      prop: "extracts|pageprops|info",
      inprop: "url",
      exintro: "1",
      explaintext: "1",
      exlimit: "max",
      ppprop: "disambiguation",
      redirects: "1",
    });
    const pages = [...(data.query?.pages ?? [])].sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
    const results: PageSummary[] = pages.map((p) => {
      const summary = summarize(p.extract ?? "", this.opts.summaryChars);
      const isDisambig = p.pageprops && "disambiguation" in p.pageprops;
      return {
        title: p.title,
        summary: isDisambig ? `(disambiguation page) ${summary}`.trim() : summary,
        ...(p.fullurl ? { url: p.fullurl } : {}),
      };
    });
    this.cache.put("search", key, results);
    return results;
  }

  async getPage(title: string): Promise<PageLookup> {
    const t = title.trim();
    if (!t) return { status: "missing", title, suggestions: [] };
    const key = `${this.apiUrl}|${titleKey(t)}`;
    const cached = this.cache.get<PageLookup>("page", key);
    // A missing page may be created (or a typo fixed upstream): trust "missing" for a day only.
    if (cached && (cached.status !== "missing" || this.cache.get("page", key, MISSING_TTL_MS)))
      return cached;
    // Agents often ask for the same page from concurrent calls (Promise.all): fetch it once.
    let pending = this.inflight.get(key);
    if (!pending) {
      pending = this.fetchPage(t, key).finally(() => this.inflight.delete(key));
      this.inflight.set(key, pending);
    }
    return pending;
  }

  private async fetchPage(t: string, key: string): Promise<PageLookup> {
    const data = await this.call({
      action: "query",
      titles: t,
      prop: "extracts|pageprops|info",
      inprop: "url",
      explaintext: "1",
      exsectionformat: "wiki",
      ppprop: "disambiguation",
      redirects: "1",
    });
    const page = data.query?.pages?.[0];
    let lookup: PageLookup;
    if (!page || page.missing || page.invalid) {
      const hits = await this.searchTitles(t);
      lookup = { status: "missing", title: t, suggestions: hits };
    } else if (page.pageprops && "disambiguation" in page.pageprops) {
      lookup = {
        status: "disambiguation",
        title: page.title,
        options: await this.disambiguationOptions(page.title),
      };
    } else {
      lookup = {
        status: "found",
        page: {
          title: page.title,
          text: page.extract ?? "",
          source: "wikipedia",
          ...(page.fullurl ? { url: page.fullurl } : {}),
        },
      };
    }
    this.cache.put("page", key, lookup);
    return lookup;
  }

  async retrievePassages(
    title: string,
    query: string,
    options: { k?: number } = {},
  ): Promise<{ lookup: PageLookup; passages: Passage[] }> {
    const lookup = await this.getPage(title);
    if (lookup.status !== "found") return { lookup, passages: [] };
    const candidates = await this.chunksOf(lookup.page.title, lookup.page.text);
    return { lookup, passages: await this.rank(candidates, query, options.k ?? 5) };
  }

  /** Passages from the top 3 pages for the query, ranked together. */
  async searchPassages(query: string, options: { k?: number } = {}): Promise<Passage[]> {
    const hits = await this.search(query, { limit: 3 });
    const all: Candidate[] = [];
    for (const hit of hits) {
      const lookup = await this.getPage(hit.title);
      if (lookup.status === "found")
        all.push(...(await this.chunksOf(lookup.page.title, lookup.page.text)));
    }
    return this.rank(all, query, options.k ?? 5);
  }

  async close(): Promise<void> {
    this.cache.close();
    this.ranker.close();
  }

  /** BM25 in memory; with an embedder, fused (RRF) with cosine similarity of cached passage vectors. */
  private async rank(candidates: Candidate[], query: string, k: number): Promise<Passage[]> {
    if (!this.embedder || candidates.length === 0 || !query.trim())
      return this.ranker.rank(candidates, query, k);
    const bm25 = this.ranker.rank(candidates, query, candidates.length).filter((p) => p.score > 0);
    const vectors = await this.passageVectors(candidates);
    const [q] = await this.embedder.embed([query]);
    const byText = new Map(candidates.map((c, i) => [`${c.title}\u0000${c.text}`, i]));
    const sims = vectors.map((v, i) => ({ i, sim: cosine(q, v) })).sort((a, b) => b.sim - a.sim);
    const fused = reciprocalRankFusion([
      bm25.map((p) => byText.get(`${p.title}\u0000${p.text}`)!),
      sims.map((x) => x.i),
    ]);
    return [...fused.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, k)
      .map(([i, score]) => ({ ...candidates[i], score }));
  }

  /** Vectors of passages, from the page cache when this model embedded them before. */
  private async passageVectors(candidates: Candidate[]): Promise<number[][]> {
    const model = this.embedder!.model;
    const out: (number[] | undefined)[] = candidates.map((c) =>
      this.cache.get<number[]>("vector", `${model}|${c.title}|${c.text}`),
    );
    const missing = out.flatMap((v, i) => (v ? [] : [i]));
    if (missing.length > 0) {
      const texts = missing.map((i) =>
        passageEmbeddingText(candidates[i].title, candidates[i].section, candidates[i].text),
      );
      const vectors = await this.embedder!.embed(texts);
      missing.forEach((i, j) => {
        out[i] = vectors[j];
        this.cache.put(
          "vector",
          `${model}|${candidates[i].title}|${candidates[i].text}`,
          vectors[j],
        );
      });
    }
    return out as number[][];
  }

  private async chunksOf(title: string, text: string): Promise<Candidate[]> {
    let chunks = this.chunkCache.get(title);
    if (!chunks) {
      // The chunk's index is its id: the same cached page text always chunks the same way.
      chunks = (await this.chunker.chunk(text)).map((c, i) => ({
        title,
        section: c.section,
        text: c.text,
        id: `${title}#${i}`,
        docId: title,
      }));
      // A small LRU: pages are re-read often within one question, rarely across many.
      if (this.chunkCache.size >= 32) this.chunkCache.delete(this.chunkCache.keys().next().value!);
      this.chunkCache.set(title, chunks);
    }
    return chunks;
  }

  private async searchTitles(query: string): Promise<string[]> {
    const data = await this.call({
      action: "query",
      list: "search",
      srsearch: query,
      srlimit: "5",
      srnamespace: "0",
      srprop: "",
    });
    return (data.query?.search ?? []).map((s) => s.title);
  }

  private async disambiguationOptions(title: string): Promise<string[]> {
    const data = await this.call({
      action: "query",
      titles: title,
      prop: "links",
      plnamespace: "0",
      pllimit: "max",
    });
    return (data.query?.pages?.[0]?.links ?? []).map((l) => l.title);
  }

  /** One API call with timeout and retries; the parsed JSON body. */
  private async call(params: Record<string, string>): Promise<ApiResponse> {
    const url = new URL(this.apiUrl);
    for (const [k, v] of Object.entries({
      ...params,
      format: "json",
      formatversion: "2",
      maxlag: "5",
    })) {
      url.searchParams.set(k, v);
    }
    let lastError = "";
    for (let attempt = 0; attempt <= this.opts.retries; attempt++) {
      if (attempt > 0) await sleep(this.opts.retryDelayMs * 2 ** (attempt - 1));
      this.requestCount++;
      let res: Response;
      try {
        res = await this.fetchImpl(url, {
          headers: { "User-Agent": this.opts.userAgent, Accept: "application/json" },
          signal: AbortSignal.timeout(this.opts.timeoutMs),
        });
      } catch (err) {
        lastError =
          (err as Error).name === "TimeoutError"
            ? `timed out after ${this.opts.timeoutMs} ms`
            : (err as Error).message;
        continue;
      }
      if (res.status === 429 || res.status >= 500) {
        lastError = `HTTP ${res.status}`;
        await res.body?.cancel();
        continue;
      }
      if (!res.ok) {
        throw new CodehopError(
          ErrorCodes.SOURCE_UNAVAILABLE,
          `Wikipedia API ${this.apiUrl} answered HTTP ${res.status}`,
        );
      }
      let body: ApiResponse;
      try {
        body = (await res.json()) as ApiResponse;
      } catch {
        lastError = "response was not JSON";
        continue;
      }
      if (body.error) {
        // maxlag: the servers ask clients to back off and retry.
        if (body.error.code === "maxlag") {
          lastError = `maxlag: ${body.error.info}`;
          continue;
        }
        throw new CodehopError(
          ErrorCodes.SOURCE_UNAVAILABLE,
          `Wikipedia API error ${body.error.code}: ${body.error.info}`,
        );
      }
      return body;
    }
    throw new CodehopError(
      ErrorCodes.SOURCE_UNAVAILABLE,
      `Wikipedia API ${this.apiUrl} failed after ${this.opts.retries + 1} attempts: ${lastError}`,
    );
  }
}

function cosine(a: number[], b: number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na && nb ? dot / Math.sqrt(na * nb) : 0;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
