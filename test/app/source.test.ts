import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ensureDemoCorpus } from "../../src/apps/qa/demo.ts";
import { sourceFromConfig } from "../../src/apps/common/knowledge-source.ts";
import { createPageSearchAgent } from "../../src/apps/qa/team.ts";
import { createSearchInfoTool } from "../../src/apps/qa/team.ts";
import { openKnowledgeSource } from "../../src/store/index.ts";
import type { KnowledgeSource } from "../../src/store/types.ts";

describe("knowledge source of a run", () => {
  it("uses configurable.knowledgeSource, else configurable.corpus (a DB path), opened lazily once", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-src-"));
    const corpus = await ensureDemoCorpus(home);
    const given = { kind: "corpus", search: async () => [] } as unknown as KnowledgeSource;
    expect(sourceFromConfig({ configurable: { knowledgeSource: given, corpus } })).toBe(given);

    const a = sourceFromConfig({ configurable: { corpus } });
    expect(sourceFromConfig({ configurable: { corpus } })).toBe(a);
    expect(a.kind).toBe("corpus");
    const hits = await a.search("birch plywood density");
    expect(hits.map((h) => h.title)).toContain("Birch plywood");
    await a.close();
  });

  it("builds the demo corpus once and rebuilds it when data/demo-corpus.jsonl changes", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-demo-corpus-"));
    const db = await ensureDemoCorpus(home);
    const built = statSync(db).mtimeMs;
    expect(await ensureDemoCorpus(home)).toBe(db);
    expect(statSync(db).mtimeMs).toBe(built);
    writeFileSync(`${db}.sha256`, "stale\n"); // as if the JSONL had changed since
    await ensureDemoCorpus(home);
    expect(readFileSync(`${db}.sha256`, "utf8").trim()).toMatch(/^[0-9a-f]{64}$/);
    expect(statSync(db).mtimeMs).toBeGreaterThanOrEqual(built);
  });

  it("search_info answers an unknown or misspelled page without running the page agent", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-search-info-"));
    const source = openKnowledgeSource({ corpus: await ensureDemoCorpus(home) });
    let pageAgentRuns = 0;
    const pageAgent = createPageSearchAgent({ source });
    const counting = {
      ...pageAgent,
      asTool: (o: any) => {
        const t = pageAgent.asTool(o);
        return {
          ...t,
          invoke: async (...a: any[]) => {
            pageAgentRuns++;
            return (t.invoke as any)(...a);
          },
        };
      },
    };
    const tool = createSearchInfoTool(counting as any, source);
    const reported: unknown[] = [];
    const ctx = {
      callIndex: 0,
      signal: new AbortController().signal,
      report: (r: unknown) => reported.push(r),
    };
    const out = (await tool.invoke({ query: "height", page: "Eifel Tower" }, ctx)) as string;
    expect(out).toContain('No page titled "Eifel Tower"');
    expect(out).toContain('"Eiffel Tower"');
    expect(pageAgentRuns).toBe(0);
    expect(reported).toEqual([]);
    await source.close();
  });
});
