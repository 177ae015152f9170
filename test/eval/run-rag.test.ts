import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { datasetDocuments } from "../../src/eval/corpus.ts";
import { loadDataset } from "../../src/eval/datasets.ts";
import { runEval } from "../../src/eval/runner.ts";
import { ingestDocuments } from "../../src/ingest/ingest.ts";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
} from "../../src/testing/scripted-openai-server.ts";
import { directRules, FIXTURE_PAGES, Q1, Q2, ragRules, scriptedEnv } from "./scripted-eval.ts";

const FIX = join(import.meta.dirname, "../fixtures/eval");
const tmp = mkdtempSync(join(tmpdir(), "codehop-eval-rag-"));
const quiet = () => undefined;
let server: ScriptedOpenAIServer;

beforeAll(async () => {
  server = await ScriptedOpenAIServer.start({
    responder: trajectoryResponder([...directRules(), ...ragRules()]),
  });
});
afterAll(async () => server.close());

function ragPrompt(question: string, since: number): string {
  const req = server.requests
    .slice(since)
    .find((r) => r.rule?.startsWith("rag:") && r.request.messages[1].content.includes(question));
  if (!req) throw new Error(`no rag request for ${question}`);
  return req.request.messages[1].content;
}

describe("corpus per dataset", () => {
  it("merges the distinct paragraphs of each title across questions into one document", () => {
    const ds = loadDataset(join(FIX, "hotpotqa.json"));
    const docs = datasetDocuments(ds.examples, "hotpotqa");
    expect(docs.map((d) => d.title)).toEqual([
      "Blue Pavilion",
      "Ingrid Halvorsen",
      "Green Bridge",
      "Marek Zelny",
      "Red Tower",
    ]);
    expect(docs[0].text).toBe(FIXTURE_PAGES[0].text);
    const merged = datasetDocuments(
      [
        {
          ...ds.examples[0],
          paragraphs: [
            { title: "T", text: "one" },
            { title: "T", text: "two" },
            { title: "T", text: "one" },
          ],
        },
      ],
      "x",
    );
    expect(merged).toEqual([{ title: "T", text: "one\n\ntwo", source: "x" }]);
  });
});

describe.each([
  ["hotpotqa.json", "hotpotqa"],
  ["2wiki.json", "2wiki"],
  ["musique.jsonl", "musique"],
] as const)(
  "rag vs direct on %s (dataset paragraphs ingested into <out>/corpus.db)",
  (file, format) => {
    it("retrieves from the dataset's own paragraphs and reports both systems with the same model", async () => {
      const out = join(tmp, format);
      const since = server.requests.length;
      const res = await runEval({
        dataset: join(FIX, file),
        systems: ["rag", "direct"],
        out,
        env: scriptedEnv(server.baseURL),
        log: quiet,
      });
      expect(existsSync(join(out, "corpus.db"))).toBe(true);
      expect(res.report.dataset.source).toMatchObject({
        kind: "dataset-corpus",
        documents: 5,
        ranking: "bm25",
      });
      const [rag, direct] = res.report.systems;
      expect(rag.system).toBe("rag");
      expect(rag.em).toBeCloseTo(2 / 3, 10);
      expect(rag.f1).toBeCloseTo(2 / 3, 10);
      expect(rag.coverEm).toBeCloseTo(2 / 3, 10);
      // every question's supporting pages were among the retrieved passages' pages
      expect(rag.supportRecall).toBe(1);
      expect(direct.supportRecall).toBeUndefined();
      expect(rag.avgInputTokens).toBe(300);
      expect(rag.avgOutputTokens).toBe(4);
      expect(direct.em).toBeCloseTo(1 / 3, 10);
      // the bridge paragraphs were retrieved for the questions that need them
      expect(ragPrompt(Q1, since)).toContain("born 1961 in Bergen, Norway");
      expect(ragPrompt(Q2, since)).toContain("40-metre observation tower in Porto");
      const q1 = res.report.results.find((r) => r.system === "rag" && r.question === Q1)!;
      expect(q1.prediction).toBe("Norway");
      expect(q1.sources).toContain("Ingrid Halvorsen");
      const config = res.report.config as any;
      expect(config.model.model).toBe("scripted-model");
      expect(config.systems.rag).toMatchObject({ k: 5, prompts: { system: "eval/rag.md" } });
      expect(config.systems.direct.prompts.system).toBe("eval/direct.md");
    });
  },
);

describe("rag without dataset paragraphs", () => {
  it("uses the configured corpus (CODEHOP_CORPUS) for plain JSONL, and a rerun reuses everything", async () => {
    const corpus = join(tmp, "configured.db");
    await ingestDocuments(corpus, FIXTURE_PAGES);
    const out = join(tmp, "plain");
    const env = scriptedEnv(server.baseURL, { CODEHOP_CORPUS: corpus });
    const res = await runEval({
      dataset: join(FIX, "plain.jsonl"),
      systems: ["rag"],
      out,
      env,
      log: quiet,
    });
    expect(res.report.dataset.source).toEqual({ kind: "configured-corpus", path: corpus });
    expect(existsSync(join(out, "corpus.db"))).toBe(false);
    expect(res.report.systems[0].em).toBeCloseTo(2 / 3, 10);
    const again = await runEval({
      dataset: join(FIX, "plain.jsonl"),
      systems: ["rag"],
      out,
      env,
      log: quiet,
    });
    expect(again.ran).toBe(0);
    expect(again.report.systems[0].em).toBeCloseTo(2 / 3, 10);
  });

  it("a rerun over the same dataset does not ingest again", async () => {
    const out = join(tmp, "reingest");
    const lines: string[] = [];
    await runEval({
      dataset: join(FIX, "hotpotqa.json"),
      systems: ["rag"],
      out,
      env: scriptedEnv(server.baseURL),
      limit: 1,
      log: (l) => lines.push(l),
    });
    expect(lines.filter((l) => l.startsWith("ingesting"))).toHaveLength(1);
    // --limit does not change the corpus: it is built from every question of the file
    const res = await runEval({
      dataset: join(FIX, "hotpotqa.json"),
      systems: ["rag"],
      out,
      env: scriptedEnv(server.baseURL),
      log: (l) => lines.push(l),
    });
    expect(lines.filter((l) => l.startsWith("ingesting"))).toHaveLength(1);
    expect(res.report.dataset.source).toMatchObject({ kind: "dataset-corpus", documents: 5 });
  });
});

describe("configuration changes", () => {
  it("refuses to mix rag results of different k in one output directory, but adding a system is fine", async () => {
    const out = join(tmp, "k-change");
    const env = scriptedEnv(server.baseURL);
    await runEval({
      dataset: join(FIX, "hotpotqa.json"),
      systems: ["rag"],
      out,
      env,
      limit: 1,
      log: quiet,
    });
    await expect(
      runEval({
        dataset: join(FIX, "hotpotqa.json"),
        systems: ["rag"],
        out,
        env,
        k: 3,
        log: quiet,
      }),
    ).rejects.toThrow(/holds rag results made with a different configuration/);
    const res = await runEval({
      dataset: join(FIX, "hotpotqa.json"),
      systems: ["direct", "rag"],
      out,
      env,
      log: quiet,
    });
    expect(res.skipped).toBe(1);
    expect(Object.keys((res.report.config as any).systems).sort()).toEqual(["direct", "rag"]);
  });
});

describe("hybrid retrieval", () => {
  it("with an embeddings endpoint configured, the dataset corpus gets vectors and rag ranks hybrid", async () => {
    const out = join(tmp, "hybrid");
    const before = server.embeddingRequests;
    const env = scriptedEnv(server.baseURL, {
      CODEHOP_EMBEDDINGS_BASE_URL: server.baseURL,
      CODEHOP_EMBEDDINGS_MODEL: "hashed-bow",
    });
    const res = await runEval({
      dataset: join(FIX, "musique.jsonl"),
      systems: ["rag"],
      out,
      env,
      log: quiet,
    });
    expect(res.report.dataset.source).toMatchObject({
      kind: "dataset-corpus",
      ranking: "hybrid (hashed-bow)",
    });
    // passages embedded at ingest, then one query embedding per question
    expect(server.embeddingRequests - before).toBeGreaterThanOrEqual(1 + 3);
    expect(res.report.systems[0].em).toBeCloseTo(2 / 3, 10);
  });
});

describe("interrupted corpus ingestion", () => {
  it("stops with RUN_INTERRUPTED after a batch, and the next run completes the corpus", async () => {
    const { openEvalSource } = await import("../../src/eval/corpus.ts");
    const base = loadDataset(join(FIX, "hotpotqa.json"));
    const examples = Array.from({ length: 1000 }, (_, i) => ({
      ...base.examples[0],
      id: `x${i}`,
      paragraphs: [{ title: `Page ${i}`, text: `Page ${i} is about the number ${i}.` }],
    }));
    const out = join(tmp, "ingest-abort");
    const ac = new AbortController();
    ac.abort();
    await expect(
      openEvalSource(base, examples, out, scriptedEnv(server.baseURL), quiet, undefined, ac.signal),
    ).rejects.toMatchObject({
      code: "CODEHOP_RUN_INTERRUPTED",
    });
    const { source, info } = await openEvalSource(
      base,
      examples,
      out,
      scriptedEnv(server.baseURL),
      quiet,
    );
    try {
      expect(info).toMatchObject({ kind: "dataset-corpus", documents: 1000 });
      expect((await source.searchPassages!("number 999", { k: 1 }))[0].title).toBe("Page 999");
    } finally {
      await source.close();
    }
  });
});

describe("dataset edited between runs", () => {
  it("rebuilds the corpus so no page of the old version lingers", async () => {
    const {
      copyFileSync,
      readFileSync: read,
      writeFileSync: write,
      mkdirSync: mkdir,
    } = await import("node:fs");
    const dir = join(tmp, "edited");
    mkdir(dir, { recursive: true });
    const file = join(dir, "hotpotqa.json");
    copyFileSync(join(FIX, "hotpotqa.json"), file);
    const out = join(dir, "out");
    const env = scriptedEnv(server.baseURL);
    await runEval({ dataset: file, systems: ["rag"], out, env, limit: 1, log: quiet });
    write(file, read(file, "utf8").replaceAll("Green Bridge", "Yellow Bridge"));
    const lines: string[] = [];
    const res = await runEval({
      dataset: file,
      systems: ["rag"],
      out,
      env,
      log: (l) => lines.push(l),
    });
    expect(lines.some((l) => l.startsWith("ingesting"))).toBe(true);
    expect(res.report.dataset.source).toMatchObject({ documents: 5 });
    const { openKnowledgeSource } = await import("../../src/store/open.ts");
    const source = openKnowledgeSource({ corpus: join(out, "corpus.db") });
    try {
      expect((await source.getPage("Green Bridge")).status).toBe("missing");
      expect((await source.getPage("Yellow Bridge")).status).toBe("found");
    } finally {
      await source.close();
    }
  });
});
