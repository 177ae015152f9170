import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { HumanMessage, SystemMessage } from "@langchain/core/messages";
import { callModel, messageText } from "../../core/models.ts";
import { stripThinkBlocks } from "../../core/parser.ts";
import { type UsageTotals, addUsage, emptyUsage, usageFromMessage } from "../../core/usage.ts";
import { loadPrompt, renderPrompt } from "../../prompts/render.ts";
import { mapPool } from "../../util/concurrency.ts";
import { citationNumbers, withoutCitations } from "./claims.ts";

/**
 * The verifier: a model judges, in batches, whether each claim (one sentence) is supported by the
 * passages it cites. Shared by the research app (every cited sentence of a report, against the
 * passages it cites) and the QA app (`ask --verify`: each sentence of the answer, against passages
 * retrieved from the pages the agents used). What to do with an unsupported claim is the caller's
 * business; this module only judges.
 */

/** A passage a claim may be checked against, by its number. */
export interface EvidencePassage {
  n: number;
  title: string;
  section: string;
  text: string;
}

/** One claim to check: a sentence (without citation markers) and the passage numbers it cites. */
export interface ClaimToCheck {
  id: number;
  text: string;
  cites: readonly number[];
}

/** The verifier's decision on a claim. "unverified": its reply had no usable verdict for it. */
export type ClaimVerdict = "supported" | "unsupported" | "fixed" | "unverified";

/** What the verifier said about one claim. */
export interface ClaimJudgement {
  id: number;
  verdict: ClaimVerdict;
  /** The claim rewritten to what the passages say ("fixed"). */
  fix?: string;
  /** Cited passages the verifier named as support (all cited ones when it named none). */
  supportedBy: number[];
}

/** One claim of a verification report: what was written, what the verifier said, what was done. */
export interface ClaimResult {
  /** The sentence as written (without citation markers). */
  text: string;
  verdict: ClaimVerdict;
  /** "kept", "fixed" (replaced by `fixed_text`), "dropped" (removed), "flagged" (kept, marked). */
  action: "kept" | "fixed" | "dropped" | "flagged";
  fixed_text?: string;
  /** Citation numbers of the result's `citations` it cites (only numbers that resolve). */
  citations: number[];
  /** Passage ids it was checked against. */
  passage_ids: string[];
  /** Why it was dropped or flagged without a model verdict (e.g. a citation that does not resolve). */
  reason?: string;
}

/** Token usage of the verifier, in the result's snake_case shape. */
export interface VerifierUsage {
  calls: number;
  input_tokens: number;
  output_tokens: number;
}

/** What a verification checked and decided. */
export interface VerificationReport {
  /** Claims checked (cited sentences, or the answer's sentences). */
  checked: number;
  supported: number;
  /** Partly supported claims replaced by the verifier's correction. */
  fixed: number;
  /** Unsupported claims removed. */
  dropped: number;
  /** Claims kept with a flag: unsupported (flag mode) or without a usable verdict. */
  flagged: number;
  /** Sentences written without a citation (research: checked against their section's passages). */
  uncited: number;
  claims: ClaimResult[];
  usage: VerifierUsage;
}

/** Options of {@link judgeClaims}. */
export interface JudgeOptions {
  model: BaseChatModel;
  /** Claims per model call (default 5). */
  batchSize?: number;
  /** Model calls at once (default 3). */
  concurrency?: number;
  /** Passages per model call before a batch is cut (default 8). */
  maxPassagesPerCall?: number;
  signal?: AbortSignal;
  /** Name the model call is made for (errors, CODEHOP_MODEL_<NAME>; default "verifier"). */
  agentName?: string;
}

/** Verdict words the parser accepts, to the verdict they mean. */
const VERDICTS: Array<[RegExp, "supported" | "unsupported" | "fix"]> = [
  [/^(?:not supported|unsupported|contradicted|false)\b/i, "unsupported"],
  [/^(?:fix(?:ed)?|partly supported|partially supported|partial)\b/i, "fix"],
  [/^(?:supported|true|yes)\b/i, "supported"],
];
const LINE = /^\s*(?:[-*]\s*)?(?:\*\*)?(?:claim\s*)?(\d{1,3})(?:\*\*)?\s*[:.)\]–-]\s*(.*)$/i;

/**
 * Reads a verifier reply: one line per claim, `<k>: SUPPORTED [n]`, `<k>: FIX: <sentence>` or
 * `<k>: UNSUPPORTED` (tolerant of case, bullets, bold, "Claim k", think blocks). Returns the
 * verdicts by claim number k (1-based, within the batch); claims without a line are missing.
 */
export function parseVerdicts(
  reply: string,
): Map<number, { verdict: "supported" | "unsupported" | "fix"; rest: string }> {
  const out = new Map<number, { verdict: "supported" | "unsupported" | "fix"; rest: string }>();
  for (const line of stripThinkBlocks(reply).split("\n")) {
    const m = LINE.exec(line);
    if (!m) continue;
    const k = Number(m[1]);
    const body = m[2].replace(/^\**\s*/, "").replace(/\*\*/g, "");
    for (const [pattern, verdict] of VERDICTS) {
      const v = pattern.exec(body);
      if (!v) continue;
      const rest = body
        .slice(v[0].length)
        .replace(/^\s*[:–-]\s*/, "")
        .trim();
      if (!out.has(k)) out.set(k, { verdict, rest });
      break;
    }
  }
  return out;
}

/** Batches of claims: at most `size` claims and `maxPassages` distinct passages each, in order. */
function batches(
  claims: readonly ClaimToCheck[],
  size: number,
  maxPassages: number,
): ClaimToCheck[][] {
  const out: ClaimToCheck[][] = [];
  let current: ClaimToCheck[] = [];
  let passages = new Set<number>();
  for (const claim of claims) {
    const union = new Set([...passages, ...claim.cites]);
    if (current.length && (current.length >= size || union.size > maxPassages)) {
      out.push(current);
      current = [];
      passages = new Set();
    }
    current.push(claim);
    for (const n of claim.cites) passages.add(n);
  }
  if (current.length) out.push(current);
  return out;
}

function passageBlock(p: EvidencePassage): string {
  const where = p.section ? `${p.title} — ${p.section}` : p.title;
  return `[${p.n}] (${where}) ${p.text.replace(/\s+/g, " ").trim()}`;
}

/**
 * Judges claims against their cited passages with the model, in batches (`batchSize` claims per
 * call, `concurrency` calls at once). Each claim's verdict says whether its cited passages support
 * it; a claim the reply says nothing usable about is "unverified". Model endpoint failures throw
 * CODEHOP_MODEL_ENDPOINT_FAILED (the caller's run stops, resumable).
 */
export async function judgeClaims(
  claims: readonly ClaimToCheck[],
  evidence: ReadonlyMap<number, EvidencePassage>,
  options: JudgeOptions,
): Promise<{ judgements: ClaimJudgement[]; usage: UsageTotals }> {
  const checkable = claims.filter((c) => c.cites.some((n) => evidence.has(n)));
  const system = loadPrompt("verifier/instructions.md");
  const groups = batches(checkable, options.batchSize ?? 5, options.maxPassagesPerCall ?? 8);
  let usage = emptyUsage();
  const results = await mapPool(
    groups,
    options.concurrency ?? 3,
    async (group) => {
      const cited = [...new Set(group.flatMap((c) => c.cites))]
        .filter((n) => evidence.has(n))
        .sort((a, b) => a - b);
      const user = renderPrompt("verifier/claims.md", {
        passages: cited.map((n) => passageBlock(evidence.get(n)!)).join("\n"),
        claims: group
          .map(
            (c, i) =>
              `${i + 1}. ${c.text} (cites ${c.cites
                .filter((n) => evidence.has(n))
                .map((n) => `[${n}]`)
                .join("")})`,
          )
          .join("\n"),
      });
      const reply = await callModel(
        options.model,
        [new SystemMessage(system), new HumanMessage(user)],
        { agentName: options.agentName ?? "verifier", signal: options.signal },
      );
      usage = addUsage(usage, usageFromMessage(reply));
      const verdicts = parseVerdicts(messageText(reply));
      return group.map((claim, i): ClaimJudgement => {
        const cites = claim.cites.filter((n) => evidence.has(n));
        const v = verdicts.get(i + 1);
        if (!v) return { id: claim.id, verdict: "unverified", supportedBy: [] };
        if (v.verdict === "supported") {
          const named = citationNumbers(v.rest).filter((n) => cites.includes(n));
          return { id: claim.id, verdict: "supported", supportedBy: named.length ? named : cites };
        }
        const fix = v.verdict === "fix" ? withoutCitations(v.rest) : "";
        // A "partly supported" without a correction says the claim, as written, is not supported.
        if (fix) return { id: claim.id, verdict: "fixed", fix, supportedBy: cites };
        return { id: claim.id, verdict: "unsupported", supportedBy: [] };
      });
    },
    options.signal,
  );
  const byId = new Map(results.flat().map((j) => [j.id, j]));
  return {
    judgements: claims.map(
      (c) => byId.get(c.id) ?? { id: c.id, verdict: "unverified", supportedBy: [] },
    ),
    usage,
  };
}

/** The verifier's usage in the result's shape. */
export function verifierUsage(u: UsageTotals): VerifierUsage {
  return { calls: u.calls, input_tokens: u.inputTokens, output_tokens: u.outputTokens };
}

/** Counts of a list of claim results (the report's figures). */
export function tally(
  claims: readonly ClaimResult[],
  uncited: number,
  usage: UsageTotals,
): VerificationReport {
  return {
    checked: claims.length,
    supported: claims.filter((c) => c.verdict === "supported").length,
    fixed: claims.filter((c) => c.action === "fixed").length,
    dropped: claims.filter((c) => c.action === "dropped").length,
    flagged: claims.filter((c) => c.action === "flagged").length,
    uncited,
    claims: [...claims],
    usage: verifierUsage(usage),
  };
}
