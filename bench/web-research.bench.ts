/**
 * Research on the web, offline: the scripted research run of test/research/web-fixture.ts over a
 * local website and a local SearxNG-compatible search API (src/testing/web-test-server.ts), through
 * the real search-provider port, ranking, text browser and page readers. Per sub-question: searches
 * made, pages fetched over HTTP, page-reader runs, and the run's wall time, with every page served
 * after a 50 ms delay (a network stand-in).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureDemoCorpus } from "../src/apps/qa/demo.ts";
import { research } from "../src/apps/research/app.ts";
import { researchResponder } from "../src/apps/research/demo-trajectories.ts";
import { ScriptedOpenAIServer } from "../src/testing/scripted-openai-server.ts";
import { WebTestServer } from "../src/testing/web-test-server.ts";
import { WEB_TOPIC, webResearchScript, ZSTD_SITE } from "../test/research/web-fixture.ts";
import { type BenchSection, fmt } from "./lib.ts";

const RUNS = 3;
const PAGE_DELAY_MS = 50;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export default async function webResearchBench(): Promise<BenchSection[]> {
  const home = mkdtempSync(join(tmpdir(), "codehop-bench-web-research-"));
  const pages = Object.fromEntries(
    Object.entries(ZSTD_SITE).map(([path, page]) => [path, { ...page, delayMs: PAGE_DELAY_MS }]),
  );
  const site = await WebTestServer.start({ pages });
  let script = webResearchScript();
  const model = await ScriptedOpenAIServer.start({
    responder: (req, ctx) => researchResponder(script)(req, ctx),
  });
  const corpus = await ensureDemoCorpus(home);
  const rows: (string | number)[][] = [];
  try {
    const cases = [
      {
        label: "web, 1 page per researcher",
        sources: ["web"] as const,
        pagesPerQuestion: 1 as const,
      },
      {
        label: "web, 2 pages per researcher",
        sources: ["web"] as const,
        pagesPerQuestion: 2 as const,
      },
      {
        label: "web,corpus, 1 page per researcher",
        sources: ["web", "corpus"] as const,
        pagesPerQuestion: 1 as const,
        corpus: true,
      },
    ];
    for (const c of cases) {
      script = webResearchScript({ corpus: c.corpus, pagesPerQuestion: c.pagesPerQuestion });
      const times: number[] = [];
      let measured = { questions: 0, searches: 0, fetched: 0, readers: 0, citations: 0 };
      for (let i = 0; i < RUNS; i++) {
        const siteBefore = site.requests.length;
        const modelBefore = model.requests.length;
        const started = performance.now();
        const result = await research(WEB_TOPIC, {
          config: {
            home,
            corpus,
            baseURL: model.baseURL,
            apiKey: "bench",
            model: "scripted",
            models: {},
            sources: [...c.sources],
            web: { settings: { searchUrl: `${site.origin}/searxng`, allowPrivateAddresses: true } },
          },
        });
        times.push(performance.now() - started);
        const hits = site.requests.slice(siteBefore);
        measured = {
          questions: result.questions.length,
          searches: hits.filter((h) => h.path.startsWith("/searxng/")).length,
          fetched: hits.filter((h) => h.path.split("?")[0] in ZSTD_SITE).length,
          readers: model.requests
            .slice(modelBefore)
            .filter((r) => r.rule?.startsWith("page_reader:") && r.step === 0).length,
          citations: result.citations.length,
        };
      }
      const q = measured.questions;
      rows.push([
        c.label,
        q,
        fmt(measured.searches / q, 2),
        fmt(measured.fetched / q, 2),
        fmt(measured.readers / q, 2),
        measured.citations,
        fmt(median(times), 0),
      ]);
    }
    return [
      {
        title: "Research: pages read per sub-question on the web",
        description: `The scripted research run of test/research/web-fixture.ts (2 web sub-questions, plus 1 answered from the demo corpus in the mixed run) over a local website of ${Object.keys(ZSTD_SITE).length} pages and a local SearxNG-compatible API, through the real search port, ranking, text browser and page readers; each page answers after ${PAGE_DELAY_MS} ms. Per sub-question: searches sent to the provider (the researcher's, plus a page reader's lookup of a title its source has not shown), pages fetched over HTTP (a page read twice in one run is fetched once), page-reader runs (one per page read). The run's wall time is the median of ${RUNS} runs (scripted model, zero latency: what the pipeline and the web cost).`,
        columns: [
          "run",
          "sub-questions",
          "searches / sub-question",
          "pages fetched / sub-question",
          "page readers / sub-question",
          "citations",
          "run ms (median)",
        ],
        rows,
      },
    ];
  } finally {
    await model.close();
    await site.close();
    rmSync(home, { recursive: true, force: true });
  }
}
