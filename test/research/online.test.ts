import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEMO_CORPUS_JSONL } from "../../src/apps/qa/demo.ts";
import { research } from "../../src/apps/research/app.ts";
import { DEMO_RESEARCH, researchResponder } from "../../src/apps/research/demo-trajectories.ts";
import { MediaWikiTestServer } from "../../src/testing/mediawiki-test-server.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";

// The research run against the online knowledge source: the real Wikipedia client talking to a
// local MediaWiki-like server that serves the demo corpus's pages. Citations then carry the page
// URL and passage ids `<title>#<chunk>`, stable for the same page text.

const pages = readFileSync(DEMO_CORPUS_JSONL, "utf8")
  .split("\n")
  .filter((l) => l.trim())
  .map((l) => JSON.parse(l) as { title: string; text: string });
let wiki: MediaWikiTestServer;
let model: ScriptedOpenAIServer;
beforeAll(async () => {
  wiki = await MediaWikiTestServer.start(pages.map(({ title, text }) => ({ title, text })));
  model = await ScriptedOpenAIServer.start({ responder: researchResponder() });
});
afterAll(async () => {
  await wiki?.stop();
  await model?.close();
});

describe("research over online Wikipedia (a local MediaWiki server)", { timeout: 120_000 }, () => {
  it("cites passages with their page URL and a passage id, every one a chunk of the page served", async () => {
    const config = {
      home: mkdtempSync(join(tmpdir(), "codehop-research-online-")),
      wikipediaApi: wiki.apiUrl,
      baseURL: model.baseURL,
      apiKey: "test",
      model: "scripted",
      models: {},
    };
    const result = await research(DEMO_RESEARCH.topic, { config });
    expect(result.status).toBe("final_answer");
    expect(result.questions.every((q) => q.status === "answered")).toBe(true);
    expect(result.citations.length).toBeGreaterThan(0);
    const byTitle = new Map(pages.map((p) => [p.title, p.text.replace(/\s+/g, " ")]));
    for (const c of result.citations) {
      expect(c.source).toBe("wikipedia");
      expect(c.passage_id).toMatch(new RegExp(`^${c.title}#\\d+$`));
      expect(c.url).toMatch(/^https?:\/\//);
      expect(byTitle.get(c.title)).toContain(c.text.replace(/\s+/g, " ").slice(0, 80));
      expect(result.report).toContain(`passage ${c.passage_id} (wikipedia) <${c.url}>`);
    }
    expect(result.html).toContain(`href="${result.citations[0].url}"`);
  });
});
