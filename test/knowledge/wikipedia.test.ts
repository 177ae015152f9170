import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { CodehopError } from "../../src/errors.ts";
import { MediaWikiTestServer } from "../../src/testing/mediawiki-test-server.ts";
import { openKnowledgeSource } from "../../src/store/open.ts";
import { WikipediaSource } from "../../src/store/wikipedia-source.ts";
import { tempDir } from "./helpers.ts";

const tmp = tempDir();
let server: MediaWikiTestServer;
const sources: WikipediaSource[] = [];

function source(extra: ConstructorParameters<typeof WikipediaSource>[0] = {}): WikipediaSource {
  const s = new WikipediaSource({ apiUrl: server.apiUrl, retryDelayMs: 5, ...extra });
  sources.push(s);
  return s;
}

beforeAll(async () => {
  server = await MediaWikiTestServer.start([
    {
      title: "Eiffel Tower",
      text: "The Eiffel Tower is a lattice tower in Paris.\n\n## Construction\nBuilt from 1887 to 1889.\n\n## Height\nIt is 330 m tall.",
      redirects: ["Tour Eiffel"],
    },
    { title: "Tokyo Tower", text: "Tokyo Tower is a tower in Tokyo, completed in 1958." },
    {
      title: "Mercury",
      text: "Mercury may refer to:",
      disambiguation: ["Mercury (planet)", "Mercury (element)"],
    },
    { title: "Mercury (planet)", text: "Mercury is the smallest planet." },
  ]);
});
afterEach(async () => {
  while (sources.length) await sources.pop()!.close();
});
afterAll(async () => {
  await server.stop();
  tmp.cleanup();
});

describe("online Wikipedia source (MediaWiki API)", () => {
  it("search returns titles with intro summaries, best first", async () => {
    const hits = await source().search("Eiffel tower");
    expect(hits[0]).toMatchObject({
      title: "Eiffel Tower",
      summary: "The Eiffel Tower is a lattice tower in Paris.",
    });
    expect(hits[0].url).toContain("Eiffel_Tower");
    expect(hits.map((h) => h.title)).toContain("Tokyo Tower");
    const req = server.requests.at(-1)!.params;
    expect(req).toMatchObject({
      action: "query",
      generator: "search",
      gsrsearch: "Eiffel tower",
      format: "json",
      formatversion: "2",
    });
  });

  it("getPage follows redirects and returns the full plain text with section headings", async () => {
    const lookup = await source().getPage("Tour Eiffel");
    expect(lookup.status).toBe("found");
    if (lookup.status !== "found") return;
    expect(lookup.page.title).toBe("Eiffel Tower");
    expect(lookup.page.text).toContain("== Construction ==");
    expect(lookup.page.source).toBe("wikipedia");
  });

  it("retrievePassages ranks a fetched page's passages and keeps wiki-style section headings", async () => {
    const { passages } = await source().retrievePassages("Eiffel Tower", "how tall", { k: 2 });
    expect(passages[0]).toMatchObject({
      title: "Eiffel Tower",
      section: "Height",
      text: "It is 330 m tall.",
    });
    expect(passages).toHaveLength(2);
  });

  it("a disambiguation page lists the pages it points to", async () => {
    expect(await source().getPage("Mercury")).toEqual({
      status: "disambiguation",
      title: "Mercury",
      options: ["Mercury (planet)", "Mercury (element)"],
    });
  });

  it("a missing page comes back with search-based suggestions", async () => {
    const lookup = await source().getPage("Tokyo Towers of Paris");
    expect(lookup.status).toBe("missing");
    if (lookup.status === "missing")
      expect(lookup.suggestions).toEqual(expect.arrayContaining(["Tokyo Tower", "Eiffel Tower"]));
  });

  it("retries after a 500 and succeeds", async () => {
    server.failNext(1, 500);
    const before = server.requests.length;
    const hits = await source().search("Tokyo");
    expect(hits[0].title).toBe("Tokyo Tower");
    expect(server.requests.slice(before).map((r) => r.status)).toEqual([500, 200]);
  });

  it("retries after a timeout", async () => {
    server.failNext(1, 200, 400);
    const s = source({ timeoutMs: 100 });
    expect((await s.search("Tokyo Tower"))[0].title).toBe("Tokyo Tower");
    expect(s.requestCount).toBe(2);
  });

  it("fails with SOURCE_UNAVAILABLE after the last retry", async () => {
    server.failNext(3, 503);
    const err = await source({ retries: 2 })
      .search("anything")
      .catch((e) => e);
    expect(CodehopError.isInstance(err) && err.code).toBe("CODEHOP_SOURCE_UNAVAILABLE");
    expect(String(err.message)).toMatch(/after 3 attempts: HTTP 503/);
  });

  it("does not retry a client error (HTTP 404): fails at once with SOURCE_UNAVAILABLE", async () => {
    server.failNext(1, 404);
    const s = source();
    const err = await s.getPage("Anything").catch((e) => e);
    expect(CodehopError.isInstance(err) && err.code).toBe("CODEHOP_SOURCE_UNAVAILABLE");
    expect(err.message).toMatch(/HTTP 404/);
    expect(s.requestCount).toBe(1);
  });

  it("the SQLite page cache prevents a second fetch, also across processes (new source, same file)", async () => {
    const cacheDb = join(tmp.dir, "cache", "wikipedia-cache.db");
    const first = source({ cacheDb });
    await first.getPage("Eiffel Tower");
    await first.search("Eiffel");
    expect(first.requestCount).toBe(2);
    await first.getPage("eiffel tower");
    await first.retrievePassages("Eiffel Tower", "height");
    expect(first.requestCount).toBe(2);
    await first.close();
    const before = server.requests.length;
    const second = source({ cacheDb });
    const lookup = await second.getPage("Eiffel Tower");
    await second.search("Eiffel");
    expect(lookup.status).toBe("found");
    expect(second.requestCount).toBe(0);
    expect(server.requests.length).toBe(before);
  });

  it("search marks disambiguation pages in their summary", async () => {
    const hits = await source().search("Mercury");
    const disambig = hits.find((h) => h.title === "Mercury");
    expect(disambig?.summary).toMatch(/^\(disambiguation page\)/);
    expect(hits.find((h) => h.title === "Mercury (planet)")?.summary).toBe(
      "Mercury is the smallest planet.",
    );
  });

  it("expired cache entries are fetched again", async () => {
    const cacheDb = join(tmp.dir, "ttl.db");
    const s = source({ cacheDb, cacheTtlMs: 1 });
    await s.getPage("Tokyo Tower");
    await new Promise((r) => setTimeout(r, 10));
    await s.getPage("Tokyo Tower");
    expect(s.requestCount).toBe(2);
  });

  it("trusts a cached 'missing page' for a day, a found page for the whole TTL", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      const s = source({ cacheDb: join(tmp.dir, "missing-ttl.db") });
      await s.getPage("Tokyo Tower");
      await s.getPage("Not a page at all");
      const afterFirst = s.requestCount;
      vi.setSystemTime(Date.now() + 25 * 3600 * 1000);
      await s.getPage("Tokyo Tower");
      expect(s.requestCount).toBe(afterFirst);
      expect((await s.getPage("Not a page at all")).status).toBe("missing");
      expect(s.requestCount).toBeGreaterThan(afterFirst);
    } finally {
      vi.useRealTimers();
    }
  });

  it("concurrent lookups of one page share a single request", async () => {
    const s = source();
    const [a, b, c] = await Promise.all([
      s.getPage("Tokyo Tower"),
      s.getPage("tokyo tower"),
      s.getPage("Tokyo_Tower"),
    ]);
    expect(a).toEqual(b);
    expect(b).toEqual(c);
    expect(s.requestCount).toBe(1);
  });

  it("searchPassages ranks passages from the top pages together", async () => {
    const passages = await source().searchPassages("tower completed 1958", { k: 2 });
    expect(passages[0]).toMatchObject({
      title: "Tokyo Tower",
      text: "Tokyo Tower is a tower in Tokyo, completed in 1958.",
    });
  });

  it("openKnowledgeSource picks Wikipedia when no corpus is given", async () => {
    const s = openKnowledgeSource({ wikipediaApi: server.apiUrl });
    expect(s.kind).toBe("wikipedia");
    expect((await s.search("Mercury planet"))[0].title).toMatch(/Mercury/);
    await s.close();
  });

  it("rejects an invalid API URL with CONFIG_INVALID", () => {
    expect(() => new WikipediaSource({ apiUrl: "not a url" })).toThrow(/not a valid URL/);
  });
});
