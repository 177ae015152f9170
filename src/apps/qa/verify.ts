import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { JournalEntry } from "../../core/journal.ts";
import { emptyUsage } from "../../core/usage.ts";
import type { SourceReport } from "../../runs/result.ts";
import type { KnowledgeSource, Passage } from "../../store/types.ts";
import { splitSentences, withoutCitations } from "../common/claims.ts";
import { type Citation, citationOf, citedPassage, passageId } from "../common/citations.ts";
import {
  type ClaimResult,
  type EvidencePassage,
  type VerificationReport,
  judgeClaims,
  tally,
} from "../common/verifier.ts";
import { RETRIEVE_PASSAGES_K } from "./tools/retrieve-passages.ts";

/** One claim of a verified answer: what the verifier said, and whether it is supported. */
export interface AnswerClaim extends ClaimResult {
  /** True when the passages support the claim as written. */
  supported: boolean;
}

/** What `ask --verify` adds to the answer's JSON under `verification`. */
export interface AnswerVerification extends VerificationReport {
  /**
   * "verified": the verifier judged the claims (each may still be unsupported); "failed": it could
   * not (an endpoint that failed, replies with no usable verdict) — the answer stands unchecked.
   */
  status: "verified" | "failed";
  /** Why the verification failed (only when `status` is "failed"). */
  error?: string;
  claims: AnswerClaim[];
  /** True when every claim of the answer is supported. */
  all_supported: boolean;
}

/**
 * Something the run's agents read, from its call journal: the passages a `retrieve_passages` call
 * showed (its page and query: the same source answers the same passages again, with their ids),
 * or the summary a `search_wikipedia` call showed of a page (its text as shown).
 */
export type PassageRead =
  | { kind: "passages"; title: string; query: string }
  | { kind: "summary"; title: string; text: string };

/**
 * What a run's agents read, in the order they read it, from the thread's call journal: every
 * `retrieve_passages` call that answered, and the search summaries of the pages in `pages` (the
 * pages the run reported using; other search hits were only skimmed).
 */
export function passagesReadIn(
  entries: readonly JournalEntry[],
  pages: readonly string[],
): PassageRead[] {
  const used = new Set(pages);
  const reads: PassageRead[] = [];
  const seen = new Set<string>();
  const add = (read: PassageRead) => {
    const key = JSON.stringify(read);
    if (!seen.has(key)) reads.push(read);
    seen.add(key);
  };
  for (const e of entries) {
    if (!e.outcome.ok) continue;
    if (e.tool === "search_wikipedia" && typeof e.outcome.value === "string") {
      // "Page: <title>\nSummary: <text>" per hit (formatSearchResults).
      for (const m of e.outcome.value.matchAll(/^Page: (.+)\nSummary: (.*)$/gm))
        if (used.has(m[1]) && m[2].trim()) add({ kind: "summary", title: m[1], text: m[2].trim() });
      continue;
    }
    if (e.tool !== "retrieve_passages") continue;
    const title = e.outcome.reports?.flatMap((r) => r.sources ?? [])[0]?.title;
    let query: unknown;
    try {
      query = (JSON.parse(e.argsJson) as { query?: unknown }).query;
    } catch {
      continue;
    }
    if (typeof title !== "string" || typeof query !== "string" || !query.trim()) continue;
    add({ kind: "passages", title, query: query.trim() });
  }
  return reads;
}

/**
 * What `ask --verify` answers when no passage supports the model's answer: the model's text is not
 * given as a finding (it stays in the result as `unsupported_answer`, labelled as such).
 */
export const NO_SUPPORT_ANSWER =
  "No supporting passage was found for this question, so no answer is given: the model's answer is not supported by any source passage.";

/**
 * True when a verification found no support at all: it was verified (not "failed") and none of the
 * answer's claims is supported or corrected by a passage — including claims left unverified because
 * the run read nothing.
 */
export function hasNoSupport(verification: AnswerVerification): boolean {
  return (
    verification.status === "verified" &&
    verification.claims.length > 0 &&
    !verification.claims.some((c) => c.supported || c.verdict === "fixed")
  );
}

/** The verification of an answer the verifier could not check, saying why. */
export function failedVerification(error: string): AnswerVerification {
  return {
    status: "failed",
    error,
    ...tally([], 0, emptyUsage()),
    claims: [],
    all_supported: false,
  };
}

/** Options of {@link verifyAnswer}. */
export interface VerifyAnswerOptions {
  /** Where the answer's source pages are read. */
  source: KnowledgeSource;
  /** The verifier's model. */
  model: BaseChatModel;
  /** Without `read`: pages whose passages are checked (the first ones the agents used; default 4). */
  maxPages?: number;
  /** Without `read`: passages per page (default 2). */
  passagesPerPage?: number;
  /** With `read`: at most this many of the passages read, in reading order (default 12). */
  maxPassages?: number;
  /** Claims per verifier call (default 5). */
  batchSize?: number;
  signal?: AbortSignal;
}

/** A sentence that only names sources ("Source: Eiffel Tower.") is not a claim. */
const SOURCE_LINE = /^\s*(?:\(?\s*)?sources?\s*:/i;

/**
 * Verifies a QA answer with the research app's verifier: the answer's sentences are its claims;
 * the evidence, numbered as citations, is the passages the agents read — each `retrieve_passages`
 * call of the run (`read`: page and query, from the call journal) asked again of the same source,
 * which answers the same passages — or, for a run with no recorded reads, the passages of the pages
 * it used (`sources`) that best match the question and the answer. Each claim is checked against
 * all of them in batches; the result says, claim by claim, whether it is supported and by which
 * citations. The answer itself is not changed. No pages or no passages: every claim is
 * "unverified", and no model call is made. Replies with no usable verdict for any claim: the
 * verification "failed", saying so. A failing endpoint throws (the caller keeps the answer).
 */
export async function verifyAnswer(
  input: {
    question: string;
    answer: string;
    sources: readonly SourceReport[];
    read?: readonly PassageRead[];
  },
  options: VerifyAnswerOptions,
): Promise<{ citations: Citation[]; verification: AnswerVerification }> {
  const fromRun = Boolean(input.read?.length);
  const reads: PassageRead[] = fromRun
    ? [...input.read!]
    : [...new Set(input.sources.map((s) => s.title))]
        .slice(0, options.maxPages ?? 4)
        .map((title) => ({
          kind: "passages" as const,
          title,
          query: `${input.question} ${input.answer}`.slice(0, 1000),
        }));
  const titles = [...new Set(reads.map((r) => r.title))];
  const maxPassages = fromRun ? (options.maxPassages ?? 12) : Infinity;
  const citations: Citation[] = [];
  const seen = new Set<string>();
  const cite = (p: Passage, url: string | undefined) => {
    const id = passageId(p);
    if (seen.has(id) || citations.length >= maxPassages) return;
    seen.add(id);
    citations.push(
      citationOf(citedPassage(p, { url, source: options.source.kind }), citations.length + 1),
    );
  };
  for (const read of reads) {
    if (citations.length >= maxPassages) break;
    if (read.kind === "summary") {
      // As the search showed it: the page's opening text.
      cite({ title: read.title, section: "", text: read.text, score: 0 }, undefined);
      continue;
    }
    const { lookup, passages } = await options.source.retrievePassages(read.title, read.query, {
      k: fromRun ? RETRIEVE_PASSAGES_K : (options.passagesPerPage ?? 2),
    });
    if (lookup.status !== "found") continue;
    for (const p of passages) cite(p, lookup.page.url);
  }
  const sentences: string[] = [];
  for (const s of splitSentences(input.answer).map(withoutCitations)) {
    if (!s || SOURCE_LINE.test(s)) continue;
    // "Yes." alone says nothing checkable: it is judged with the sentence after it.
    const previous = sentences.at(-1);
    if (previous !== undefined && previous.split(/\s+/).length < 3)
      sentences[sentences.length - 1] = `${previous} ${s}`;
    else sentences.push(s);
  }
  const evidence = new Map<number, EvidencePassage>(
    citations.map((c) => [c.n, { n: c.n, title: c.title, section: c.section, text: c.text }]),
  );
  const all = citations.map((c) => c.n);
  const claims = sentences.map((text, id) => ({ id, text, cites: all }));
  const { judgements, usage } =
    claims.length && citations.length
      ? await judgeClaims(claims, evidence, {
          model: options.model,
          batchSize: options.batchSize ?? 5,
          maxPassagesPerCall: Math.max(8, citations.length),
          signal: options.signal,
        })
      : { judgements: [], usage: emptyUsage() };
  const results: AnswerClaim[] = claims.map((claim) => {
    const j = judgements[claim.id];
    const ids = citations.map((c) => c.passage_id);
    if (!j) {
      return {
        text: claim.text,
        verdict: "unverified",
        supported: false,
        action: "flagged",
        citations: [],
        passage_ids: ids,
        reason: titles.length
          ? "no passage of the answer's source pages could be read"
          : "the run reported no source page to check it against",
      };
    }
    const supported = j.verdict === "supported";
    return {
      text: claim.text,
      verdict: j.verdict,
      supported,
      action: supported ? "kept" : "flagged",
      ...(j.fix ? { fixed_text: j.fix } : {}),
      citations: supported || j.verdict === "fixed" ? j.supportedBy : [],
      passage_ids: ids,
    };
  });
  const report = tally(results, 0, usage);
  // The model was asked and no claim got a verdict: its replies were not verdicts at all.
  const unusable = usage.calls > 0 && judgements.every((j) => j.verdict === "unverified");
  return {
    citations,
    verification: {
      ...report,
      status: unusable ? "failed" : "verified",
      ...(unusable
        ? {
            error: `the verifier's replies (${usage.calls} call${usage.calls === 1 ? "" : "s"}) held no usable verdict: expected one line per claim, "1: SUPPORTED [n]", "1: UNSUPPORTED" or "1: FIX: <sentence>"`,
          }
        : {}),
      claims: results,
      all_supported: results.length > 0 && results.every((c) => c.supported),
    },
  };
}
