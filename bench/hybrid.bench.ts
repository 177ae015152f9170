/**
 * Hybrid retrieval on paraphrased queries: recall@5 of BM25, vectors alone and hybrid (reciprocal
 * rank fusion) on data/demo-paraphrase-queries.json, queries that share no word with the passage
 * answering them, over data/demo-corpus.jsonl.
 *
 * The vectors come from the concept-table test embedding (src/testing/concept-embeddings.ts)
 * served over real HTTP: it encodes the synonyms written for this query set, so its figures show
 * what fusion recovers when vectors carry meaning, not how good a real model is. With
 * CODEHOP_EMBEDDINGS_BASE_URL and CODEHOP_EMBEDDINGS_MODEL set, the same rows are measured with
 * that endpoint too (a real model).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readEnv } from "../src/config/env.ts";
import { ingestPath } from "../src/ingest/index.ts";
import { CorpusSource } from "../src/store/corpus-source.ts";
import { createEmbedder, type Embedder } from "../src/store/embeddings.ts";
import { conceptEmbedding } from "../src/testing/concept-embeddings.ts";
import { ScriptedOpenAIServer } from "../src/testing/scripted-openai-server.ts";
import { type BenchSection, fmt } from "./lib.ts";

const ROOT = join(import.meta.dirname, "..");

interface Query {
  query: string;
  page: string;
  answer: string;
}

/** Rank (1-based) of the first hit in a list, 0 when absent. */
const rankOf = <T>(list: T[], hit: (x: T) => boolean) => list.findIndex(hit) + 1;

async function measure(db: string, embedder: Embedder, queries: Query[], label: string) {
  const bm25 = CorpusSource.open(db);
  const hybrid = CorpusSource.open(db, { embedder });
  const nearest = hybrid.db.prepare(
    `SELECT d.title, p.text FROM passages_vec v JOIN passages p ON p.id = v.rowid
     JOIN documents d ON d.id = p.doc_id WHERE v.embedding MATCH ? AND k = 5 ORDER BY v.distance`,
  );
  const ranks = { bm25: [] as number[], vectors: [] as number[], hybrid: [] as number[] };
  const pageRanks = { bm25: [] as number[], hybrid: [] as number[] };
  try {
    for (const q of queries) {
      const answers = (p: { title: string; text: string }) =>
        p.title === q.page && p.text.includes(q.answer);
      ranks.bm25.push(rankOf(await bm25.searchPassages(q.query, { k: 5 }), answers));
      const [vector] = await embedder.embed([q.query]);
      const near = nearest.all(new Float32Array(vector)) as { title: string; text: string }[];
      ranks.vectors.push(rankOf(near, answers));
      ranks.hybrid.push(rankOf(await hybrid.searchPassages(q.query, { k: 5 }), answers));
      const isPage = (p: { title: string }) => p.title === q.page;
      pageRanks.bm25.push(rankOf(await bm25.search(q.query, { limit: 5 }), isPage));
      pageRanks.hybrid.push(rankOf(await hybrid.search(q.query, { limit: 5 }), isPage));
    }
  } finally {
    await bm25.close();
    await hybrid.close();
  }
  const recall = (r: number[]) => r.filter((x) => x > 0).length / r.length;
  const mrr = (r: number[]) => r.reduce((s, x) => s + (x > 0 ? 1 / x : 0), 0) / r.length;
  const row = (what: string, r: number[]) => [
    label,
    what,
    r.length,
    `${r.filter((x) => x > 0).length}/${r.length}`,
    fmt(recall(r), 3),
    fmt(mrr(r), 3),
  ];
  return [
    row("passages: BM25", ranks.bm25),
    row("passages: vectors only", ranks.vectors),
    row("passages: hybrid, RRF k=60", ranks.hybrid),
    row("pages: BM25", pageRanks.bm25),
    row("pages: hybrid", pageRanks.hybrid),
  ];
}

export default async function hybridBench(): Promise<BenchSection[]> {
  const set = JSON.parse(readFileSync(join(ROOT, "data/demo-paraphrase-queries.json"), "utf8")) as {
    concepts: string[][];
    queries: Query[];
  };
  const dir = mkdtempSync(join(tmpdir(), "codehop-bench-hybrid-"));
  const server = await ScriptedOpenAIServer.start({
    responder: () => "unused",
    embed: conceptEmbedding(set.concepts),
  });
  try {
    const rows: (string | number)[][] = [];
    const concept = createEmbedder({ baseUrl: server.baseURL, model: "concept-table" });
    const db = join(dir, "concepts.db");
    await ingestPath(db, join(ROOT, "data/demo-corpus.jsonl"), { embedder: concept });
    rows.push(...(await measure(db, concept, set.queries, "concept table (test)")));
    const env = readEnv();
    if (env.embeddingsBaseUrl && env.embeddingsModel) {
      const real = createEmbedder({
        baseUrl: env.embeddingsBaseUrl,
        model: env.embeddingsModel,
        apiKey: env.embeddingsApiKey,
      });
      const realDb = join(dir, "real.db");
      await ingestPath(realDb, join(ROOT, "data/demo-corpus.jsonl"), { embedder: real });
      rows.push(...(await measure(realDb, real, set.queries, env.embeddingsModel)));
    }
    return [
      {
        title: "Knowledge: BM25 vs hybrid on paraphrased queries",
        description: `${set.queries.length} queries of data/demo-paraphrase-queries.json over data/demo-corpus.jsonl, each sharing no word (as the index stems them) with the passage that answers it. recall@5: a passage containing the answer (passages) or its page (pages) is in the top 5; MRR over the top 5. "vectors only" = the 5 nearest passages by cosine; hybrid = BM25 and the vector neighbours (top 50 each) fused by reciprocal rank (k = 60); hybrid pages = BM25 page score + 0.3 × the page's best hybrid-passage score. The concept-table embedding (src/testing/concept-embeddings.ts, served over HTTP) knows the synonyms written with these queries: it shows what fusion recovers when vectors carry meaning, not how good a real embedding model is. Set CODEHOP_EMBEDDINGS_BASE_URL and CODEHOP_EMBEDDINGS_MODEL to add rows for a real model.`,
        columns: ["embedding", "retrieval", "queries", "found", "recall@5", "MRR"],
        rows,
      },
    ];
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
