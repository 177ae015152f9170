import Fastify from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openSourceFor, sourceFromConfig } from "../../src/apps/common/knowledge-source.ts";
import { MultiSource } from "../../src/apps/common/multi-source.ts";
import {
  credibilityOf,
  DEFAULT_WEB_RULES,
  pageKey,
  rankResults,
} from "../../src/apps/common/web-ranking.ts";
import { openWebSource, WebSource } from "../../src/apps/common/web-source.ts";
import { research } from "../../src/apps/research/app.ts";
import { researchResponder } from "../../src/apps/research/demo-trajectories.ts";
import { loadAppConfig } from "../../src/runs/config.ts";
import { createSearchProvider, resolveWebSettings, WebError } from "../../src/web/index.ts";
import { readEnv } from "../../src/config/env.ts";
import { WebTestServer } from "../../src/testing/web-test-server.ts";
import { closeChromiumBrowsers } from "../../src/web/chromium.ts";
import { jsPages } from "../web/js-site.ts";
import { runCli } from "../app/cli-helpers.ts";
import { useDemoWorld } from "../app/fixtures.ts";
import {
  CORPUS_Q,
  WEB_Q1,
  WEB_Q2,
  WEB_TOPIC,
  webResearchScript,
  ZSTD_SITE,
} from "./web-fixture.ts";

// Research on the open web, offline: a local website and a local SearxNG-compatible search API
// (src/testing/web-test-server.ts) behind the real search-provider port and text browser; the
// research team's agents and pipeline steps are scripted (test/research/web-fixture.ts).

let script = webResearchScript();
const world = useDemoWorld("codehop-research-web-", {
  responder: () => (req, ctx) => researchResponder(script)(req, ctx),
});
let site: WebTestServer;
beforeAll(async () => {
  site = await WebTestServer.start({ pages: { ...ZSTD_SITE, ...jsPages } });
});
afterAll(async () => {
  await closeChromiumBrowsers();
  await site?.close();
});

/** Web settings reaching the local site (a loopback address: allowed here by the operator). */
const webConfig = () => ({
  settings: { searchUrl: `${site.origin}/searxng`, allowPrivateAddresses: true },
});

describe("ranking search results (the documented rule set)", () => {
  const r = (url: string, title = url, snippet = "") => ({ url, title, snippet });

  it("puts primary sources first, reference works next, user-generated sites last", () => {
    // Equally relevant titles, in the reverse of credibility order from the provider.
    const title = "zstd compression speed";
    const { results } = rankResults(
      title,
      [
        r("https://www.reddit.com/r/compression/comments/1", title),
        r("https://blog.example.com/post", title),
        r("https://en.wikipedia.org/wiki/Zstd", title),
        r("https://www.nist.gov/study", title),
        r("https://zstd.net/", title),
      ],
      DEFAULT_WEB_RULES,
    );
    expect(results.map((x) => [x.host, x.credibility])).toEqual([
      ["www.nist.gov", "primary"],
      ["zstd.net", "primary"],
      ["en.wikipedia.org", "reference"],
      ["blog.example.com", "general"],
      ["www.reddit.com", "user_generated"],
    ]);
    expect(credibilityOf("https://www.ox.ac.uk/x", "q", DEFAULT_WEB_RULES)).toBe("primary");
    expect(credibilityOf("https://www.rfc-editor.org/rfc/rfc8878", "q", DEFAULT_WEB_RULES)).toBe(
      "primary",
    );
  });

  it("drops deny-listed domains (with their subdomains), promotes allow-listed ones, folds duplicates", () => {
    const { results, denied, folded } = rankResults(
      "zstd",
      [
        r("https://spam.example/zstd", "zstd"),
        r("https://cdn.spam.example/zstd", "zstd"),
        r("https://blog.example.com/zstd", "zstd"),
        r("http://www.blog.example.com/zstd/?utm_source=x#top", "zstd again"),
        r("https://m.blog.example.com/zstd/index.html", "zstd mobile"),
        r("https://docs.trusted.example/zstd", "zstd docs"),
      ],
      { ...DEFAULT_WEB_RULES, denyDomains: ["spam.example"], allowDomains: ["trusted.example"] },
    );
    expect(denied).toBe(2);
    expect(folded).toBe(2);
    expect(results.map((x) => x.url)).toEqual([
      "https://docs.trusted.example/zstd",
      "https://blog.example.com/zstd",
    ]);
    expect(pageKey("https://WWW.Example.com/a/?b=1&utm_medium=x&a=2#f")).toBe(
      "example.com/a?a=2&b=1",
    );
  });

  it("keeps at most maxPerDomain results of one host ahead of other hosts", () => {
    const { results } = rankResults(
      "zstd",
      [
        r("https://a.example/1", "zstd 1"),
        r("https://a.example/2", "zstd 2"),
        r("https://a.example/3", "zstd 3"),
        r("https://b.example/1", "other"),
      ],
      DEFAULT_WEB_RULES,
    );
    expect(results.map((x) => x.url)).toEqual([
      "https://a.example/1",
      "https://a.example/2",
      "https://b.example/1",
      "https://a.example/3",
    ]);
  });
});

describe("the web as a knowledge source", () => {
  it("searches through the provider, reads a page with the text browser, cites URL, title and position", async () => {
    const source = openWebSource(webConfig());
    try {
      const hits = await source.search("Zstandard released");
      expect(hits[0]).toMatchObject({ title: "Zstandard", url: site.url("/zstd") });
      expect(hits[0].summary).toMatch(/^\(127\.0\.0\.1\) /);
      const { lookup, passages } = await source.retrievePassages("Zstandard", "released 2016", {
        k: 2,
      });
      expect(lookup.status).toBe("found");
      expect(passages[0]).toMatchObject({
        title: "Zstandard",
        section: "History",
        docId: site.url("/zstd"),
      });
      expect(passages[0].id).toMatch(new RegExp(`^${site.url("/zstd")}#\\d+$`));
      expect(passages[0].position).toEqual({
        index: Number(passages[0].id!.split("#")[1]) + 1,
        of: expect.any(Number),
      });
      expect(passages[0].text).toContain("Yann Collet");
      // Read once: a second retrieval of the same page fetches nothing.
      const fetched = site.hits("/zstd");
      await source.retrievePassages("Zstandard", "speed");
      expect(site.hits("/zstd")).toBe(fetched);
      expect(source.pagesRead).toBe(1);
    } finally {
      await source.close();
    }
  });

  it("a page that cannot be read is an error the agent reads; a denied domain is refused; an unknown title is searched for", async () => {
    site.setPage("/gone", { body: "<h1>gone</h1>", status: 404, title: "Gone page" });
    const source = openWebSource({ ...webConfig(), denyDomains: ["localhost"] });
    try {
      await expect(source.retrievePassages(site.url("/gone"), "x")).rejects.toSatisfy(
        (e: unknown) => e instanceof WebError && /404/.test((e as Error).message),
      );
      const other = site.url("/zstd").replace("127.0.0.1", "localhost");
      await expect(source.getPage(other)).rejects.toThrow(/does not allow research to read/);
      // A fresh source (a resumed run) finds "Zstandard" by searching for it.
      const found = await source.getPage("Zstandard frame format");
      expect(found.status).toBe("found");
      const none = await source.getPage("No such page anywhere qqq");
      expect(none.status).toBe("missing");
    } finally {
      await source.close();
    }
  });

  it("a search provider that is down is an error the agent reads, naming the provider", async () => {
    site.searchDown = 503;
    const source = openWebSource(webConfig());
    try {
      await expect(source.search("zstd")).rejects.toThrow(/searxng provider answered HTTP 503/);
    } finally {
      site.searchDown = undefined;
      await source.close();
    }
  });

  it("ranks what a SearxNG answers: duplicates folded, deny list applied, before any page is read", async () => {
    // A SearxNG answering the same page under two addresses, and a page on a denied host.
    const searx = Fastify();
    searx.get("/search", async () => ({
      results: [
        { url: site.url("/zstd?utm_source=feed"), title: "Zstandard", content: "zstd" },
        { url: site.url("/zstd"), title: "Zstandard", content: "zstd" },
        {
          url: site.url("/brotli").replace("127.0.0.1", "localhost"),
          title: "Brotli",
          content: "x",
        },
      ],
    }));
    const address = await searx.listen({ host: "127.0.0.1", port: 0 });
    const source = new WebSource({
      search: createSearchProvider(resolveWebSettings({ searchUrl: address })),
      loader: {
        mode: "text",
        load: () => Promise.reject(new Error("no page is read while ranking")),
        close: async () => {},
      },
      rules: { denyDomains: ["localhost"] },
    });
    try {
      const hits = await source.search("zstd");
      expect(hits.map((h) => h.url)).toEqual([site.url("/zstd?utm_source=feed")]);
      expect(source.pagesRead).toBe(0);
    } finally {
      await source.close();
      await searx.close();
    }
  });
});

// Debian's Chromium (CI installs it; test/web/chromium.test.ts fails CI without it).
const CHROMIUM = "/usr/bin/chromium";
describe.skipIf(!existsSync(CHROMIUM))(
  "web research through the operator's browser setting",
  () => {
    const jsUrl = () => site.url("/js-only");
    const browse = (browser: "text" | "chromium" | "auto") =>
      openWebSource({
        settings: { ...webConfig().settings, browser, chromiumPath: CHROMIUM, timeoutMs: 30_000 },
      });

    it("text reads nothing of a page its script fills in; auto and chromium read it in Chromium", async () => {
      const text = browse("text");
      try {
        // The text browser sees the page as served: "Loading…" and the noscript notice.
        const { passages } = await text.retrievePassages(jsUrl(), "first launch");
        expect(passages.map((p) => p.text).join(" ")).not.toContain("14 March");
      } finally {
        await text.close();
      }
      for (const mode of ["auto", "chromium"] as const) {
        const source = browse(mode);
        try {
          const { lookup, passages } = await source.retrievePassages(jsUrl(), "first launch pad");
          expect(lookup.status).toBe("found");
          expect(passages.map((p) => p.text).join(" ")).toContain("14 March from pad 39A");
          expect(passages[0].docId).toBe(jsUrl());
          expect(source.pagesRead).toBe(1);
        } finally {
          await source.close();
        }
      }
    });

    it("a configuration naming no browser takes CODEHOP_BROWSER (default auto: Chromium for the JavaScript page)", async () => {
      const saved = process.env.CODEHOP_BROWSER;
      try {
        delete process.env.CODEHOP_BROWSER;
        const auto = openWebSource(webConfig());
        try {
          const { passages } = await auto.retrievePassages(jsUrl(), "weather satellite");
          expect(passages.map((p) => p.text).join(" ")).toContain("weather satellite");
        } finally {
          await auto.close();
        }
        process.env.CODEHOP_BROWSER = "text";
        const text = openWebSource(webConfig());
        try {
          const { passages } = await text.retrievePassages(jsUrl(), "weather satellite");
          expect(passages.map((p) => p.text).join(" ")).not.toContain("weather satellite");
        } finally {
          await text.close();
        }
      } finally {
        if (saved === undefined) delete process.env.CODEHOP_BROWSER;
        else process.env.CODEHOP_BROWSER = saved;
      }
    });
  },
);

describe("codehop research --source web", { timeout: 180_000 }, () => {
  it("researches on the web: page readers read the pages, the report cites URL, title and position", async () => {
    script = webResearchScript();
    const result = await research(WEB_TOPIC, {
      config: world.config({ sources: ["web"], web: webConfig() }),
      threadId: "web-api",
    });
    expect(result.status).toBe("final_answer");
    expect(result.questions.map((q) => [q.question, q.status])).toEqual([
      [WEB_Q1, "answered"],
      [WEB_Q2, "answered"],
    ]);
    expect(result.citations.length).toBeGreaterThan(0);
    for (const c of result.citations) {
      expect(c.source).toBe("web");
      expect(c.url).toMatch(new RegExp(`^${site.origin}/`));
      expect(c.passage_id).toBe(`${c.url}#${c.position!.index - 1}`);
      expect(result.report).toContain(
        `**${c.title}**, section "${c.section}" — passage ${c.position!.index} of ${c.position!.of} (web) <${c.url}>`,
      );
      // The cited text is the page's own.
      const page = ZSTD_SITE[new URL(c.url!).pathname].body as string;
      expect(page.replace(/\s+/g, " ")).toContain(c.text.replace(/\s+/g, " ").slice(0, 40));
    }
    expect(result.report).toContain("Zstandard was released in 2016 by Yann Collet");
    expect(result.verification).toMatchObject({ dropped: 0 });
  });

  it("mixes sources (--source web,corpus) through the CLI: each citation names its own source", async () => {
    script = webResearchScript({ corpus: true });
    const r = await runCli(
      ["research", WEB_TOPIC, "--source", "web,corpus", "--corpus", world.corpus, "--json"],
      world.cliEnv({
        CODEHOP_SEARCH_URL: `${site.origin}/searxng`,
      }),
    );
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result.questions.map((q: any) => q.status)).toEqual([
      "answered",
      "answered",
      "answered",
    ]);
    const bySource = new Set(result.citations.map((c: any) => c.source));
    expect(bySource).toEqual(new Set(["web", "corpus"]));
    const corpus = result.citations.find((c: any) => c.source === "corpus");
    expect(corpus).toMatchObject({ title: "Eiffel Tower" });
    expect(corpus.position).toBeUndefined();
    expect(result.report).toContain("The Eiffel Tower was finished in March 1889");
    expect(result.questions.map((q: any) => q.question)).toContain(CORPUS_Q);
  });

  it("refuses a bad --source and a corpus source without a corpus, before anything runs", async () => {
    const before = world.server.requests.length;
    const bad = await runCli(["research", WEB_TOPIC, "--source", "web,moon"], world.cliEnv());
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain(
      '--source takes web, wikipedia, corpus or a comma list of them (e.g. web,corpus), not "moon"',
    );
    const noCorpus = await runCli(["research", WEB_TOPIC, "--source", "corpus"], world.cliEnv());
    expect(noCorpus.code).toBe(2);
    expect(noCorpus.stderr).toContain("The corpus source needs a corpus DB");
    expect(world.server.requests.length).toBe(before);
  });

  it("CODEHOP_SOURCES chooses the sources of runs that name none: a mixed source", async () => {
    const env = readEnv({ CODEHOP_ENV_FILE: "none", CODEHOP_SOURCES: "web,corpus" });
    const config = loadAppConfig({ corpus: world.corpus, web: webConfig() }, env);
    expect(config.sources).toEqual(["web", "corpus"]);
    expect(() =>
      loadAppConfig({}, readEnv({ CODEHOP_ENV_FILE: "none", CODEHOP_SOURCES: "wiki" })),
    ).toThrow(/CODEHOP_SOURCES takes web, wikipedia, corpus/);
    const source = await openSourceFor(config);
    try {
      expect(source).toBeInstanceOf(MultiSource);
      const hits = await source.search("Zstandard Eiffel Tower");
      expect(hits.some((h) => h.url?.startsWith(site.origin))).toBe(true);
      expect(hits.some((h) => h.title === "Eiffel Tower")).toBe(true);
    } finally {
      await source.close();
    }
  });

  it("a served run chooses the operator's web source by name (context.source); the settings stay the operator's", async () => {
    const dir = mkdtempSync(join(tmpdir(), "codehop-web-named-"));
    const file = join(dir, "codehop.config.json");
    writeFileSync(file, JSON.stringify({ knowledgeSources: { web: { sources: ["web"] } } }));
    const saved = { ...process.env };
    Object.assign(process.env, {
      CODEHOP_CONFIG: file,
      CODEHOP_SEARCH_URL: `${site.origin}/searxng`,
      CODEHOP_WEB_ALLOW_PRIVATE_URLS: "1",
      CODEHOP_WEB_DENY_DOMAINS: "example.org",
    });
    try {
      const source = sourceFromConfig({ configurable: { source: "web" } } as any, {});
      expect(source.kind).toBe("web");
      const [top] = await source.search("Zstandard released");
      expect(top.url).toBe(site.url("/zstd"));
      const { passages } = await source.retrievePassages(top.title, "released 2016");
      expect(passages[0].id).toMatch(/#\d+$/);
    } finally {
      for (const k of [
        "CODEHOP_CONFIG",
        "CODEHOP_SEARCH_URL",
        "CODEHOP_WEB_ALLOW_PRIVATE_URLS",
        "CODEHOP_WEB_DENY_DOMAINS",
      ])
        if (saved[k] === undefined) delete process.env[k];
        else process.env[k] = saved[k];
    }
  });
});
