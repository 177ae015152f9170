import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ensureDemoCorpus } from "../../src/app/demo.ts";
import { sourceFromConfig } from "../../src/app/source.ts";
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
});
