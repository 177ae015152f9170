import Fastify, { type FastifyInstance, type FastifyReply } from "fastify";
import { queryTokens } from "../store/text.ts";

/**
 * A local website plus the web APIs the assistant's tools speak, on one port, for tests, the
 * offline demo and benchmarks — so the real HTTP clients, browsers and parsers run and only the
 * outside world is simulated:
 * - the site: any pages given (HTML, text, JSON, files), with delays, statuses and headers;
 *   `/__huge` streams an endless body, `/__slow` never answers, `/__loop` redirects to itself;
 * - search APIs answering from the site's HTML pages (words of the query found in title or text),
 *   each the way its provider does: SearxNG `GET /searxng/search?q=&format=json` (403 without
 *   `format=json`, as a SearxNG whose JSON format is off), Brave `GET /brave/res/v1/web/search`
 *   (`X-Subscription-Token`), Tavily `POST /tavily/search` (`Authorization: Bearer`), Serper
 *   `POST /serper/search` (`X-API-KEY`); a wrong key is 401;
 * - a web archive: the Wayback availability API `GET /wayback/available?url=&timestamp=` (the
 *   snapshot closest to the timestamp) and the snapshots at `/web/<timestamp>/<url>`.
 */

/** A page of the site. */
export interface SitePage {
  /** The body (a string is sent as UTF-8). */
  body: string | Uint8Array;
  /** Content-Type (default text/html; charset=utf-8). */
  type?: string;
  /** HTTP status (default 200). */
  status?: number;
  /** Extra headers. */
  headers?: Record<string, string>;
  /** Wait before answering (ms). */
  delayMs?: number;
  /** Title for search results (default: the HTML <title>). */
  title?: string;
  /** Left out of search results. */
  unlisted?: boolean;
}

/** An archived snapshot of a URL (the archive answers the one closest to the asked timestamp). */
export interface ArchivedSnapshot {
  /** The archived page's original URL. */
  url: string;
  /** YYYYMMDDhhmmss. */
  timestamp: string;
  /** The snapshot's HTML. */
  html: string;
}

/** The API keys the search endpoints require (unset: any key, none for SearxNG). */
export interface SearchKeys {
  brave?: string;
  tavily?: string;
  serper?: string;
}

/** A request as logged. */
export interface LoggedWebRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
}

const tokens = (text: string) => new Set(queryTokens(text));

function htmlTitle(html: string): string {
  return /<title[^>]*>([^<]*)<\/title>/i.exec(html)?.[1]?.trim() ?? "";
}

function plainText(html: string): string {
  return html
    .replace(/<(script|style)[\s\S]*?<\/\1>/gi, " ")
    .replace(/<[^>]+>/g, " ")
    .replace(/\s+/g, " ")
    .trim();
}

/** The local web (see the module comment). */
export class WebTestServer {
  /** Every request, in order. */
  readonly requests: LoggedWebRequest[] = [];
  /** http://127.0.0.1:PORT */
  origin = "";
  private readonly app: FastifyInstance;
  /** Search APIs answer this status (and nothing else) while set: a provider that is down. */
  searchDown: number | undefined;
  /**
   * Answers a site request before the pages do when it returns a page (e.g. content served only to
   * requests carrying a cookie).
   */
  onRequest:
    | ((req: {
        url: string;
        headers: Record<string, string | string[] | undefined>;
      }) => SitePage | undefined)
    | undefined;

  private constructor(
    private readonly pages: Map<string, SitePage>,
    private readonly snapshots: ArchivedSnapshot[],
    private readonly keys: SearchKeys,
  ) {
    this.app = Fastify({ logger: false, bodyLimit: 1024 * 1024, forceCloseConnections: true });
    this.app.addHook("onRequest", async (req) => {
      this.requests.push({ method: req.method, path: req.url, headers: { ...req.headers } });
    });
    this.app.addHook("preHandler", async (req) => {
      if (req.body !== undefined) this.requests[this.requests.length - 1].body = req.body;
    });
    this.app.get("/searxng/search", async (req, reply) => {
      const q = req.query as Record<string, string>;
      if (this.searchDown) return reply.code(this.searchDown).send("down");
      if (q.format !== "json")
        return reply.code(403).type("text/html").send("<h1>403 Forbidden</h1>");
      return {
        query: q.q,
        number_of_results: 0,
        results: this.search(q.q ?? "").map((p) => ({
          url: p.url,
          title: p.title,
          content: p.snippet,
          engine: "local",
          publishedDate: null,
        })),
        answers: [],
        infoboxes: [],
      };
    });
    this.app.get("/brave/res/v1/web/search", async (req, reply) => {
      if (this.searchDown) return reply.code(this.searchDown).send("down");
      if (!this.keyOk(this.keys.brave, req.headers["x-subscription-token"]))
        return reply
          .code(401)
          .send({ type: "ErrorResponse", error: { code: "SUBSCRIPTION_TOKEN_INVALID" } });
      const q = req.query as Record<string, string>;
      const count = Number(q.count ?? 20);
      return {
        type: "search",
        query: { original: q.q },
        web: {
          type: "search",
          results: this.search(q.q ?? "")
            .slice(0, count)
            .map((p) => ({
              title: p.title,
              url: p.url,
              description: p.snippet,
              age: "May 1, 2024",
            })),
        },
      };
    });
    this.app.post("/tavily/search", async (req, reply) => {
      if (this.searchDown) return reply.code(this.searchDown).send("down");
      const auth = String(req.headers.authorization ?? "").replace(/^Bearer\s+/i, "");
      if (!this.keyOk(this.keys.tavily, auth))
        return reply.code(401).send({ detail: { error: "Unauthorized" } });
      const body = req.body as { query?: string; max_results?: number };
      return {
        query: body.query,
        answer: null,
        results: this.search(body.query ?? "")
          .slice(0, body.max_results ?? 5)
          .map((p) => ({ title: p.title, url: p.url, content: p.snippet, score: 0.9 })),
        response_time: 0.1,
      };
    });
    this.app.post("/serper/search", async (req, reply) => {
      if (this.searchDown) return reply.code(this.searchDown).send("down");
      if (!this.keyOk(this.keys.serper, req.headers["x-api-key"]))
        return reply.code(403).send({ message: "Unauthorized.", statusCode: 403 });
      const body = req.body as { q?: string; num?: number };
      return {
        searchParameters: { q: body.q, type: "search" },
        organic: this.search(body.q ?? "")
          .slice(0, body.num ?? 10)
          .map((p, i) => ({ title: p.title, link: p.url, snippet: p.snippet, position: i + 1 })),
      };
    });
    this.app.get("/wayback/available", async (req) => {
      const q = req.query as Record<string, string>;
      const wanted = (q.url ?? "").replace(/^https?:\/\//, "").replace(/\/$/, "");
      const candidates = this.snapshots.filter(
        (s) => s.url.replace(/^https?:\/\//, "").replace(/\/$/, "") === wanted,
      );
      if (!candidates.length) return { url: q.url, archived_snapshots: {} };
      const target = Number((q.timestamp ?? "").padEnd(14, "0").slice(0, 14)) || Date.now();
      const best = candidates.reduce((a, b) =>
        Math.abs(Number(a.timestamp) - target) <= Math.abs(Number(b.timestamp) - target) ? a : b,
      );
      return {
        url: q.url,
        archived_snapshots: {
          closest: {
            status: "200",
            available: true,
            url: `${this.origin}/web/${best.timestamp}/${best.url}`,
            timestamp: best.timestamp,
          },
        },
      };
    });
    this.app.get("/web/*", async (req, reply) => {
      const rest = (req.params as { "*": string })["*"];
      const cut = rest.indexOf("/");
      const timestamp = rest.slice(0, cut);
      const url = rest.slice(cut + 1);
      const snap = this.snapshots.find((s) => s.timestamp === timestamp && s.url === url);
      if (!snap) return reply.code(404).type("text/html").send("<h1>Not in the archive</h1>");
      return reply.type("text/html; charset=utf-8").send(snap.html);
    });
    this.app.get("/__huge", async (_req, reply) => {
      const { Readable } = await import("node:stream");
      const chunk = Buffer.alloc(64 * 1024, "a");
      let sent = 0;
      const stream = new Readable({
        read() {
          sent += chunk.length;
          this.push(sent > 512 * 1024 * 1024 ? null : chunk);
        },
      });
      return reply.type("text/plain").send(stream);
    });
    this.app.get("/__slow", async () => new Promise(() => {}));
    this.app.get("/__loop", async (_req, reply) => reply.redirect("/__loop"));
    this.app.get("/*", async (req, reply) =>
      this.serve(
        req.url.split("?")[0],
        reply,
        this.onRequest?.({ url: req.url, headers: req.headers }),
      ),
    );
  }

  /** Starts on a free port of 127.0.0.1. */
  static async start(
    options: {
      pages?: Record<string, SitePage>;
      snapshots?: ArchivedSnapshot[];
      keys?: SearchKeys;
    } = {},
  ): Promise<WebTestServer> {
    const server = new WebTestServer(
      new Map(Object.entries(options.pages ?? {})),
      options.snapshots ?? [],
      options.keys ?? {},
    );
    const address = await server.app.listen({ host: "127.0.0.1", port: 0 });
    server.origin = address.replace("localhost", "127.0.0.1");
    return server;
  }

  /** The absolute URL of a path of the site. */
  url(path: string): string {
    return `${this.origin}${path.startsWith("/") ? path : `/${path}`}`;
  }

  /** Adds or replaces a page. */
  setPage(path: string, page: SitePage): void {
    this.pages.set(path, page);
  }

  /** Requests to `path` so far (exact path with query). */
  hits(path: string): number {
    return this.requests.filter((r) => r.path === path).length;
  }

  async close(): Promise<void> {
    await this.app.close();
  }

  private keyOk(expected: string | undefined, given: unknown): boolean {
    if (typeof given !== "string" || !given) return false;
    return expected === undefined || given === expected;
  }

  /** Site HTML pages sharing a word with the query, most shared words first. */
  private search(query: string): Array<{ url: string; title: string; snippet: string }> {
    const q = tokens(query);
    const scored: Array<{ url: string; title: string; snippet: string; score: number }> = [];
    for (const [path, page] of this.pages) {
      if (page.unlisted || typeof page.body !== "string") continue;
      if (page.type && !page.type.startsWith("text/html")) continue;
      const title = page.title ?? htmlTitle(page.body);
      const text = plainText(page.body);
      const words = tokens(`${title} ${text}`);
      const score = [...q].filter((w) => words.has(w)).length;
      if (score) scored.push({ url: this.url(path), title, snippet: text.slice(0, 200), score });
    }
    return scored.sort((a, b) => b.score - a.score);
  }

  private async serve(path: string, reply: FastifyReply, override?: SitePage) {
    const page = override ?? this.pages.get(path);
    if (!page)
      return reply
        .code(404)
        .type("text/html")
        .send("<html><body><h1>404 Not Found</h1></body></html>");
    if (page.delayMs) await new Promise((r) => setTimeout(r, page.delayMs));
    reply.code(page.status ?? 200).type(page.type ?? "text/html; charset=utf-8");
    for (const [k, v] of Object.entries(page.headers ?? {})) reply.header(k, v);
    return reply.send(typeof page.body === "string" ? page.body : Buffer.from(page.body));
  }
}
