import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readEnv } from "../src/config/env.ts";
import { datasetDocuments } from "../src/eval/corpus.ts";
import { loadDataset } from "../src/eval/datasets.ts";
import { scoreAnswer } from "../src/eval/metrics.ts";
import { runEval } from "../src/eval/runner.ts";
import type { EvalExample } from "../src/eval/types.ts";
import { ingestDocuments } from "../src/ingest/ingest.ts";
import { openKnowledgeSource } from "../src/store/open.ts";
import { ScriptedOpenAIServer } from "../src/testing/scripted-openai-server.ts";
import { type BenchSection, fmt, percentile } from "./lib.ts";

/**
 * Evaluation harness overhead, with a scripted model so only codehop's own cost is measured:
 * loading a HotpotQA-dev-sized file, scoring, and the per-question cost of the runner (HTTP to
 * the local server, result row, reports) for the `direct` system.
 */
export default async function evalBench(): Promise<BenchSection[]> {
  const dir = mkdtempSync(join(tmpdir(), "codehop-bench-eval-"));
  try {
    const loading = loadingBench(dir);
    return [
      loading.section,
      await corpusBench(dir, loading.examples),
      scoringBench(),
      await runnerBench(dir),
      await concurrencyBench(dir),
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const WORDS =
  "the river city tower born architect film album released country capital bridge museum founded river".split(
    " ",
  );
const SYLLABLES = "ka lo mi re su ta vo ne pi da ru fe go hu ji".split(" ");
/** A vocabulary of 5,000 pseudo-words, so word frequencies look more like text than a 15-word loop. */
const VOCAB = Array.from(
  { length: 5000 },
  (_, i) =>
    SYLLABLES[i % 15] + SYLLABLES[Math.floor(i / 15) % 15] + SYLLABLES[Math.floor(i / 225) % 15],
);
function sentence(i: number): string {
  let x = (i * 2654435761) >>> 0;
  const words = Array.from({ length: 18 }, () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    // Zipf-ish: common words often, rare words rarely
    return x % 4 === 0
      ? WORDS[x % WORDS.length]
      : VOCAB[Math.floor(((x >>> 8) % 5000) ** 2 / 5000)];
  });
  return words.join(" ") + ". ";
}

function loadingBench(dir: string): { section: BenchSection; examples: EvalExample[] } {
  // HotpotQA dev (distractor) has 7,405 questions with 10 paragraphs each, ~46 MB.
  const n = 7405;
  const records = Array.from({ length: n }, (_, i) => ({
    _id: `5a8b57f25542995d1e6f13${i.toString(16).padStart(2, "0")}`,
    question: `Which tower was designed by the architect Zelnik${i} born in ${VOCAB[(i * 7) % 5000]}?`,
    answer: `Tower ${i}`,
    type: i % 5 ? "bridge" : "comparison",
    level: "hard",
    supporting_facts: [
      [`Title ${i}-0`, 0],
      [`Title ${i}-1`, 1],
    ],
    context: Array.from({ length: 10 }, (_, p) => [
      p === 0 ? `Zelnik${i}` : `Title ${i}-${p}`,
      [
        p === 0 ? `Zelnik${i} is an architect born in ${VOCAB[(i * 7) % 5000]}. ` : "",
        ...Array.from({ length: 4 }, (_, s) => sentence(i * 10 + p * 4 + s)),
      ],
    ]),
  }));
  const path = join(dir, "hotpot_dev_like.json");
  writeFileSync(path, JSON.stringify(records));
  const mb = statSync(path).size / 1024 ** 2;
  const times: number[] = [];
  let examples: EvalExample[] = [];
  for (let r = 0; r < 3; r++) {
    const t = performance.now();
    const ds = loadDataset(path);
    times.push(performance.now() - t);
    if (ds.examples.length !== n) throw new Error(`loaded ${ds.examples.length} of ${n}`);
    examples = ds.examples;
  }
  const best = Math.min(...times);
  const section: BenchSection = {
    title: "Eval: loading a HotpotQA-dev-sized dataset",
    description: `A synthetic JSON array shaped like HotpotQA dev (distractor): ${n} questions × 10 paragraphs, ${fmt(mb, 1)} MB, loaded with loadDataset (array split into records, each parsed and validated on its own). Best of 3.`,
    columns: ["questions", "MB", "load ms (best)", "load ms (median)", "MB/s"],
    rows: [
      [n, fmt(mb, 1), fmt(best, 0), fmt(percentile(times, 50), 0), fmt(mb / (best / 1000), 1)],
    ],
    verdicts: [
      `full HotpotQA dev loads in under 5 s: ${best < 5000 ? "MET" : "NOT MET"} (${fmt(best / 1000, 2)} s)`,
    ],
  };
  return { section, examples };
}

async function corpusBench(dir: string, examples: EvalExample[]): Promise<BenchSection> {
  const docs = datasetDocuments(examples, "bench");
  const path = join(dir, "corpus.db");
  const t = performance.now();
  const report = await ingestDocuments(path, docs);
  const ingestMs = performance.now() - t;
  const source = openKnowledgeSource({ corpus: path });
  const latencies: number[] = [];
  let found = 0;
  try {
    for (let i = 0; i < 200; i++) {
      const q = examples[(i * 37) % examples.length].question;
      const t0 = performance.now();
      const hits = await source.searchPassages!(q, { k: 5 });
      latencies.push(performance.now() - t0);
      if (hits.length === 0) throw new Error(`no passages for ${q}`);
      if (hits.some((h) => q.includes(h.title))) found++;
    }
  } finally {
    await source.close();
  }
  return {
    title: "Eval: per-dataset corpus (ingest + rag retrieval)",
    description: `The paragraphs of the HotpotQA-dev-sized file above, merged per title (datasetDocuments) and ingested with ingestDocuments (BM25, no embeddings) into a corpus DB, as \`codehop eval\` does once per output directory; then 200 rag retrievals (searchPassages, k = 5) with questions as queries.`,
    columns: [
      "documents",
      "passages",
      "ingest s",
      "docs / s",
      "retrieval p50 ms",
      "retrieval p95 ms",
      "named page in top 5",
    ],
    rows: [
      [
        docs.length,
        report.passages,
        fmt(ingestMs / 1000, 1),
        fmt(docs.length / (ingestMs / 1000), 0),
        fmt(percentile(latencies, 50), 1),
        fmt(percentile(latencies, 95), 1),
        `${found}/${latencies.length}`,
      ],
    ],
  };
}

function scoringBench(): BenchSection {
  const n = 100_000;
  const preds = Array.from({ length: n }, (_, i) =>
    i % 3 ? `The ${WORDS[i % WORDS.length]} Tower, ${i}` : `tower ${i}`,
  );
  const t = performance.now();
  let em = 0;
  for (let i = 0; i < n; i++) em += scoreAnswer(preds[i], [`Tower ${i}`, `the tower no. ${i}`]).em;
  const ms = performance.now() - t;
  if (em === 0) throw new Error("scoring produced no matches");
  return {
    title: "Eval: scoring",
    description: `EM + F1 + cover-EM of ${n.toLocaleString("en")} predictions, each against a gold answer and one alias.`,
    columns: ["predictions", "total ms", "µs / prediction"],
    rows: [[n, fmt(ms, 0), fmt((ms * 1000) / n, 2)]],
  };
}

async function runnerBench(dir: string): Promise<BenchSection> {
  const n = 200;
  const path = join(dir, "plain.jsonl");
  writeFileSync(
    path,
    Array.from({ length: n }, (_, i) =>
      JSON.stringify({ id: `q${i}`, question: `Question number ${i}?`, answer: `answer ${i}` }),
    ).join("\n"),
  );
  const server = await ScriptedOpenAIServer.start({
    responder: (req) => {
      const m = /Question number (\d+)/.exec(req.messages.at(-1)?.content ?? "");
      return {
        content: m && Number(m[1]) % 2 === 0 ? `answer ${m[1]}` : "wrong",
        usage: { prompt_tokens: 80, completion_tokens: 3 },
      };
    },
  });
  const env = readEnv({
    OPENAI_BASE_URL: server.baseURL,
    OPENAI_API_KEY: "bench",
    CODEHOP_MODEL: "scripted",
    CODEHOP_MAX_RETRIES: "0",
  });
  const rows: (string | number)[][] = [];
  try {
    for (const concurrency of [1, 4]) {
      const out = join(dir, `run-c${concurrency}`);
      const t = performance.now();
      const res = await runEval({
        dataset: path,
        systems: ["direct"],
        out,
        env,
        concurrency,
        progress: false,
        log: () => undefined,
      });
      const ms = performance.now() - t;
      if (Math.abs(res.report.systems[0].em - 0.5) > 1e-9)
        throw new Error(`expected EM 0.5, got ${res.report.systems[0].em}`);
      const t2 = performance.now();
      const again = await runEval({
        dataset: path,
        systems: ["direct"],
        out,
        env,
        concurrency,
        progress: false,
        log: () => undefined,
      });
      const resumeMs = performance.now() - t2;
      if (again.ran !== 0) throw new Error("resumed run re-ran questions");
      rows.push([
        concurrency,
        n,
        fmt(ms, 0),
        fmt(ms / n, 2),
        fmt((n * 1000) / ms, 0),
        fmt(resumeMs, 0),
        fmt(statSync(res.files.html).size / 1024, 0),
      ]);
    }
  } finally {
    await server.close();
  }
  return {
    title: "Eval: runner overhead per question (direct, scripted model)",
    description: `${n} questions through \`runEval\` with the direct system against the local scripted OpenAI-compatible server (no model latency): real ChatOpenAI HTTP call, scoring, one SQLite result row per question, then report.json/md/html and trajectory export. "resume" is a rerun of the finished run (everything skipped, reports rewritten).`,
    columns: [
      "concurrency",
      "questions",
      "total ms",
      "ms / question",
      "questions / s",
      "resume ms",
      "report.html KB",
    ],
    rows,
  };
}

async function concurrencyBench(dir: string): Promise<BenchSection> {
  // With a model that takes 200 ms per call, throughput should grow with --concurrency.
  const n = 24;
  const latencyMs = 200;
  const path = join(dir, "latency.jsonl");
  writeFileSync(
    path,
    Array.from({ length: n }, (_, i) =>
      JSON.stringify({ id: `q${i}`, question: `Question number ${i}?`, answer: `answer ${i}` }),
    ).join("\n"),
  );
  const server = await ScriptedOpenAIServer.start({
    responder: () => ({
      content: "answer",
      delayMs: latencyMs,
      usage: { prompt_tokens: 80, completion_tokens: 1 },
    }),
  });
  const env = readEnv({
    OPENAI_BASE_URL: server.baseURL,
    OPENAI_API_KEY: "bench",
    CODEHOP_MODEL: "scripted",
    CODEHOP_MAX_RETRIES: "0",
  });
  const rows: (string | number)[][] = [];
  const qps: Record<number, number> = {};
  try {
    for (const concurrency of [1, 2, 4, 8]) {
      const t = performance.now();
      await runEval({
        dataset: path,
        systems: ["direct"],
        out: join(dir, `latency-c${concurrency}`),
        env,
        concurrency,
        progress: false,
        log: () => undefined,
      });
      const ms = performance.now() - t;
      qps[concurrency] = (n * 1000) / ms;
      rows.push([
        concurrency,
        n,
        fmt(ms, 0),
        fmt(qps[concurrency], 2),
        fmt(qps[concurrency] / (qps[1] ?? qps[concurrency]), 2),
      ]);
    }
  } finally {
    await server.close();
  }
  const speedup = qps[4] / qps[1];
  return {
    title: "Eval: --concurrency with a 200 ms model",
    description: `${n} questions, direct system, against the scripted server answering every call after ${latencyMs} ms; wall time of the whole run including reports.`,
    columns: ["concurrency", "questions", "total ms", "questions / s", "speed-up vs 1"],
    rows,
    verdicts: [
      `concurrency 4 answers >= 3x as many questions per second as 1: ${speedup >= 3 ? "MET" : "NOT MET"} (${fmt(speedup, 2)}x)`,
    ],
  };
}
