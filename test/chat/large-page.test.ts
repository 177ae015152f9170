import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { chat, threadFiles } from "../../src/apps/chat/app.ts";
import { chatResponder, type DemoRound } from "../../src/apps/chat/demo-trajectories.ts";
import { action } from "../../src/apps/qa/demo-trajectories.ts";
import { extractDocument } from "../../src/ingest/documents.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";
import { startHttpServer } from "./documents.ts";

// A multi-megabyte page: converting HTML to text takes about a second per megabyte, synchronous
// in turndown. It must not stop the process that attaches it (a server's other requests, runs and
// heartbeats): large pages are converted in a worker thread, and pages over the HTML limit are cut
// with the file marked truncated, which the agent is told.

const PARAGRAPH =
  "<p>The Harbor Bridge toll for a car is 4 dollars; trucks pay 12 dollars per axle.</p>\n";
/** About `mb` megabytes of HTML with a title and a heading. */
function bigPage(mb: number): string {
  const count = Math.ceil((mb * 1024 * 1024) / PARAGRAPH.length);
  return `<html><head><title>Toll tables</title></head><body><h2>Tolls</h2>${PARAGRAPH.repeat(count)}</body></html>`;
}

/** Runs `work` while counting how often the event loop ran a 20 ms timer meanwhile. */
async function ticksDuring<T>(work: () => Promise<T>): Promise<{ result: T; ticks: number }> {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 20);
  try {
    const result = await work();
    return { result, ticks };
  } finally {
    clearInterval(timer);
  }
}

describe("a multi-megabyte HTML page", () => {
  it("is converted off the main thread (the event loop keeps running) and cut at the HTML limit", async () => {
    const html = Buffer.from(bigPage(6));
    const { result: doc, ticks } = await ticksDuring(() =>
      extractDocument({ name: "tolls.html" }, html),
    );
    // Converted on the main thread, not one timer would have run before the text was back.
    expect(ticks).toBeGreaterThanOrEqual(3);
    expect(doc).toMatchObject({ kind: "html", title: "Toll tables", truncated: true });
    expect(doc.text.startsWith("## Tolls\n\nThe Harbor Bridge toll for a car is 4 dollars")).toBe(
      true,
    );
    // A small page is converted on this thread, with the same text.
    const small = await extractDocument(
      { name: "small.html" },
      Buffer.from(`<html><body><h2>Tolls</h2>${PARAGRAPH}</body></html>`),
    );
    expect(small).toMatchObject({
      truncated: false,
      text: "## Tolls\n\nThe Harbor Bridge toll for a car is 4 dollars; trucks pay 12 dollars per axle.",
    });
  }, 120_000);

  it("stops converting when the run's signal aborts (a cancelled run frees its reader)", async () => {
    const { readerStats } = await import("../../src/ingest/reader-pool.ts");
    const controller = new AbortController();
    const reason = new Error("run cancelled");
    const converting = extractDocument({ name: "tolls.html" }, Buffer.from(bigPage(6)), {
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(reason), 100);
    // Not aborted, this conversion would finish with the page's text seconds later.
    await expect(converting).rejects.toBe(reason);
    expect(readerStats()).toMatchObject({ running: 0, waiting: 0 });
    // An already aborted signal converts nothing.
    await expect(
      extractDocument({ name: "t.html" }, Buffer.from(bigPage(0.3)), { signal: controller.signal }),
    ).rejects.toBe(reason);
  }, 120_000);

  describe("attached in a round", () => {
    const rounds: DemoRound[] = [
      {
        message: "What does a car pay?",
        steps: [
          action("I search the page.", 'console.log(await search_files("car toll"));'),
          action("Answer.", 'final_answer("A car pays 4 dollars [Toll tables § Tolls].");'),
        ],
        expect: { reply: "4 dollars", cites: ["Toll tables § Tolls"] },
      },
    ];
    let model: ScriptedOpenAIServer;
    let web: Awaited<ReturnType<typeof startHttpServer>>;
    const page = bigPage(6);

    beforeAll(async () => {
      model = await ScriptedOpenAIServer.start({ responder: chatResponder(rounds) });
      web = await startHttpServer((_req, res) => {
        res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
        res.end(page);
      });
    });
    afterAll(async () => {
      await model?.close();
      await web?.close();
    });

    it("the round completes; the agent is told only the page's beginning was indexed", async () => {
      const home = mkdtempSync(join(tmpdir(), "codehop-large-page-"));
      onTestFinished(() => rmSync(home, { recursive: true, force: true }));
      const config = { home, baseURL: model.baseURL, apiKey: "x", model: "scripted", models: {} };
      const result = await chat("big", rounds[0].message, { config, urls: [web.url("/tolls")] });
      expect(result.status).toBe("done");
      expect(result.attachments).toMatchObject([{ name: "Toll tables", ok: true }]);
      expect(result.reply).toContain("A car pays 4 dollars");
      expect(threadFiles("big", { config })).toMatchObject([
        { name: "Toll tables", truncated: true },
      ]);
      const task = model
        .requestsFor("chat:round1")[0]
        .request.messages.find((m) => m.role === "user")!.content;
      expect(task).toContain("- Toll tables (web page, only its beginning was indexed)");
    }, 180_000);
  });
});

describe("large pages attached at the same time", () => {
  it("are converted by a bounded number of threads at once, the others waiting their turn", async () => {
    const { conversionThreadStats, htmlToTextOffThread } =
      await import("../../src/ingest/html-to-text.ts");
    const { max } = conversionThreadStats();
    const pages = Array.from({ length: max + 3 }, (_, i) =>
      bigPage(0.3).replace("Toll tables", `Toll tables ${i}`),
    );
    const all = Promise.all(pages.map((html, i) => htmlToTextOffThread(html, { name: `p${i}` })));
    await new Promise((r) => setImmediate(r));
    const during = conversionThreadStats();
    expect(during.running).toBe(max);
    expect(during.waiting).toBe(3);
    const texts = await all;
    expect(texts.every((t) => t.includes("Harbor Bridge toll"))).toBe(true);
    expect(conversionThreadStats()).toMatchObject({ running: 0, waiting: 0 });
  });

  it("a conversion waiting for a thread ends when its signal aborts, before a thread frees", async () => {
    const { conversionThreadStats, htmlToTextOffThread } =
      await import("../../src/ingest/html-to-text.ts");
    const { max } = conversionThreadStats();
    const busy = Promise.all(
      Array.from({ length: max }, (_, i) => htmlToTextOffThread(bigPage(2), { name: `b${i}` })),
    );
    const controller = new AbortController();
    const reason = new Error("run cancelled");
    const waiting = htmlToTextOffThread(bigPage(0.3), { name: "w", signal: controller.signal });
    await new Promise((r) => setImmediate(r));
    expect(conversionThreadStats()).toMatchObject({ running: max, waiting: 1 });
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    // Rejected while every thread was still busy with the other pages.
    expect(conversionThreadStats().running).toBe(max);
    const texts = await busy;
    expect(texts.every((t) => t.includes("Harbor Bridge toll"))).toBe(true);
    expect(conversionThreadStats()).toMatchObject({ running: 0, waiting: 0 });
  });
});
