/**
 * Page search vs passage search on real multi-hop data: the HotpotQA sample's questions (distractor
 * setting) with all their paragraphs pooled into one corpus, ingested by codehop's own ingest, then
 * supporting-page recall@k and both@k of `search_wikipedia`'s page ranking and of plain passage
 * search, side by side. The sample is not in the repository: it is read from ../shared/data/hotpotqa
 * (see docs/knowledge.md, "Quality and performance"); without it the bench says so and keeps the
 * recorded figures.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { datasetDocuments } from "../src/eval/corpus.ts";
import { loadDataset } from "../src/eval/datasets.ts";
import type { EvalExample } from "../src/eval/types.ts";
import { ingestDocuments } from "../src/ingest/index.ts";
import { CorpusSource } from "../src/store/corpus-source.ts";
import { BenchSkipped, type BenchSection, fmt } from "./lib.ts";
import {
  BOTH_KS,
  RECALL_KS,
  type RetrievalScores,
  comparePageAndPassageSearch,
  metricsBelow,
} from "./supporting-pages.ts";

const FILES = ["rpt_dev.jsonl", "rpt_train.jsonl"];
const REPO = resolve(import.meta.dirname, "..");
/** Where the shared sample may be: next to the repository, or next to the folder of worktrees. */
export const HOTPOTQA_DIRS = [
  join(REPO, "..", "shared", "data", "hotpotqa"),
  join(REPO, "..", "..", "shared", "data", "hotpotqa"),
];

function findSample(): string {
  const dir = HOTPOTQA_DIRS.find((d) => FILES.every((f) => existsSync(join(d, f))));
  if (!dir)
    throw new BenchSkipped(
      `the HotpotQA sample (${FILES.join(", ")}, CC BY-SA 4.0) is not in ${HOTPOTQA_DIRS.join(" or ")}; ` +
        "put HotpotQA distractor-setting files in Hugging Face layout there to run this benchmark",
    );
  return dir;
}

function row(name: string, split: string, s: RetrievalScores): (string | number)[] {
  return [
    name,
    split,
    s.questions,
    ...RECALL_KS.map((k) => fmt(s.recall[k], 3)),
    ...BOTH_KS.map((k) => fmt(s.both[k], 3)),
    fmt(s.p50Ms, 1),
  ];
}

export default async function hotpotqaBench(): Promise<BenchSection[]> {
  const dir = findSample();
  const splits = FILES.map((f) => ({
    name: f.replace(/^rpt_|\.jsonl$/g, ""),
    examples: loadDataset(join(dir, f), { format: "hotpotqa" }).examples,
  }));
  const all: EvalExample[] = splits.flatMap((s) => s.examples);
  const tmp = mkdtempSync(join(tmpdir(), "codehop-hotpot-"));
  try {
    const db = join(tmp, "hotpotqa.db");
    const report = await ingestDocuments(db, datasetDocuments(all, "hotpotqa"));
    const source = CorpusSource.open(db);
    const rows: (string | number)[][] = [];
    const verdicts: string[] = [];
    try {
      // Warm up (statement caches, the temp vocabulary tables) so the first split's latency is comparable.
      await source.search(all[0].question);
      await source.searchPassages(all[0].question);
      for (const split of [...splits, { name: "all", examples: all }]) {
        const questions = split.examples.map((e) => ({
          question: e.question,
          supporting: e.supportingTitles,
        }));
        const { page, passage } = await comparePageAndPassageSearch(source, questions);
        rows.push(row("page search (search_wikipedia)", split.name, page));
        rows.push(row("passage search (rag baseline)", split.name, passage));
        const below = metricsBelow(page, passage);
        verdicts.push(
          `${split.name}: page search >= passage search on every metric: ${below.length ? `NOT MET (below on ${below.join(", ")})` : "MET"}`,
        );
      }
    } finally {
      await source.close();
    }
    return [
      {
        title: "Knowledge: page search vs passage search on real HotpotQA",
        description: `${all.length} real HotpotQA questions (distractor setting, ${splits.map((s) => `${s.name} ${s.examples.length}`).join(" + ")}, CC BY-SA 4.0, Yang et al. 2018) with every question's paragraphs pooled into one corpus: ${report.added.toLocaleString("en")} pages, ${report.passages.toLocaleString("en")} passages, ingested by \`ingestDocuments\` (512/256 chunking, BM25). The query is the question text. recall@k: mean share of a question's supporting pages among the first k results; both@k: share of questions with both supporting pages in the first k. Page search returns pages (\`search_wikipedia\`); passage search returns passages (\`searchPassages\`, the rag baseline), so its k results may repeat a page. p50 ms: median latency of one call.`,
        columns: [
          "retrieval",
          "split",
          "questions",
          ...RECALL_KS.map((k) => `recall@${k}`),
          ...BOTH_KS.map((k) => `both@${k}`),
          "p50 ms",
        ],
        rows,
        verdicts,
      },
    ];
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
