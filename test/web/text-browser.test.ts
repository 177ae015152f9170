import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebTestServer } from "../../src/testing/web-test-server.ts";
import {
  WebBrowser,
  WebError,
  archiveTimestamp,
  createTextLoader,
  downloadFile,
  findSnapshot,
  httpGet,
  resolveWebSettings,
  safeFileName,
  splitViewports,
  type WebSettings,
} from "../../src/web/index.ts";
import { testSite } from "./site.ts";

let server: WebTestServer;
let dir: string;
beforeAll(async () => {
  server = await WebTestServer.start(testSite());
  dir = mkdtempSync(join(tmpdir(), "codehop-web-"));
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The local server is on 127.0.0.1: a served graph's policy refuses it, so these allow it. */
const local = (extra: Partial<WebSettings> = {}) =>
  resolveWebSettings({ allowPrivateAddresses: true, viewportChars: 2000, ...extra });
const browser = (extra: Partial<WebSettings> = {}) => {
  const s = local(extra);
  return new WebBrowser(createTextLoader(s), { viewportChars: s.viewportChars });
};

describe("text browser", () => {
  it("shows a page as readable Markdown in numbered viewports with its address and title", async () => {
    const b = browser();
    const first = await b.visit(server.url("/eiffel"));
    expect(first).toMatch(/^Address: http:\/\/127\.0\.0\.1:\d+\/eiffel\nTitle: Eiffel Tower/);
    const total = Number(/Position: viewport 1 of (\d+)/.exec(first)![1]);
    expect(total).toBeGreaterThanOrEqual(4);
    expect(first).toContain("Paragraph 1 of the history");
    // Readability kept the article, not the navigation or the footer.
    expect(first).not.toContain("[Home](");
    const second = b.pageDown();
    expect(second).toContain(`Position: viewport 2 of ${total}`);
    expect(second).not.toContain("Paragraph 1 of the history");
    expect(b.pageUp()).toContain(`viewport 1 of ${total}`);
    expect(b.pageUp()).toMatch(/This is the first viewport/);
    let last = "";
    for (let i = 0; i < total + 1; i++) last = b.pageDown();
    expect(last).toContain(`viewport ${total} of ${total}`);
    expect(last).toMatch(/This is the last viewport/);
    // Links and images keep absolute URLs: the agent can follow them.
    expect(last).toContain(`[materials](${server.url("/plywood")})`);
    expect(last).toContain(`![the tower at night](${server.url("/tower.png")})`);
  });

  it("converts a large page on a worker thread", async () => {
    const rows = Array.from(
      { length: 4000 },
      (_, i) => `<tr><td>row ${i}</td><td>${i * 2}</td></tr>`,
    ).join("");
    server.setPage("/big-table", {
      body: `<html><head><title>Big</title></head><body><h1>Big table</h1><table><tr><th>name</th><th>value</th></tr>${rows}</table></body></html>`,
      unlisted: true,
    });
    const b = browser();
    await b.visit(server.url("/big-table"));
    expect(b.page()!.markdown).toContain("| row 3999 | 7998 |");
  });

  it("keeps tables as Markdown tables", async () => {
    const page = await browser().visit(server.url("/plywood"));
    expect(page).toMatch(
      /\| Material \| Density \(kg\/m³\) \|\n\| --- \| --- \|\n\| Birch plywood \| 680 \|/,
    );
  });

  it("finds text in the page and the next match in a later viewport", async () => {
    const b = browser();
    await b.visit(server.url("/eiffel"));
    const found = b.find("330 METRES");
    expect(found).toMatch(/Found "330 METRES": match 1 of 1/);
    expect(found).toContain("The tower is 330 metres tall");
    expect(found).not.toMatch(/viewport 1 of/);
    const again = b.find("paragraph 2 ");
    expect(again).toMatch(/match 1 of/);
    const next = b.findNext();
    const viewports = (s: string) => Number(/viewport (\d+) of/.exec(s)![1]);
    expect(viewports(next)).toBeGreaterThanOrEqual(viewports(again));
    expect(b.find("no such words anywhere")).toMatch(/was not found on this page/);
    expect(() => b.findNext()).toThrow(/find_in_page/);
    // Wildcards, as the GAIA browser's find.
    expect(b.find("original * 312")).toMatch(/Found/);
  });

  it("needs a page before scrolling", () => {
    const b = browser();
    expect(() => b.pageDown()).toThrow(/visit_page/);
    expect(() => b.find("x")).toThrow(/visit_page/);
  });

  it("restores its place (page, viewport, find) from its state, as after a restart", async () => {
    const b = browser();
    await b.visit(server.url("/eiffel"));
    b.pageDown();
    b.find("paragraph 3");
    const state = b.state();
    const again = browser();
    await again.restore(state);
    expect(again.state()).toEqual(state);
    expect(again.pageUp()).toEqual(b.pageUp());
  });

  it("shows text, JSON and the page of a redirect", async () => {
    server.setPage("/moved", {
      body: "",
      status: 302,
      headers: { location: "/notes.txt" },
      unlisted: true,
    });
    const text = await browser().visit(server.url("/moved"));
    expect(text).toContain(`Address: ${server.url("/notes.txt")}`);
    expect(text).toContain("the answer is 42");
    const json = await browser().visit(server.url("/data.json"));
    expect(json).toContain('"height": 330');
  });

  it("reads a PDF link as text", async () => {
    const { default: PDFDocument } = await import("pdfkit");
    const doc = new PDFDocument();
    const chunks: Buffer[] = [];
    doc.on("data", (c: Buffer) => chunks.push(c));
    const done = new Promise((r) => doc.on("end", r));
    doc.text("The annual report says revenue was 7 million euros.");
    doc.end();
    await done;
    server.setPage("/report.pdf", {
      body: Buffer.concat(chunks),
      type: "application/pdf",
      unlisted: true,
    });
    const page = await browser().visit(server.url("/report.pdf"));
    expect(page).toContain("revenue was 7 million euros");
  });

  it("turns every bad page into a WebError the agent can act on", async () => {
    const fail = (path: string, extra: Partial<WebSettings> = {}) =>
      browser(extra)
        .visit(/^[a-z]+:/.test(path) || path.includes(" ") ? path : server.url(path))
        .catch((e) => e as WebError) as Promise<WebError>;
    expect(await fail("/missing")).toMatchObject({ failure: "http_status", status: 404 });
    expect((await fail("/missing")).message).toMatch(/HTTP 404 Not Found: the page does not exist/);
    expect(await fail("/gone")).toMatchObject({ failure: "http_status", status: 410 });
    expect(await fail("/empty")).toMatchObject({ failure: "no_text" });
    expect(await fail("/photo.png")).toMatchObject({ failure: "binary", mediaType: "image/png" });
    expect(await fail("/__huge", { maxPageBytes: 1024 * 1024 })).toMatchObject({
      failure: "too_large",
    });
    expect(await fail("/__slow", { timeoutMs: 300 })).toMatchObject({ failure: "timeout" });
    expect(await fail("/__loop")).toMatchObject({ failure: "bad_url" });
    expect(await fail("ftp://example.org/x")).toMatchObject({ failure: "bad_url" });
    expect(await fail("not a url")).toMatchObject({ failure: "bad_url" });
    const port = new URL(server.origin).port;
    await server.close().catch(() => {});
    // (a fresh server for the remaining tests)
    server = await WebTestServer.start(testSite());
    expect(await fail(`http://127.0.0.1:${port}/`)).toMatchObject({ failure: "unreachable" });
  });

  it("refuses private, loopback and link-local addresses unless allowed (the chat's link policy)", async () => {
    const served = (url: string) =>
      new WebBrowser(createTextLoader(resolveWebSettings({})), { viewportChars: 2000 })
        .visit(url)
        .catch((e) => e as WebError) as Promise<WebError>;
    for (const url of [
      server.url("/"),
      "http://localhost:81/",
      "http://[::1]:81/",
      "http://169.254.169.254/latest/meta-data/",
      "http://10.0.0.1/",
      "http://[::ffff:127.0.0.1]:81/",
    ]) {
      const err = await served(url);
      expect(err, url).toMatchObject({ failure: "refused" });
      expect(err.message).toMatch(/CODEHOP_WEB_ALLOW_PRIVATE_URLS/);
    }
    // Every redirect is checked too: an allowed host redirecting to a refused one is refused.
    server.setPage("/to-elsewhere", {
      body: "",
      status: 302,
      headers: { location: `http://127.0.0.2:${new URL(server.origin).port}/` },
      unlisted: true,
    });
    const policy = {
      timeoutMs: 5000,
      maxBytes: 1e6,
      maxRedirects: 3,
      allowAddress: (a: string) => a === "127.0.0.1",
    };
    const redirected = await httpGet(server.url("/to-elsewhere"), policy).catch((e) => e);
    expect(redirected).toMatchObject({ failure: "refused" });
    expect(redirected.message).toMatch(/127\.0\.0\.2/);
  });
});

describe("web archive", () => {
  const archive = () => local({ archiveUrl: server.url("/wayback/available") });

  it("finds the snapshot closest to a date in any usual format and shows it", async () => {
    const early = await findSnapshot("http://tower.example/prices", "2016-01-01", archive());
    expect(early).toMatchObject({ timestamp: "20150301120000", requested: "20160101" });
    const late = await findSnapshot("http://tower.example/prices", "June 2021", archive());
    expect(late.timestamp).toBe("20200615080000");
    const b = browser();
    const shown = b.show(
      await createTextLoader(local()).load(late.url),
      `Web archive snapshot of http://tower.example/prices taken 2020-06-15`,
    );
    expect(shown).toContain("25.90 euros");
    expect(shown).toMatch(/^Web archive snapshot/);
  });

  it("reads dates as the archive wants them and refuses nonsense", () => {
    expect(archiveTimestamp("2019-05-17")).toBe("20190517");
    expect(archiveTimestamp("20190517")).toBe("20190517");
    expect(archiveTimestamp("2019")).toBe("2019");
    expect(archiveTimestamp("March 5, 2021")).toBe("20210305");
    expect(() => archiveTimestamp("yesterday-ish")).toThrow(/YYYY-MM-DD/);
  });

  it("says so when a page was never archived or the archive is down", async () => {
    const none = await findSnapshot("http://never.example/", "2020", archive()).catch((e) => e);
    expect(none.message).toMatch(/no snapshot of http:\/\/never\.example\//);
    const down = await findSnapshot(
      "http://tower.example/prices",
      "2020",
      local({ archiveUrl: server.url("/no-archive-here") }),
    ).catch((e) => e);
    expect(down).toMatchObject({ failure: "provider" });
  });
});

describe("downloads", () => {
  it("saves a file under a safe unique name, within the download cap", async () => {
    server.setPage("/files/../../evil name.csv", {
      body: "a,b\n1,2\n",
      type: "text/csv",
      unlisted: true,
    });
    server.setPage("/files/table.csv", { body: "a,b\n1,2\n", type: "text/csv", unlisted: true });
    const one = await downloadFile(server.url("/files/table.csv"), dir, local());
    const two = await downloadFile(server.url("/files/table.csv"), dir, local());
    expect(one.name).toBe("table.csv");
    expect(two.name).toBe("table-2.csv");
    expect(readFileSync(two.path, "utf8")).toBe("a,b\n1,2\n");
    expect((statSync(one.path).mode & 0o777).toString(8)).toBe("600");
    expect(safeFileName("../../etc/passwd")).toBe("etc_passwd");
    expect(safeFileName(".bashrc")).toBe("bashrc");
    expect(safeFileName("photo", "image/png")).toBe("photo.png");
    const big = await downloadFile(
      server.url("/__huge"),
      dir,
      local({ maxDownloadBytes: 1024 * 1024 }),
    ).catch((e) => e);
    expect(big).toMatchObject({ failure: "too_large" });
  });
});

describe("viewports", () => {
  it("cover the text exactly once and end at line breaks or spaces", () => {
    const text = Array.from({ length: 300 }, (_, i) => `line ${i} with some words`).join("\n");
    const bounds = splitViewports(text, 500);
    expect(bounds[0][0]).toBe(0);
    expect(bounds.at(-1)![1]).toBe(text.length);
    for (let i = 1; i < bounds.length; i++) expect(bounds[i][0]).toBe(bounds[i - 1][1]);
    for (const [, end] of bounds.slice(0, -1)) expect(text[end - 1]).toBe("\n");
    expect(splitViewports("", 500)).toEqual([[0, 0]]);
  });
});
