import { WebError } from "./errors.ts";
import { httpRequest, type HttpPolicy, type HttpResponse } from "./http.ts";
import { SEARCH_ENDPOINTS, type SearchProviderName, type WebSettings } from "./settings.ts";

/**
 * The search-provider port: one interface, four adapters, each chosen by configuration
 * (CODEHOP_SEARCH_PROVIDER / CODEHOP_SEARCH_URL / CODEHOP_SEARCH_API_KEY):
 * - **searxng** (the default; self-hostable): `GET <base>/search?q=…&format=json` → `results[]`
 *   of `{ url, title, content, publishedDate? }` (and `answers[]`);
 * - **brave**: `GET …/res/v1/web/search?q=…&count=N` with `X-Subscription-Token` → `web.results[]`
 *   of `{ url, title, description, age? }`;
 * - **tavily**: `POST …/search` `{ query, max_results }` with `Authorization: Bearer` →
 *   `results[]` of `{ url, title, content, published_date? }` (and `answer`);
 * - **serper**: `POST …/search` `{ q, num }` with `X-API-KEY` → `organic[]` of
 *   `{ link, title, snippet, date? }` (and `answerBox`).
 * The provider's endpoint is the operator's choice, so its address is not held to the link policy
 * (a SearxNG on localhost is the usual set-up); deadline and size cap apply. A provider that is
 * down, refuses the key, rate-limits or answers something else than its JSON API is a `provider`
 * WebError whose message says which and what to do.
 */

/** One search hit. */
export interface SearchResult {
  title: string;
  url: string;
  /** The provider's text about the page (its snippet). */
  snippet: string;
  /** A date the provider gives (published, or age such as "2 days ago"). */
  date?: string;
}

/** What a search found. */
export interface SearchResponse {
  query: string;
  /** A direct answer some providers give (SearxNG's answers, Tavily's answer, Serper's answer box). */
  answer?: string;
  results: SearchResult[];
}

/** A search provider. */
export interface SearchProvider {
  /** The provider's name (searxng, brave, tavily, serper). */
  readonly name: SearchProviderName;
  /** The endpoint it calls. */
  readonly endpoint: string;
  /** Up to `limit` results for `query`; `signal` is the run's. */
  search(
    query: string,
    options?: { limit?: number; signal?: AbortSignal },
  ): Promise<SearchResponse>;
}

/** Largest search answer read (a results page is a few kilobytes). */
const MAX_SEARCH_BYTES = 4 * 1024 * 1024;

const text = (v: unknown): string => (typeof v === "string" ? v.trim() : "");

function hits(list: unknown, pick: (item: Record<string, unknown>) => SearchResult | undefined) {
  if (!Array.isArray(list)) return [];
  return list
    .filter((item): item is Record<string, unknown> => typeof item === "object" && item !== null)
    .map(pick)
    .filter((r): r is SearchResult => r !== undefined && Boolean(r.url));
}

function hit(title: unknown, url: unknown, snippet: unknown, date?: unknown): SearchResult {
  const d = text(date);
  return {
    title: text(title) || text(url),
    url: text(url),
    snippet: text(snippet),
    ...(d ? { date: d } : {}),
  };
}

/** A request to a provider. */
interface ProviderRequest {
  url: string;
  method: "GET" | "POST";
  headers: Record<string, string>;
  body?: string;
}

/** A JSON POST with the provider's auth header. */
function postJson(url: string, auth: Record<string, string>, body: unknown): ProviderRequest {
  return {
    url,
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json", ...auth },
    body: JSON.stringify(body),
  };
}

/** How each provider is asked and how its answer is read. */
interface Adapter {
  request(query: string, limit: number, settings: WebSettings, endpoint: string): ProviderRequest;
  read(json: Record<string, unknown>): Omit<SearchResponse, "query">;
  /** The key is required (the hosted providers). */
  needsKey: boolean;
}

const ADAPTERS: Readonly<Record<SearchProviderName, Adapter>> = {
  searxng: {
    needsKey: false,
    request(query, _limit, settings, endpoint) {
      const url = new URL(endpoint.replace(/\/+$/, "").replace(/\/search$/, "") + "/search");
      url.searchParams.set("q", query);
      url.searchParams.set("format", "json");
      return {
        url: url.href,
        method: "GET",
        headers: {
          accept: "application/json",
          ...(settings.searchApiKey ? { authorization: `Bearer ${settings.searchApiKey}` } : {}),
        },
      };
    },
    read(json) {
      const answers = Array.isArray(json.answers)
        ? json.answers
            .map((a) => (typeof a === "string" ? a : text((a as any)?.answer)))
            .filter(Boolean)
        : [];
      return {
        ...(answers.length ? { answer: answers.join(" ") } : {}),
        results: hits(json.results, (r) => hit(r.title, r.url, r.content, r.publishedDate)),
      };
    },
  },
  brave: {
    needsKey: true,
    request(query, limit, settings, endpoint) {
      const url = new URL(endpoint);
      url.searchParams.set("q", query);
      url.searchParams.set("count", String(Math.min(limit, 20)));
      return {
        url: url.href,
        method: "GET",
        headers: {
          accept: "application/json",
          "x-subscription-token": settings.searchApiKey ?? "",
        },
      };
    },
    read(json) {
      const web = json.web as Record<string, unknown> | undefined;
      return {
        results: hits(web?.results, (r) => hit(r.title, r.url, r.description, r.page_age ?? r.age)),
      };
    },
  },
  tavily: {
    needsKey: true,
    request: (query, limit, settings, endpoint) =>
      postJson(
        endpoint,
        { authorization: `Bearer ${settings.searchApiKey ?? ""}` },
        { query, max_results: limit, search_depth: "basic" },
      ),
    read(json) {
      const answer = text(json.answer);
      return {
        ...(answer ? { answer } : {}),
        results: hits(json.results, (r) => hit(r.title, r.url, r.content, r.published_date)),
      };
    },
  },
  serper: {
    needsKey: true,
    request: (query, limit, settings, endpoint) =>
      postJson(endpoint, { "x-api-key": settings.searchApiKey ?? "" }, { q: query, num: limit }),
    read(json) {
      const box = json.answerBox as Record<string, unknown> | undefined;
      const answer = text(box?.answer) || text(box?.snippet);
      return {
        ...(answer ? { answer } : {}),
        results: hits(json.organic, (r) => hit(r.title, r.link, r.snippet, r.date)),
      };
    },
  },
};

/** Why a provider's HTTP answer is not usable, in words an operator acts on. */
function statusProblem(name: string, res: HttpResponse): string {
  if (res.status === 401 || res.status === 403) {
    return name === "searxng"
      ? `answered HTTP ${res.status}: its JSON API is off (add \`json\` to \`search.formats\` in SearxNG's settings.yml) or it needs a key`
      : `rejected the API key (HTTP ${res.status}): the operator must set a valid CODEHOP_SEARCH_API_KEY`;
  }
  if (res.status === 429) return "is rate-limiting requests (HTTP 429): wait and search again";
  return `answered HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ""}`;
}

/**
 * The search provider `settings` choose. Without an endpoint (a SearxNG whose address is not set)
 * or a required key, searches fail with a `provider` WebError saying what to configure — the
 * provider itself can be built, so an app starts without web search configured.
 */
export function createSearchProvider(settings: WebSettings): SearchProvider {
  const name = settings.searchProvider;
  const adapter = ADAPTERS[name];
  const endpoint = settings.searchUrl ?? SEARCH_ENDPOINTS[name] ?? "";
  const policy: HttpPolicy = {
    timeoutMs: settings.searchTimeoutMs,
    maxBytes: MAX_SEARCH_BYTES,
    maxRedirects: settings.maxRedirects,
    userAgent: "codehop (web search)",
  };
  const fail = (why: string, cause?: unknown): never => {
    throw new WebError("provider", `Web search is unavailable: ${why}.`, { cause });
  };
  return {
    name,
    endpoint,
    async search(query, options = {}) {
      const q = query.trim();
      if (!q) throw new WebError("bad_url", "The search query is empty: say what to search for.");
      if (!endpoint)
        fail(
          `no ${name} address is configured (the operator sets CODEHOP_SEARCH_URL, e.g. http://localhost:8888 for a SearxNG, or another CODEHOP_SEARCH_PROVIDER)`,
        );
      if (adapter.needsKey && !settings.searchApiKey)
        fail(`${name} needs an API key (the operator sets CODEHOP_SEARCH_API_KEY)`);
      const limit = Math.max(1, Math.min(options.limit ?? settings.searchResults, 20));
      const req = adapter.request(q, limit, settings, endpoint);
      let res: HttpResponse;
      try {
        res = await httpRequest(
          req.url,
          { method: req.method, headers: req.headers, body: req.body },
          policy,
          options.signal,
        );
      } catch (err) {
        if (options.signal?.aborted) throw err;
        return fail(
          `the ${name} provider at ${endpoint} did not answer (${(err as Error).message})`,
          err,
        );
      }
      if (res.status < 200 || res.status >= 300)
        fail(`the ${name} provider ${statusProblem(name, res)}`);
      let json: unknown;
      try {
        json = JSON.parse(Buffer.from(res.bytes).toString("utf8"));
      } catch (err) {
        fail(
          `the ${name} provider at ${endpoint} answered something that is not JSON (${res.mediaType ?? "no content type"})${name === "searxng" ? "; is `json` in SearxNG's search.formats?" : ""}`,
          err,
        );
      }
      if (typeof json !== "object" || json === null || Array.isArray(json))
        fail(`the ${name} provider answered JSON of an unexpected shape`);
      const read = adapter.read(json as Record<string, unknown>);
      return { query: q, ...read, results: read.results.slice(0, limit) };
    },
  };
}

/**
 * A search's results as the agent reads them: numbered Markdown links with date and snippet (the
 * GAIA submission's layout), the provider's direct answer first, or a line saying nothing was
 * found and what to try.
 */
export function formatSearchResults(response: SearchResponse): string {
  const { query, answer, results } = response;
  if (!results.length && !answer)
    return `No results for '${query}'. Try fewer or different words, or a more general query.`;
  const lines = [`## Search results for '${query}'`];
  if (answer) lines.push("", `Direct answer: ${answer}`);
  results.forEach((r, i) => {
    lines.push(
      "",
      `${i + 1}. [${r.title}](${r.url})`,
      ...(r.date ? [`Date: ${r.date}`] : []),
      ...(r.snippet ? [r.snippet] : []),
    );
  });
  return lines.join("\n");
}
