import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { emptyUsage } from "../../core/usage.ts";
import type { SourceReport } from "../../runs/result.ts";
import type { KnowledgeSource } from "../../store/types.ts";
import { splitSentences, withoutCitations } from "../common/claims.ts";
import { type Citation, citationOf, citedPassage, passageId } from "../common/citations.ts";
import {
  type ClaimResult,
  type EvidencePassage,
  type VerificationReport,
  judgeClaims,
  tally,
} from "../common/verifier.ts";

/** One claim of a verified answer: what the verifier said, and whether it is supported. */
export interface AnswerClaim extends ClaimResult {
  /** True when the passages support the claim as written. */
  supported: boolean;
}

/** What `ask --verify` adds to the answer's JSON under `verification`. */
export interface AnswerVerification extends VerificationReport {
  claims: AnswerClaim[];
  /** True when every claim of the answer is supported. */
  all_supported: boolean;
}

/** Options of {@link verifyAnswer}. */
export interface VerifyAnswerOptions {
  /** Where the answer's source pages are read. */
  source: KnowledgeSource;
  /** The verifier's model. */
  model: BaseChatModel;
  /** Pages whose passages are checked (the first ones the agents used; default 4). */
  maxPages?: number;
  /** Passages per page (default 2). */
  passagesPerPage?: number;
  /** Claims per verifier call (default 5). */
  batchSize?: number;
  signal?: AbortSignal;
}

/** A sentence that only names sources ("Source: Eiffel Tower.") is not a claim. */
const SOURCE_LINE = /^\s*(?:\(?\s*)?sources?\s*:/i;

/**
 * Verifies a QA answer with the research app's verifier: the answer's sentences are its claims;
 * the evidence is the passages of the pages the agents used (`sources`) that best match the
 * question and the answer, numbered as citations. Each claim is checked against all of them in
 * batches; the result says, claim by claim, whether it is supported and by which citations. The
 * answer itself is not changed. No pages or no passages: every claim is "unverified", and no model
 * call is made.
 */
export async function verifyAnswer(
  input: { question: string; answer: string; sources: readonly SourceReport[] },
  options: VerifyAnswerOptions,
): Promise<{ citations: Citation[]; verification: AnswerVerification }> {
  const titles = [...new Set(input.sources.map((s) => s.title))].slice(0, options.maxPages ?? 4);
  const query = `${input.question} ${input.answer}`.slice(0, 1000);
  const citations: Citation[] = [];
  const seen = new Set<string>();
  for (const title of titles) {
    const { lookup, passages } = await options.source.retrievePassages(title, query, {
      k: options.passagesPerPage ?? 2,
    });
    if (lookup.status !== "found") continue;
    for (const p of passages) {
      const id = passageId(p);
      if (seen.has(id)) continue;
      seen.add(id);
      citations.push(
        citationOf(
          citedPassage(p, { url: lookup.page.url, source: options.source.kind }),
          citations.length + 1,
        ),
      );
    }
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
  return {
    citations,
    verification: {
      ...report,
      claims: results,
      all_supported: results.length > 0 && results.every((c) => c.supported),
    },
  };
}
