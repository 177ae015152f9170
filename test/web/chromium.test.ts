import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readEnv } from "../../src/config/env.ts";
import { WebTestServer } from "../../src/testing/web-test-server.ts";
import {
  CHROMIUM_FLAGS,
  WebBrowser,
  closeChromiumBrowsers,
  createPageLoader,
  createTextLoader,
  resolveWebSettings,
  type WebSettings,
} from "../../src/web/index.ts";
import { MUSEUM_ARTICLE, jsPages } from "./js-site.ts";
import { testSite } from "./site.ts";

// The real browser (Debian's /usr/bin/chromium via playwright-core) on a local site with a page its
// script builds and a page behind a cookie banner. CI installs chromium and must run these.
const CHROMIUM = "/usr/bin/chromium";
const available = existsSync(CHROMIUM);
if (!available && readEnv().ci)
  throw new Error("CI but no /usr/bin/chromium: .ci/run installs Debian's chromium");

let server: WebTestServer;
beforeAll(async () => {
  const site = testSite();
  server = await WebTestServer.start({ ...site, pages: { ...site.pages, ...jsPages } });
  // The article behind the banner is served only to a request carrying the consent cookie.
  server.setPage("/api/museum-article", { body: "", status: 403, unlisted: true });
  server.onRequest = (req) => {
    if (
      req.url === "/api/museum-article" &&
      String(req.headers.cookie ?? "").includes("consent=yes")
    )
      return { body: MUSEUM_ARTICLE, type: "text/html; charset=utf-8" };
    return undefined;
  };
});
afterAll(async () => {
  await closeChromiumBrowsers();
  await server.close();
});

const settings = (extra: Partial<WebSettings> = {}) =>
  resolveWebSettings({
    allowPrivateAddresses: true,
    chromiumPath: CHROMIUM,
    viewportChars: 3000,
    timeoutMs: 30_000,
    ...extra,
  });

describe.skipIf(!available)("real browser (chromium)", () => {
  it("launches with the documented flags", () => {
    expect(CHROMIUM_FLAGS).toEqual([
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ]);
  });

  it("reads a page its script builds, which the text browser cannot", async () => {
    const text = await createTextLoader(settings()).load(server.url("/js-only"));
    expect(text.markdown).not.toContain("pad 39A");
    expect(text.needsJavaScript).toBe(true);
    const page = await createPageLoader(settings({ browser: "chromium" })).load(
      server.url("/js-only"),
    );
    expect(page.browser).toBe("chromium");
    expect(page.markdown).toContain("The first launch of the season is on 14 March from pad 39A.");
    expect(page.title).toBe("Launch schedule");
  }, 60_000);

  it("passes a cookie banner and reads what is behind it", async () => {
    const page = await createPageLoader(settings({ browser: "chromium" })).load(
      server.url("/consent"),
    );
    expect(page.markdown).toContain("The museum reopens on 3 September");
    expect(page.markdown).not.toContain("We use cookies");
    // The article request went through codehop's HTTP client with the consent cookie.
    const asked = server.requests.filter((r) => r.path === "/api/museum-article");
    expect(asked.some((r) => String(r.headers.cookie).includes("consent=yes"))).toBe(true);
  }, 60_000);

  it("auto: the text browser for plain pages, the real one for JavaScript pages", async () => {
    const auto = createPageLoader(settings({ browser: "auto" }));
    expect((await auto.load(server.url("/plywood"))).browser).toBe("text");
    const js = await auto.load(server.url("/js-only"));
    expect(js.browser).toBe("chromium");
    expect(js.markdown).toContain("pad 39A");
    const b = new WebBrowser(auto, { viewportChars: 3000 });
    expect(await b.visit(server.url("/js-only"))).toMatch(/Position: viewport 1 of 1\n/);
  }, 60_000);

  it("holds the page to the link policy: a served browser does not reach private addresses", async () => {
    const err = await createPageLoader(
      settings({ browser: "chromium", allowPrivateAddresses: false }),
    )
      .load(server.url("/js-only"))
      .catch((e) => e);
    expect(err).toMatchObject({ failure: "refused" });
    expect(err.message).toMatch(/CODEHOP_WEB_ALLOW_PRIVATE_URLS/);
  }, 60_000);

  it("reports 404s, non-pages and dead hosts like the text browser", async () => {
    const real = createPageLoader(settings({ browser: "chromium" }));
    expect(await real.load(server.url("/missing")).catch((e) => e)).toMatchObject({
      failure: "http_status",
      status: 404,
    });
    expect(await real.load(server.url("/photo.png")).catch((e) => e)).toMatchObject({
      failure: "binary",
    });
    expect((await real.load(server.url("/notes.txt"))).markdown).toContain("the answer is 42");
  }, 60_000);

  it("an executable that does not exist is an observation naming the setting", async () => {
    const err = await createPageLoader(
      settings({ browser: "chromium", chromiumPath: "/nonexistent/chromium" }),
    )
      .load(server.url("/plywood"))
      .catch((e) => e);
    expect(err).toMatchObject({ failure: "browser" });
    expect(err.message).toMatch(/CODEHOP_CHROMIUM_PATH/);
    // auto without the executable: the text browser's page stands.
    const page = await createPageLoader(
      settings({ browser: "auto", chromiumPath: "/nonexistent/chromium" }),
    ).load(server.url("/plywood"));
    expect(page.browser).toBe("text");
  }, 60_000);
});
