/**
 * Supporting-page retrieval metrics for multi-hop QA (HotpotQA's distractor setting): how many of a
 * question's supporting pages a retriever puts in its top k. Shared by bench/hotpotqa.bench.ts and
 * test/knowledge/real-retrieval.test.ts, so the benchmark and the regression test measure the same.
 */
import type { CorpusSource } from "../src/store/corpus-source.ts";
import { percentile } from "./lib.ts";

/** Cut-offs for supporting-page recall. */
export const RECALL_KS = [1, 5, 10] as const;
/** Cut-offs for "both supporting pages retrieved" (HotpotQA questions have two; @1 is always 0). */
export const BOTH_KS = [2, 5, 10] as const;
const DEPTH = Math.max(...RECALL_KS, ...BOTH_KS);

/** A question and the titles of the pages that support its answer. */
export interface SupportedQuestion {
  question: string;
  supporting: string[];
}

/** Mean scores over a question set. */
export interface RetrievalScores {
  questions: number;
  /** k → mean share of a question's supporting pages among the top k pages. */
  recall: Record<number, number>;
  /** k → share of questions with every supporting page among the top k pages. */
  both: Record<number, number>;
  /** Median milliseconds per query (the median: a shared machine's stalls skew the mean). */
  p50Ms: number;
}

/** Scores ranked title lists (one per question, best first) against the supporting titles. */
export function scoreRankings(
  runs: { ranked: string[]; supporting: string[] }[],
  p50Ms = NaN,
): RetrievalScores {
  const recall: Record<number, number> = {};
  const both: Record<number, number> = {};
  const key = (t: string) => t.trim();
  for (const k of [...new Set([...RECALL_KS, ...BOTH_KS])]) {
    let r = 0;
    let b = 0;
    for (const run of runs) {
      const top = new Set(run.ranked.slice(0, k).map(key));
      const found = run.supporting.filter((t) => top.has(key(t))).length;
      r += found / run.supporting.length;
      if (found === run.supporting.length) b++;
    }
    recall[k] = r / runs.length;
    both[k] = b / runs.length;
  }
  return { questions: runs.length, recall, both, p50Ms };
}

/**
 * Page search (`search_wikipedia`'s ranking: one entry per page) versus plain passage search (the
 * rag baseline: the top k passages, whose pages may repeat) on the same corpus and questions.
 */
export async function comparePageAndPassageSearch(
  source: CorpusSource,
  questions: SupportedQuestion[],
): Promise<{ page: RetrievalScores; passage: RetrievalScores }> {
  const pageRuns: { ranked: string[]; supporting: string[] }[] = [];
  const passageRuns: { ranked: string[]; supporting: string[] }[] = [];
  const pageMs: number[] = [];
  const passageMs: number[] = [];
  for (const q of questions) {
    let t = performance.now();
    const pages = await source.search(q.question, { limit: DEPTH });
    pageMs.push(performance.now() - t);
    t = performance.now();
    const passages = await source.searchPassages(q.question, { k: DEPTH });
    passageMs.push(performance.now() - t);
    pageRuns.push({ ranked: pages.map((p) => p.title), supporting: q.supporting });
    passageRuns.push({ ranked: passages.map((p) => p.title), supporting: q.supporting });
  }
  return {
    page: scoreRankings(pageRuns, percentile(pageMs, 50)),
    passage: scoreRankings(passageRuns, percentile(passageMs, 50)),
  };
}

/** The metrics (e.g. "recall@5") where `a` scores below `b`. */
export function metricsBelow(a: RetrievalScores, b: RetrievalScores): string[] {
  const out: string[] = [];
  for (const k of RECALL_KS) if (a.recall[k] < b.recall[k]) out.push(`recall@${k}`);
  for (const k of BOTH_KS) if (a.both[k] < b.both[k]) out.push(`both@${k}`);
  return out;
}
