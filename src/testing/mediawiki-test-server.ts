import Fastify, { type FastifyInstance } from "fastify";
import { queryTokens, titleKey } from "../store/text.ts";

/** A page served by {@link MediaWikiTestServer}. */
export interface TestWikiPage {
  title: string;
  /** Plain text; Markdown "## Heading" lines are served as MediaWiki "== Heading ==" lines. */
  text: string;
  /** Makes this a disambiguation page pointing to these titles. */
  disambiguation?: string[];
  /** Titles redirecting here. */
  redirects?: string[];
}

/** A request as logged. */
export interface LoggedWikiRequest {
  params: Record<string, string>;
  status: number;
}

/**
 * A local HTTP server that answers the MediaWiki Action API calls {@link WikipediaSource} makes
 * (generator=search with extracts, titles= with extracts/pageprops/redirects, prop=links,
 * list=search), in formatversion=2 JSON. For tests and offline demos of the online path; faults
 * (HTTP errors, delays) are injected with {@link failNext}.
 */
export class MediaWikiTestServer {
  /** Every request received, in order. */
  readonly requests: LoggedWikiRequest[] = [];
  /** e.g. http://127.0.0.1:PORT/w/api.php */
  apiUrl = "";
  private readonly pages = new Map<string, TestWikiPage>();
  private readonly redirects = new Map<string, string>();
  private faults: { status: number; delayMs?: number }[] = [];
  private readonly app: FastifyInstance;

  private constructor(pages: TestWikiPage[]) {
    for (const p of pages) this.addPage(p);
    this.app = Fastify({ logger: false });
    this.app.get("/w/api.php", async (req, reply) => {
      const params = Object.fromEntries(
        Object.entries(req.query as Record<string, unknown>).map(([k, v]) => [k, String(v)]),
      );
      const fault = this.faults.shift();
      if (fault) {
        if (fault.delayMs) await new Promise((r) => setTimeout(r, fault.delayMs));
        this.requests.push({ params, status: fault.status });
        return reply
          .code(fault.status)
          .send(fault.status === 200 ? this.answer(params) : { error: "injected" });
      }
      this.requests.push({ params, status: 200 });
      return this.answer(params);
    });
  }

  /** Starts on a free port (127.0.0.1). */
  static async start(pages: TestWikiPage[]): Promise<MediaWikiTestServer> {
    const server = new MediaWikiTestServer(pages);
    const address = await server.app.listen({ host: "127.0.0.1", port: 0 });
    server.apiUrl = `${address}/w/api.php`;
    return server;
  }

  addPage(page: TestWikiPage): void {
    this.pages.set(titleKey(page.title), page);
    for (const r of page.redirects ?? []) this.redirects.set(titleKey(r), page.title);
  }

  /** The next `count` requests fail with `status` (after `delayMs`, e.g. to trigger a client timeout). */
  failNext(count: number, status = 500, delayMs?: number): void {
    for (let i = 0; i < count; i++) this.faults.push({ status, delayMs });
  }

  async stop(): Promise<void> {
    await this.app.close();
  }

  private resolve(title: string): { page?: TestWikiPage; redirect?: { from: string; to: string } } {
    const key = titleKey(title);
    const direct = this.pages.get(key);
    if (direct) return { page: direct };
    const target = this.redirects.get(key);
    if (target)
      return { page: this.pages.get(titleKey(target)), redirect: { from: title, to: target } };
    return {};
  }

  private render(page: TestWikiPage, params: Record<string, string>, index?: number) {
    const wikiText = page.text.replace(/^(#{2,6})[ \t]+(.+)$/gm, (_m, h: string, t: string) => {
      const eq = "=".repeat(h.length);
      return `${eq} ${t.trim()} ${eq}`;
    });
    const intro = wikiText.split(/\n==/)[0].trim();
    const out: Record<string, unknown> = {
      pageid: Math.abs(hash(page.title)),
      ns: 0,
      title: page.title,
      fullurl: `https://test.wiki/wiki/${encodeURIComponent(page.title.replace(/ /g, "_"))}`,
    };
    if (index !== undefined) out.index = index;
    if ((params.prop ?? "").includes("extracts")) out.extract = params.exintro ? intro : wikiText;
    if (page.disambiguation && (params.prop ?? "").includes("pageprops"))
      out.pageprops = { disambiguation: "" };
    if ((params.prop ?? "").includes("links"))
      out.links = (page.disambiguation ?? []).map((t) => ({ ns: 0, title: t }));
    return out;
  }

  private search(q: string, limit: number): TestWikiPage[] {
    const terms = queryTokens(q);
    return [...this.pages.values()]
      .map((p) => {
        const title = p.title.toLowerCase();
        const body = p.text.toLowerCase();
        const score = terms.reduce(
          (s, t) => s + (title.includes(t) ? 5 : 0) + (body.includes(t) ? 1 : 0),
          0,
        );
        return { p, score };
      })
      .filter((x) => x.score > 0)
      .sort((a, b) => b.score - a.score || a.p.title.localeCompare(b.p.title))
      .slice(0, limit)
      .map((x) => x.p);
  }

  private answer(params: Record<string, string>): unknown {
    if (params.action !== "query")
      return { error: { code: "badvalue", info: `Unrecognized action ${params.action}` } };
    if (params.list === "search") {
      return {
        batchcomplete: true,
        query: {
          search: this.search(params.srsearch ?? "", Number(params.srlimit ?? 10)).map((p) => ({
            ns: 0,
            title: p.title,
          })),
        },
      };
    }
    if (params.generator === "search") {
      const hits = this.search(params.gsrsearch ?? "", Number(params.gsrlimit ?? 10));
      if (hits.length === 0) return { batchcomplete: true };
      return {
        batchcomplete: true,
        query: { pages: hits.map((p, i) => this.render(p, params, i + 1)) },
      };
    }
    if (params.titles !== undefined) {
      const { page, redirect } = this.resolve(params.titles);
      if (!page)
        return {
          batchcomplete: true,
          query: { pages: [{ ns: 0, title: params.titles, missing: true }] },
        };
      return {
        batchcomplete: true,
        query: {
          ...(redirect ? { redirects: [redirect] } : {}),
          pages: [this.render(page, params)],
        },
      };
    }
    return { error: { code: "invalidparammix", info: "unsupported parameters" } };
  }
}

function hash(s: string): number {
  let h = 0;
  for (const c of s) h = (h * 31 + c.charCodeAt(0)) | 0;
  return h;
}
