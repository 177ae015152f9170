import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BOTH_KS,
  RECALL_KS,
  comparePageAndPassageSearch,
  metricsBelow,
} from "../../bench/supporting-pages.ts";
import { datasetDocuments } from "../../src/eval/corpus.ts";
import { loadDataset } from "../../src/eval/datasets.ts";
import { ingestDocuments } from "../../src/ingest/index.ts";
import { CorpusSource } from "../../src/store/corpus-source.ts";
import { tempDir } from "./helpers.ts";

// 30 real HotpotQA questions (CC BY-SA 4.0, see test/fixtures/real/README.md) with their gold and
// distractor paragraphs pooled into one corpus, as bench/hotpotqa.bench.ts does with 600.
const FIXTURE = join(import.meta.dirname, "../fixtures/real/hotpotqa-train-30.jsonl");
const examples = loadDataset(FIXTURE, { format: "hotpotqa" }).examples;
const tmp = tempDir();
let source: CorpusSource;

beforeAll(async () => {
  const db = join(tmp.dir, "hotpot.db");
  await ingestDocuments(db, datasetDocuments(examples, "hotpotqa"));
  source = CorpusSource.open(db);
});
afterAll(async () => {
  await source.close();
  tmp.cleanup();
});

describe("page search on real multi-hop questions (HotpotQA, pooled distractors)", () => {
  it("finds supporting pages at least as well as passage search, on every metric", async () => {
    expect(examples).toHaveLength(30);
    const questions = examples.map((e) => ({
      question: e.question,
      supporting: e.supportingTitles,
    }));
    const { page, passage } = await comparePageAndPassageSearch(source, questions);
    const line = (s: typeof page) =>
      [
        ...RECALL_KS.map((k) => `recall@${k}=${s.recall[k].toFixed(3)}`),
        ...BOTH_KS.map((k) => `both@${k}=${s.both[k].toFixed(3)}`),
      ].join(" ");
    console.log(`page search:    ${line(page)}\npassage search: ${line(passage)}`);
    expect(metricsBelow(page, passage)).toEqual([]);
    // The point of page search for multi-hop questions: both hops' pages in the first five.
    expect(page.both[5]).toBeGreaterThan(passage.both[5]);
  });

  it("puts the pages a question names above distractors sharing words of their titles", async () => {
    const top2 = async (q: string) =>
      (await source.search(q))
        .slice(0, 2)
        .map((h) => h.title)
        .sort();
    // "Philippe Perrin (artist)" shares the name but not the qualifier; "Marsilea minuta" is a
    // species page under the genus the question names.
    expect(
      await top2("Between two scientists Ernst Messerschmid and Philippe Perrin, who is older?"),
    ).toEqual(["Ernst Messerschmid", "Philippe Perrin"]);
    expect(
      await top2("Is the Marsilea or the Brabejum the genus of more individual species of plants?"),
    ).toEqual(["Brabejum", "Marsilea"]);
  });
});
