import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runEval } from "../../src/eval/runner.ts";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
} from "../../src/testing/scripted-openai-server.ts";
import {
  directRules,
  EVAL_FIXTURES as FIX,
  ragRules,
  scriptedEnv,
  syntheticReport,
} from "./scripted-eval.ts";

// Renders report.html in a real headless browser (when one is installed: `apt-get install chromium`)
// and checks that its script ran: Chart.js drew both charts and the drill-down list was built.
const browser = ["chromium", "chromium-browser", "google-chrome"].find(
  (b) => spawnSync("which", [b]).status === 0,
);
// CI (.ci/run sets CODEHOP_CI=1 and installs chromium) must run these tests, not skip them.
if (!browser && process.env.CODEHOP_CI === "1") {
  throw new Error("CODEHOP_CI=1 but no headless browser is installed (apt-get install chromium)");
}
let server: ScriptedOpenAIServer;

/** The page's DOM after its scripts ran (offline, up to 3 s of virtual time). */
const dumpDom = (url: string): string =>
  execFileSync(
    browser!,
    [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--virtual-time-budget=3000",
      "--dump-dom",
      url,
    ],
    { encoding: "utf8", timeout: 60_000, stdio: ["ignore", "pipe", "ignore"] },
  );

beforeAll(async () => {
  server = await ScriptedOpenAIServer.start({
    responder: trajectoryResponder([...ragRules(), ...directRules()]),
  });
});
afterAll(async () => server.close());

describe.skipIf(!browser)("report.html in a headless browser", () => {
  it("draws the charts and the per-question drill-down, offline from file://", async () => {
    const out = join(mkdtempSync(join(tmpdir(), "codehop-eval-html-")), "run");
    const res = await runEval({
      dataset: join(FIX, "hotpotqa.json"),
      systems: ["rag", "direct"],
      out,
      env: scriptedEnv(server.baseURL),
      log: () => undefined,
    });
    const url = `${pathToFileURL(res.files.html).href}#${encodeURIComponent(res.report.results[0].threadId)}`;
    const dom = dumpDom(url);
    // Chart.js sized both canvases (it only does so when it drew them)
    expect(dom).toMatch(/<canvas id="scatter"[^>]*style="display: block;/);
    expect(dom).toMatch(/<canvas id="bars"[^>]*style="display: block;/);
    expect(dom).toContain("6 shown");
    expect((dom.match(/<details class="q"/g) ?? []).length).toBe(6);
    // the question named in the URL's #thread-id is open
    expect(dom).toMatch(
      new RegExp(`<details class="q" id="${res.report.results[0].threadId}" open`),
    );
    expect(dom).toContain("Skipped records");
  });
  it("lists a large run page by page and still opens a #thread-id beyond the first page", async () => {
    const { writeFileSync } = await import("node:fs");
    const { htmlReport } = await import("../../src/eval/html.ts");
    const report = syntheticReport(450, { runId: "run", question: (i) => `Question ${i}?` });
    const file = join(mkdtempSync(join(tmpdir(), "codehop-eval-html-")), "big.html");
    writeFileSync(
      file,
      htmlReport(report, () => []),
    );
    const dom = dumpDom(`${pathToFileURL(file).href}#run%3Adirect%3Aq420`);
    expect(dom).toContain("450 shown (first 200 listed)");
    expect((dom.match(/<details class="q"/g) ?? []).length).toBe(201);
    expect(dom).toContain('<details class="q" id="run:direct:q420" open');
    expect(dom).toContain(">show more</button>");
  });
});
