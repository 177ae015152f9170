import { mkdtempSync } from "node:fs";
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
});
