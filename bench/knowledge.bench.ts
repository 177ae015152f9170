/**
 * Knowledge-source benchmarks: ingest rate, BM25 and hybrid query latency and database size on a
 * generated corpus of 100k passages, plus retrieval quality on the labeled demo queries.
 * Embeddings come from the local scripted OpenAI-compatible server (hashed bag of words over real
 * HTTP), so hybrid figures include a real /v1/embeddings round trip per query.
 */
import { execFileSync } from "node:child_process";
import {
  createWriteStream,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { once } from "node:events";
import Database from "better-sqlite3";
import { ingestPath } from "../src/ingest/index.ts";
import { CorpusSource } from "../src/store/corpus-source.ts";
import { createEmbedder } from "../src/store/embeddings.ts";
import { ScriptedOpenAIServer } from "../src/testing/scripted-openai-server.ts";
import { makeDump } from "../test/knowledge/fixtures/make-dump.ts";
import { type BenchSection, fmt, percentile } from "./lib.ts";

const PAGES = 25_000;
const SECTIONS = 4; // one ~400-char passage per section -> 100k passages
const VOCAB = 30_000;
const QUERIES = 300;
const XML_PAGES = 5_000;

/** Deterministic PRNG (mulberry32). */
function rng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Pronounceable synthetic words; Zipf-like sampling so a few words are very common, as in text. */
function makeVocabulary(rand: () => number): { words: string[]; sample: () => string } {
  const syl = [
    "ka",
    "lo",
    "mi",
    "ra",
    "ten",
    "sul",
    "ve",
    "dor",
    "an",
    "is",
    "pe",
    "qua",
    "zir",
    "bo",
    "ny",
    "ex",
  ];
  const words = new Set<string>();
  while (words.size < VOCAB) {
    const n = 2 + Math.floor(rand() * 3);
    let w = "";
    for (let i = 0; i < n; i++) w += syl[Math.floor(rand() * syl.length)];
    words.add(w);
  }
  const list = [...words];
  // Zipf(s=1) via inverse CDF over ranks.
  const h = list.reduce((a, _, i) => a + 1 / (i + 1), 0);
  const cdf: number[] = [];
  let acc = 0;
  for (let i = 0; i < list.length; i++) cdf.push((acc += 1 / (i + 1) / h));
  const sample = () => {
    const u = rand();
    let lo = 0;
    let hi = cdf.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid] < u) lo = mid + 1;
      else hi = mid;
    }
    return list[lo];
  };
  return { words: list, sample };
}

async function writeCorpus(path: string): Promise<{ queries: string[]; titles: string[] }> {
  const rand = rng(42);
  const { words, sample } = makeVocabulary(rand);
  const out = createWriteStream(path);
  const queries: string[] = [];
  const titles: string[] = [];
  for (let p = 0; p < PAGES; p++) {
    const parts: string[] = [];
    for (let s = 0; s < SECTIONS; s++) {
      const n = 42 + Math.floor(rand() * 8);
      const body = Array.from({ length: n }, sample).join(" ");
      parts.push(
        s === 0 ? `${body}.` : `## Section ${words[1000 + ((p * 7 + s) % 5000)]}\n${body}.`,
      );
    }
    const title = `Page ${p} ${words[(p * 13) % VOCAB]}`;
    if (queries.length < QUERIES && p % Math.floor(PAGES / QUERIES) === 0) {
      // Queries mix a rarer word from a known page with common ones.
      const rare = parts[1]
        .split(/\s+/)
        .slice(2)
        .sort((a, b) => b.length - a.length)[0];
      queries.push(`${rare} ${sample()} ${sample()}`);
      titles.push(title);
    }
    if (!out.write(`${JSON.stringify({ title, text: parts.join("\n\n") })}\n`))
      await once(out, "drain");
  }
  out.end();
  await once(out, "finish");
  return { queries, titles };
}

async function time<T>(fn: () => Promise<T>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

function dbBytes(path: string): number {
  const db = new Database(path);
  db.pragma("wal_checkpoint(TRUNCATE)");
  db.close();
  return statSync(path).size;
}

async function quality(
  embedder?: ReturnType<typeof createEmbedder>,
): Promise<(string | number)[][]> {
  const dir = mkdtempSync(join(tmpdir(), "codehop-kbq-"));
  try {
    const db = join(dir, "demo.db");
    await ingestPath(db, join(import.meta.dirname, "..", "data", "demo-corpus.jsonl"), {
      embedder,
    });
    const s = CorpusSource.open(db, { embedder });
    const labeled = JSON.parse(
      readFileSync(join(import.meta.dirname, "..", "data", "demo-queries.json"), "utf8"),
    ).queries as {
      query: string;
      page: string;
      answer: string;
    }[];
    const rows: (string | number)[][] = [];
    const score = (ranks: number[]) => [
      fmt(ranks.filter((r) => r <= 5).length / ranks.length, 3),
      fmt(ranks.reduce((a, r) => a + (r <= 5 ? 1 / r : 0), 0) / ranks.length, 3),
    ];
    const rank = (i: number) => (i === -1 ? Infinity : i + 1);
    const pages: number[] = [];
    const corpusPassages: number[] = [];
    const inPage: number[] = [];
    for (const q of labeled) {
      pages.push(rank((await s.search(q.query)).findIndex((h) => h.title === q.page)));
      corpusPassages.push(
        rank(
          (await s.searchPassages(q.query)).findIndex(
            (p) => p.title === q.page && p.text.includes(q.answer),
          ),
        ),
      );
      inPage.push(
        rank(
          (await s.retrievePassages(q.page, q.query)).passages.findIndex((p) =>
            p.text.includes(q.answer),
          ),
        ),
      );
    }
    rows.push([`page search (${s.mode})`, labeled.length, ...score(pages)]);
    rows.push([`corpus passages (${s.mode})`, labeled.length, ...score(corpusPassages)]);
    rows.push([`in-page passages (${s.mode})`, labeled.length, ...score(inPage)]);
    await s.close();
    return rows;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export default async function knowledgeBench(): Promise<BenchSection[]> {
  const dir = mkdtempSync(join(tmpdir(), "codehop-kbbench-"));
  const server = await ScriptedOpenAIServer.start({ responder: () => "unused", embeddingDims: 64 });
  try {
    const jsonl = join(dir, "corpus.jsonl");
    const { queries, titles } = await writeCorpus(jsonl);
    const jsonlMb = statSync(jsonl).size / 1e6;

    // 1. BM25-only ingest.
    const db = join(dir, "bm25.db");
    const report = await ingestPath(db, jsonl, { batchSize: 500 });
    const bytes = dbBytes(db);
    const reingest = await ingestPath(db, jsonl, { batchSize: 500 });

    // 2. Ingest with embeddings (same corpus, vectors through HTTP).
    const embedder = createEmbedder({
      baseUrl: server.baseURL,
      model: "hashed-bow",
      batchSize: 512,
    });
    const vdb = join(dir, "hybrid.db");
    const vreport = await ingestPath(vdb, jsonl, { batchSize: 1000, embedder });
    const vbytes = dbBytes(vdb);

    // 2b. MediaWiki XML dump (wikitext parsed by wtf_wikipedia), plain and bzip2.
    const xml = join(dir, "dump.xml");
    writeFileSync(xml, makeDump(XML_PAGES));
    const xreport = await ingestPath(join(dir, "xml.db"), xml);
    let bzReport: typeof xreport | undefined;
    try {
      execFileSync("bzip2", ["-k", xml]);
      bzReport = await ingestPath(join(dir, "bz2.db"), `${xml}.bz2`);
    } catch {
      // no bzip2 binary: the row is left out
    }

    // 3. Query latency.
    const bm25 = CorpusSource.open(db);
    const hybrid = CorpusSource.open(vdb, { embedder });
    const lat = {
      missing: [] as number[],
      search: [] as number[],
      passages: [] as number[],
      inPage: [] as number[],
      hSearch: [] as number[],
      hPassages: [] as number[],
      embed: [] as number[],
    };
    for (const q of queries.slice(0, 20)) await bm25.search(q); // warm page cache
    for (const [i, q] of queries.entries()) {
      lat.search.push(await time(() => bm25.search(q)));
      lat.passages.push(await time(() => bm25.searchPassages(q, { k: 5 })));
      lat.inPage.push(await time(() => bm25.retrievePassages(titles[i], q)));
      if (i < 50) lat.missing.push(await time(() => bm25.getPage(`${titles[i]}x`)));
      lat.embed.push(await time(() => embedder.embed([q])));
      lat.hSearch.push(await time(() => hybrid.search(q)));
      lat.hPassages.push(await time(() => hybrid.searchPassages(q, { k: 5 })));
    }
    await bm25.close();
    await hybrid.close();
    const row = (name: string, v: number[]) => [
      name,
      v.length,
      fmt(percentile(v, 50)),
      fmt(percentile(v, 95)),
      fmt(Math.max(...v)),
    ];

    const pagesPerSec = report.added / (report.elapsedMs / 1000);
    const p50 = percentile(lat.search, 50);
    const passagesK = report.passages / 1000;
    const qualityRows = [
      ...(await quality()),
      ...(await quality(createEmbedder({ baseUrl: server.baseURL, model: "hashed-bow" }))),
    ];

    return [
      {
        title: "Knowledge: ingest (generated corpus)",
        description: `${PAGES.toLocaleString("en")} generated pages (${SECTIONS} sections each, Zipf-distributed synthetic words, ${fmt(jsonlMb, 1)} MB JSONL) ingested with \`ingestPath\` (JSONL reader, section-aware 512/256 chunking, FTS5). "with embeddings" also embeds every passage through the local /v1/embeddings server (64-dim hashed bag of words, 512 texts per request) into sqlite-vec. "MediaWiki XML" is a generated ${XML_PAGES.toLocaleString("en")}-page dump (infobox, references, links, three sections per page) streamed through saxes and wtf_wikipedia.`,
        columns: [
          "run",
          "pages",
          "passages",
          "seconds",
          "pages/s",
          "DB MB",
          "DB KB per 1k passages",
        ],
        rows: [
          [
            "BM25 only",
            report.added,
            report.passages,
            fmt(report.elapsedMs / 1000),
            fmt(pagesPerSec, 0),
            fmt(bytes / 1e6, 1),
            fmt(bytes / 1024 / passagesK, 0),
          ],
          [
            "re-ingest (all unchanged)",
            reingest.unchanged,
            0,
            fmt(reingest.elapsedMs / 1000),
            fmt(reingest.unchanged / (reingest.elapsedMs / 1000), 0),
            "",
            "",
          ],
          [
            "MediaWiki XML",
            xreport.added,
            xreport.passages,
            fmt(xreport.elapsedMs / 1000),
            fmt(xreport.added / (xreport.elapsedMs / 1000), 0),
            "",
            "",
          ],
          ...(bzReport
            ? [
                [
                  "MediaWiki XML .bz2",
                  bzReport.added,
                  bzReport.passages,
                  fmt(bzReport.elapsedMs / 1000),
                  fmt(bzReport.added / (bzReport.elapsedMs / 1000), 0),
                  "",
                  "",
                ],
              ]
            : []),
          [
            "with embeddings",
            vreport.added,
            vreport.vectors,
            fmt(vreport.elapsedMs / 1000),
            fmt(vreport.added / (vreport.elapsedMs / 1000), 0),
            fmt(vbytes / 1e6, 1),
            fmt(vbytes / 1024 / (vreport.passages / 1000), 0),
          ],
        ],
        verdicts: [
          `ingest >= 500 pages/s from JSONL: ${pagesPerSec >= 500 ? "MET" : "NOT MET"} (${fmt(pagesPerSec, 0)} pages/s)`,
        ],
      },
      {
        title: "Knowledge: query latency (100k passages)",
        description: `${queries.length} queries (one rarer word from a known page + two Zipf-sampled words), ms per call on the corpora above. "search" = page search (search_wikipedia), "passages" = searchPassages k=5 (rag baseline), "in-page" = retrievePassages on one page. Hybrid = BM25 + sqlite-vec KNN (top 50 each) fused by reciprocal rank; it includes embedding the query over HTTP (shown separately).`,
        columns: ["operation", "n", "p50 ms", "p95 ms", "max ms"],
        rows: [
          row("BM25 search (pages)", lat.search),
          row("BM25 searchPassages", lat.passages),
          row("BM25 retrievePassages (in-page)", lat.inPage),
          row("missing page + suggestions", lat.missing),
          row("embed query (HTTP)", lat.embed),
          row("hybrid search (pages)", lat.hSearch),
          row("hybrid searchPassages", lat.hPassages),
        ],
        verdicts: [`BM25 query p50 < 10 ms: ${p50 < 10 ? "MET" : "NOT MET"} (${fmt(p50)} ms)`],
      },
      {
        title: "Knowledge: retrieval quality on the demo corpus",
        description:
          "data/demo-queries.json (labeled query -> page and answer string) over data/demo-corpus.jsonl. recall@5: the page (or a passage containing the answer) is in the top 5; MRR over the top 5. Hybrid uses the hashed bag-of-words test embedding, which is lexical — a real embedding model is needed to judge semantic gains.",
        columns: ["retrieval", "queries", "recall@5", "MRR"],
        rows: qualityRows,
      },
    ];
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
