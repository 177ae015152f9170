import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ingestPath } from "../../src/ingest/index.ts";
import { CorpusSource } from "../../src/store/corpus-source.ts";
import { MediaWikiTestServer } from "../../src/testing/mediawiki-test-server.ts";
import type { KnowledgeSource } from "../../src/store/types.ts";
import { WikipediaSource } from "../../src/store/wikipedia-source.ts";
import { parseToolArgs, renderToolDoc, ToolArgumentError } from "../../src/tools/define-tool.ts";
import { createRetrievePassagesTool } from "../../src/apps/qa/tools/retrieve-passages.ts";
import { createSearchWikipediaTool } from "../../src/apps/qa/tools/search-wikipedia.ts";
import { DEMO_CORPUS, demoDocuments, tempDir } from "./helpers.ts";

const tmp = tempDir();
const ctx = { callIndex: 0, signal: new AbortController().signal };
let corpus: CorpusSource;
let server: MediaWikiTestServer;
let wiki: WikipediaSource;

beforeAll(async () => {
  const db = join(tmp.dir, "demo.db");
  await ingestPath(db, DEMO_CORPUS);
  corpus = CorpusSource.open(db);
  // The same articles served as online Wikipedia, so both sources can be held to the same output.
  server = await MediaWikiTestServer.start([
    ...demoDocuments().map((d) => ({ title: d.title, text: d.text })),
    {
      title: "Tower (disambiguation)",
      text: "Tower may refer to:",
      disambiguation: ["Eiffel Tower", "Tokyo Tower"],
    },
  ]);
  wiki = new WikipediaSource({ apiUrl: server.apiUrl, retryDelayMs: 1 });
});
afterAll(async () => {
  await corpus.close();
  await wiki.close();
  await server.stop();
  tmp.cleanup();
});

async function call(
  tool: ReturnType<typeof createSearchWikipediaTool>,
  ...args: unknown[]
): Promise<string> {
  return (await tool.invoke(parseToolArgs(tool, args) as { query: string }, ctx)) as string;
}

describe.each([
  ["local corpus", () => corpus as KnowledgeSource],
  ["online Wikipedia (local MediaWiki API)", () => wiki as KnowledgeSource],
])("tools over the %s", (_name, getSource) => {
  it("search_wikipedia lists up to 5 pages as 'Page: <title>\\nSummary: <...>'", async () => {
    const out = await call(createSearchWikipediaTool(getSource()), "Eiffel Tower");
    const lines = out.split("\n");
    expect(lines[0]).toBe("Pages found for query 'Eiffel Tower':");
    expect(lines[1]).toBe("Page: Eiffel Tower");
    expect(lines[2]).toMatch(/^Summary: The Eiffel Tower is a wrought-iron lattice tower/);
    expect(lines.filter((l) => l.startsWith("Page: ")).length).toBe(5);
    expect(lines.filter((l) => l.startsWith("Summary: ")).length).toBe(5);
  });

  it("search_wikipedia answers an empty query with a usage hint", async () => {
    const out = await call(createSearchWikipediaTool(getSource()), "   ");
    expect(out).toMatch(/query is empty/);
  });

  it("retrieve_passages returns numbered passages, best first, with their section", async () => {
    const tool = createRetrievePassagesTool(getSource(), "Empire State Building");
    const out = await call(tool, "when did construction start and when did it open");
    const lines = out.split("\n");
    expect(lines[0]).toBe(
      'Retrieved passages for query "when did construction start and when did it open":',
    );
    expect(lines[1]).toMatch(/^Passage 0: \[Construction\] .*17 March 1930.*1 May 1931/);
    expect(lines.filter((l) => /^Passage \d: /.test(l)).length).toBeLessThanOrEqual(5);
  });

  it("retrieve_passages on an unknown page suggests close titles", async () => {
    const tool = createRetrievePassagesTool(getSource(), "Empire State Buildin");
    const out = await call(tool, "height");
    expect(out).toMatch(
      /^No page titled "Empire State Buildin" was found\. Did you mean: .*"Empire State Building"/,
    );
  });
});

describe("tool contracts", () => {
  it("validates arguments with zod (wrong type / too many arguments)", () => {
    const tool = createSearchWikipediaTool(corpus);
    expect(() => parseToolArgs(tool, [42])).toThrow(ToolArgumentError);
    expect(() => parseToolArgs(tool, ["a", "b"])).toThrow(/takes 1 argument/);
    expect(parseToolArgs(tool, [{ query: "x" }])).toEqual({ query: "x" });
  });

  it("render into the prompt as JS signatures", () => {
    expect(renderToolDoc(createSearchWikipediaTool(corpus))).toContain(
      "async function search_wikipedia(query: string): Promise<string>",
    );
    expect(renderToolDoc(createRetrievePassagesTool(corpus, "Paris"))).toContain(
      'passages of the page "Paris"',
    );
  });

  it("retrieve_passages reports the page it answered from as a source", async () => {
    const reports: unknown[] = [];
    const tool = createRetrievePassagesTool(wiki, "Eiffel Tower");
    await tool.invoke({ query: "construction" }, { ...ctx, report: (r) => reports.push(r) });
    expect(reports).toEqual([
      {
        sources: [
          {
            title: "Eiffel Tower",
            url: "https://test.wiki/wiki/Eiffel_Tower",
            source: "wikipedia",
            sections: expect.arrayContaining(["Construction"]),
          },
        ],
      },
    ]);
    await createRetrievePassagesTool(wiki, "No such page").invoke(
      { query: "x" },
      { ...ctx, report: (r) => reports.push(r) },
    );
    expect(reports).toHaveLength(1);
  });

  it("retrieve_passages on a disambiguation page lists its options (online)", async () => {
    const out = await call(createRetrievePassagesTool(wiki, "Tower (disambiguation)"), "height");
    expect(out).toBe(
      '"Tower (disambiguation)" is a disambiguation page. It may refer to: "Eiffel Tower", "Tokyo Tower". Call again with one of these exact titles.',
    );
  });
});
