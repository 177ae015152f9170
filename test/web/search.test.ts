import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readEnv } from "../../src/config/env.ts";
import { WebTestServer } from "../../src/testing/web-test-server.ts";
import {
  WEB_DEFAULTS,
  WebError,
  createSearchProvider,
  formatSearchResults,
  resolveWebSettings,
  webSettingsFromEnv,
  type SearchProviderName,
  type WebSettings,
} from "../../src/web/index.ts";
import { closedPort } from "./free-port.ts";
import { testSite } from "./site.ts";

// Each provider adapter against a local server that answers like that provider's API (method,
// path, auth header, JSON shape), over real HTTP.

let server: WebTestServer;
beforeAll(async () => {
  server = await WebTestServer.start({
    ...testSite(),
    keys: { brave: "brave-key", tavily: "tvly-key", serper: "serper-key" },
  });
});
afterAll(() => server.close());

function settings(provider: SearchProviderName, extra: Partial<WebSettings> = {}): WebSettings {
  const paths = {
    searxng: "/searxng",
    brave: "/brave/res/v1/web/search",
    tavily: "/tavily/search",
    serper: "/serper/search",
  };
  const keys = { searxng: undefined, brave: "brave-key", tavily: "tvly-key", serper: "serper-key" };
  return resolveWebSettings({
    searchProvider: provider,
    searchUrl: server.url(paths[provider]),
    ...(keys[provider] ? { searchApiKey: keys[provider] } : {}),
    ...extra,
  });
}

describe("search providers", () => {
  for (const provider of ["searxng", "brave", "tavily", "serper"] as const) {
    it(`${provider}: finds the site's pages through the provider's own API`, async () => {
      const search = createSearchProvider(settings(provider));
      const found = await search.search("Eiffel Tower height", { limit: 3 });
      expect(found.results[0]).toMatchObject({
        title: "Eiffel Tower - Local Encyclopedia",
        url: server.url("/eiffel"),
      });
      expect(found.results[0].snippet).toContain("Eiffel");
      expect(found.results.length).toBeLessThanOrEqual(3);
      const last = server.requests.at(-1)!;
      if (provider === "searxng")
        expect(last.path).toMatch(/^\/searxng\/search\?q=Eiffel.*format=json/);
      if (provider === "brave") expect(last.headers["x-subscription-token"]).toBe("brave-key");
      if (provider === "tavily") {
        expect(last.method).toBe("POST");
        expect(last.headers.authorization).toBe("Bearer tvly-key");
        expect(last.body).toMatchObject({ query: "Eiffel Tower height", max_results: 3 });
      }
      if (provider === "serper")
        expect(last.body).toMatchObject({ q: "Eiffel Tower height", num: 3 });
    });
  }

  it("formats results as numbered Markdown links, and says when nothing was found", async () => {
    const search = createSearchProvider(settings("searxng"));
    const text = formatSearchResults(await search.search("plywood density"));
    expect(text).toContain(`1. [Plywood densities](${server.url("/plywood")})`);
    expect(formatSearchResults(await search.search("zzzqqq"))).toMatch(/^No results for 'zzzqqq'/);
  });

  it("a wrong key is a provider error that says to set the key, not a crash", async () => {
    for (const provider of ["brave", "tavily", "serper"] as const) {
      const search = createSearchProvider(settings(provider, { searchApiKey: "wrong" }));
      const err = await search.search("tower").catch((e) => e);
      expect(err).toBeInstanceOf(WebError);
      expect(err.failure).toBe("provider");
      expect(err.code).toBe("CODEHOP_SOURCE_UNAVAILABLE");
      expect(err.message).toMatch(/CODEHOP_SEARCH_API_KEY/);
    }
  });

  it("a SearxNG without its JSON format is named as such", async () => {
    const search = createSearchProvider(settings("searxng"));
    // The provider is asked correctly; a server answering 403 is what a SearxNG without json does.
    server.searchDown = 403;
    try {
      const err = await search.search("tower").catch((e) => e);
      expect(err.message).toMatch(/search\.formats/);
    } finally {
      server.searchDown = undefined;
    }
  });

  it("a provider that is down, unreachable or unconfigured is an observation with what to do", async () => {
    server.searchDown = 503;
    try {
      const err = await createSearchProvider(settings("serper"))
        .search("tower")
        .catch((e) => e);
      expect(err.message).toMatch(/HTTP 503/);
    } finally {
      server.searchDown = undefined;
    }
    const dead = createSearchProvider(
      resolveWebSettings({
        searchProvider: "searxng",
        searchUrl: `http://127.0.0.1:${await closedPort()}`,
      }),
    );
    const refused = await dead.search("tower").catch((e) => e);
    expect(refused.failure).toBe("provider");
    expect(refused.message).toMatch(/did not answer .*refused/);
    const none = await createSearchProvider(resolveWebSettings({}))
      .search("tower")
      .catch((e) => e);
    expect(none.message).toMatch(/CODEHOP_SEARCH_URL/);
    const noKey = await createSearchProvider(resolveWebSettings({ searchProvider: "brave" }))
      .search("tower")
      .catch((e) => e);
    expect(noKey.message).toMatch(/needs an API key/);
  });

  it("a provider answering HTML instead of JSON is reported, and a slow one times out", async () => {
    server.setPage("/fake-searx/search", { body: "<html>hello</html>", unlisted: true });
    const html = await createSearchProvider(
      resolveWebSettings({ searchUrl: server.url("/fake-searx") }),
    )
      .search("tower")
      .catch((e) => e);
    expect(html.message).toMatch(/not JSON/);
    server.setPage("/slow-searx/search", {
      body: "{}",
      type: "application/json",
      delayMs: 3000,
      unlisted: true,
    });
    const slow = await createSearchProvider(
      resolveWebSettings({ searchUrl: server.url("/slow-searx"), searchTimeoutMs: 300 }),
    )
      .search("tower")
      .catch((e) => e);
    expect(slow.message).toMatch(/did not answer within 0.3 s/);
  });

  it("reads its settings from the environment and refuses a bad provider name", () => {
    const s = webSettingsFromEnv(
      readEnv({
        CODEHOP_SEARCH_PROVIDER: "Tavily",
        CODEHOP_SEARCH_API_KEY: "k",
        CODEHOP_BROWSER: "text",
        CODEHOP_WEB_MAX_MB: "2",
      }),
    );
    expect(s).toMatchObject({ searchProvider: "tavily", searchApiKey: "k", browser: "text" });
    expect(s.maxPageBytes).toBe(2 * 1024 * 1024);
    expect(createSearchProvider(s).endpoint).toBe("https://api.tavily.com/search");
    expect(() => resolveWebSettings({ searchProvider: "bing" as any })).toThrow(/searchProvider/);
    expect(WEB_DEFAULTS.searchProvider).toBe("searxng");
  });
});
