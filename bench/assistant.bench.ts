/**
 * The general assistant's web and eval costs, offline: a local website (src/testing/web-test-server.ts)
 * read through the page-loader port in each browser mode (text, Debian's Chromium, auto), the
 * Qwen2.5 tokens of the viewports an agent is shown, and the GAIA-format mini set
 * (src/apps/assistant/demo-gaia.ts) run through the eval harness: tasks per minute.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { demoSite } from "../src/apps/assistant/demo-trajectories.ts";
import { gaiaMiniResponder, writeGaiaMiniSet } from "../src/apps/assistant/demo-gaia.ts";
import { readEnv } from "../src/config/env.ts";
import { runEval } from "../src/eval/runner.ts";
import { ScriptedOpenAIServer } from "../src/testing/scripted-openai-server.ts";
import { WebTestServer } from "../src/testing/web-test-server.ts";
import { WebBrowser } from "../src/web/browser.ts";
import { closeChromiumBrowsers } from "../src/web/chromium.ts";
import { createPageLoader, resolveWebSettings, type BrowserMode } from "../src/web/index.ts";
import { jsPages } from "../test/web/js-site.ts";
import { testSite } from "../test/web/site.ts";
import { type BenchSection, fmt } from "./lib.ts";
import { qwenTokens } from "./qwen-tokens.ts";

const REPEATS = 5;
const CHROMIUM = "/usr/bin/chromium";
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export default async function assistantBench(): Promise<BenchSection[]> {
  const site = testSite();
  const web = await WebTestServer.start({ ...site, pages: { ...site.pages, ...jsPages } });
  try {
    return [
      await browserSection(web),
      viewportSection(await loadViewports(web)),
      await evalSection(),
    ];
  } finally {
    await closeChromiumBrowsers();
    await web.close();
  }
}

/** Page fetch + render per browser mode: the first load (a Chromium launch in it) and the median of the next. */
async function browserSection(web: WebTestServer): Promise<BenchSection> {
  const modes: BrowserMode[] = existsSync(CHROMIUM) ? ["text", "chromium", "auto"] : ["text"];
  const pages = [
    ["static article (/eiffel)", "/eiffel"],
    ["JavaScript page (/js-only)", "/js-only"],
  ] as const;
  const rows: (string | number)[][] = [];
  const settings = (browser: BrowserMode) =>
    resolveWebSettings({
      browser,
      chromiumPath: CHROMIUM,
      allowPrivateAddresses: true,
      timeoutMs: 60_000,
    });
  const textMedian = new Map<string, number>();
  for (const [label, path] of pages) {
    // Interleaved: one load per mode per round, so a load spike hits every mode alike.
    const loaders = new Map(modes.map((m) => [m, createPageLoader(settings(m))]));
    const times = new Map(modes.map((m) => [m, [] as number[]]));
    const chars = new Map<BrowserMode, number>();
    const cold = new Map<BrowserMode, number>();
    for (let round = 0; round <= REPEATS; round++) {
      for (const mode of modes) {
        const started = performance.now();
        const page = await loaders.get(mode)!.load(web.url(path));
        const ms = performance.now() - started;
        if (round === 0) cold.set(mode, ms);
        else times.get(mode)!.push(ms);
        chars.set(mode, page.markdown.length);
      }
    }
    for (const loader of loaders.values()) await loader.close();
    // The next page's first load launches Chromium again (a cold read).
    await closeChromiumBrowsers();
    for (const mode of modes) {
      const med = median(times.get(mode)!);
      if (mode === "text") textMedian.set(path, med);
      rows.push([
        label,
        mode,
        chars.get(mode)!,
        fmt(cold.get(mode)!, 0),
        fmt(med, 1),
        fmt(med / textMedian.get(path)!, 1),
      ]);
    }
  }
  return {
    title: "Assistant: page fetch + render time per browser mode",
    description: `One page loaded through the page-loader port (src/web/loaders.ts) from a local site: the first load (the chromium row's includes launching Chromium; auto, loaded next in the same round, shares that process) and the median of ${REPEATS} further loads, modes interleaved. Markdown chars: what the agent can read (the JavaScript page's text exists only after its script ran). Ratio: median vs the text browser on the same page. ${existsSync(CHROMIUM) ? "" : "No /usr/bin/chromium here: text only."}`,
    columns: ["page", "browser", "Markdown chars", "first load ms", "median ms", "x text"],
    rows,
  };
}

/** The viewports of the long article as an agent sees them (header + Markdown). */
async function loadViewports(web: WebTestServer): Promise<{ size: number; shown: string[] }[]> {
  const out: { size: number; shown: string[] }[] = [];
  for (const size of [2_000, 5_120, 10_000]) {
    const browser = new WebBrowser(
      createPageLoader(resolveWebSettings({ browser: "text", allowPrivateAddresses: true })),
      { viewportChars: size },
    );
    const shown = [await browser.visit(web.url("/eiffel"))];
    for (;;) {
      const before = browser.state().viewport;
      const next = browser.pageDown();
      if (browser.state().viewport === before) break;
      shown.push(next);
    }
    out.push({ size, shown });
  }
  return out;
}

function viewportSection(views: { size: number; shown: string[] }[]): BenchSection {
  return {
    title: "Assistant: tokens per viewport",
    description:
      'The Eiffel Tower article (41 paragraphs) of test/web/site.ts read with the text browser and paged down to its end; each viewport as the agent sees it (address, title, "viewport i of n", Markdown) counted in exact Qwen2.5 tokens. 5,120 characters is the default (the GAIA submission\'s); a run may choose another with `context.web.viewportChars`.',
    columns: ["viewportChars", "viewports", "tokens / viewport (median)", "max", "chars / token"],
    rows: views.map(({ size, shown }) => {
      const tokens = shown.map((s) => qwenTokens(s).length);
      const chars = shown.reduce((a, s) => a + s.length, 0);
      return [
        size,
        shown.length,
        median(tokens),
        Math.max(...tokens),
        fmt(chars / tokens.reduce((a, b) => a + b, 0), 2),
      ];
    }),
  };
}

/** The GAIA-format mini set through the eval harness: tasks per minute per system and concurrency. */
async function evalSection(): Promise<BenchSection> {
  const home = mkdtempSync(join(tmpdir(), "codehop-bench-assistant-"));
  const site = await WebTestServer.start(demoSite());
  const model = await ScriptedOpenAIServer.start({ responder: gaiaMiniResponder(site.origin) });
  const saved = { ...process.env };
  process.env.CODEHOP_SEARCH_URL = site.url("/searxng");
  process.env.CODEHOP_WAYBACK_URL = site.url("/wayback/available");
  process.env.CODEHOP_BROWSER = "text";
  process.env.CODEHOP_ENV_FILE = "none";
  const rows: (string | number)[][] = [];
  try {
    const dataset = writeGaiaMiniSet(join(home, "gaia"));
    const env = readEnv({
      ...process.env,
      OPENAI_BASE_URL: model.baseURL,
      OPENAI_API_KEY: "bench",
      CODEHOP_MODEL: "scripted-model",
      CODEHOP_MAX_RETRIES: "0",
    });
    let n = 0;
    for (const [system, concurrency] of [
      ["assistant", 1],
      ["assistant", 2],
      ["direct", 1],
    ] as const) {
      const started = performance.now();
      const { report } = await runEval({
        dataset,
        format: "gaia",
        systems: [system],
        concurrency,
        out: join(home, `out-${n++}`),
        env,
        log: () => undefined,
      });
      const minutes = (performance.now() - started) / 60_000;
      const results = report.results;
      const tokens = results.reduce((a, r) => a + r.inputTokens + r.outputTokens, 0);
      rows.push([
        system,
        concurrency,
        results.length,
        fmt(results.reduce((a, r) => a + r.em, 0) / results.length, 2),
        fmt(tokens / results.length, 0),
        fmt(median(results.map((r) => r.wallMs)), 0),
        fmt(results.length / minutes, 1),
      ]);
    }
  } finally {
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
    await model.close();
    await site.close();
    rmSync(home, { recursive: true, force: true });
  }
  return {
    title: "Assistant: GAIA-format tasks per minute in eval",
    description:
      "The 4-task GAIA-format mini set of src/apps/assistant/demo-gaia.ts (a PDF and a spreadsheet attached; web tasks over a local site with a SearxNG-compatible API, text browser) run by runEval --format gaia with a scripted model at zero latency: what the harness, agents, sandbox, web and readers cost per task. Whole runs, per-run costs (corpus-free start, result store, report) included; one run per row.",
    columns: [
      "system",
      "concurrency",
      "tasks",
      "accuracy",
      "tokens / task",
      "median task ms",
      "tasks / minute",
    ],
    rows,
  };
}
