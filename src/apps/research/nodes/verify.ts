import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { resolveModel } from "../../../core/models.ts";
import {
  citationNumbers,
  splitSentences,
  withCitations,
  withoutCitations,
} from "../../common/claims.ts";
import {
  type ClaimResult,
  type ClaimToCheck,
  type EvidencePassage,
  judgeClaims,
  tally,
} from "../../common/verifier.ts";
import { type UsageByAgent, emptyUsage } from "../../../core/usage.ts";
import { researchSettingsOf } from "../base/settings.ts";
import type { ReportSection, ResearchStateValue, ResearchUpdate } from "../base/state.ts";

/** Model name of the verifier (CODEHOP_MODEL_VERIFIER, usage key). */
export const VERIFIER = "verifier";

/** Marks appended to a sentence kept although it is not (known to be) supported. */
export const FLAG_UNSUPPORTED = "*(not supported by the cited passages)*";
export const FLAG_UNVERIFIED = "*(could not be verified)*";

/** One sentence of the draft on its way through verification. */
interface SentenceSlot {
  section: number;
  /** The sentence as written. */
  raw: string;
  /** Claim id when it is checked by the model. */
  claim?: number;
  /** Its text without citation markers, and the citations that resolve. */
  body: string;
  cites: number[];
  /** Decided without the model (no citation, or only citations that do not resolve). */
  result?: ClaimResult;
  uncited?: boolean;
}

/**
 * verify: checks every cited sentence of the draft against the passages it cites — a model
 * judgement, in batches (`verifyBatchSize` sentences per call, `verifyConcurrency` calls at once).
 * Supported sentences stay; partly supported ones are replaced by the verifier's correction (with
 * the same citations); unsupported ones are removed (or kept and flagged with
 * `onUnsupported: "flag"`); a sentence the verifier said nothing usable about is kept and flagged.
 * Citation numbers that do not resolve are removed from the text, and a sentence citing only such
 * numbers is removed without a model call. A sentence written without any citation is checked
 * against the passages its section cites (the summary's: those of the whole draft) and, when
 * supported, gets the citations of the passages the verifier names — so every sentence that stays
 * in the report is tied to a passage that supports it.
 */
export async function verify(
  state: ResearchStateValue,
  config: LangGraphRunnableConfig,
): Promise<ResearchUpdate> {
  if (!state.draft.length) {
    return {
      verified: [],
      verification: tally([], 0, emptyUsage()),
      stage: "nothing to verify",
    };
  }
  const settings = researchSettingsOf(config, state.maxQuestions);
  const refs = new Map(state.references.map((r) => [r.n, r.passage]));
  const evidence = new Map<number, EvidencePassage>(
    state.references.map((r) => [
      r.n,
      { n: r.n, title: r.passage.title, section: r.passage.section, text: r.passage.text },
    ]),
  );
  const slots: SentenceSlot[] = [];
  const claims: ClaimToCheck[] = [];
  const numberOf = new Map(state.references.map((r) => [r.passage.id, r.n]));
  /** What an uncited sentence of a section is checked against. */
  const sectionCites = (section: ReportSection, sentences: string[]): number[] => {
    const cited = sentences.flatMap(citationNumbers).filter((n) => refs.has(n));
    const fromNotes = (state.notes ?? [])
      .filter((n) => section.question && n.question === section.question)
      .flatMap((n) => n.passages.map((id) => numberOf.get(id)))
      .filter((n): n is number => n !== undefined);
    const pick = cited.length ? cited : fromNotes.length ? fromNotes : [...refs.keys()];
    return [...new Set(pick)].sort((a, b) => a - b);
  };
  state.draft.forEach((section, index) => {
    const sentences = splitSentences(section.text);
    for (const raw of sentences) {
      const numbers = citationNumbers(raw);
      const cites = numbers.filter((n) => refs.has(n));
      const body = withoutCitations(raw);
      const slot: SentenceSlot = { section: index, raw, body, cites };
      if (!numbers.length) {
        slot.uncited = true;
        slot.cites = sectionCites(section, sentences);
        slot.claim = claims.length;
        claims.push({ id: slot.claim, text: body, cites: slot.cites });
      } else if (!cites.length) {
        slot.result = {
          text: body,
          verdict: "unsupported",
          action: "dropped",
          citations: [],
          passage_ids: [],
          reason: `cites ${numbers.map((n) => `[${n}]`).join("")}, which is not a passage that was read`,
        };
      } else {
        slot.claim = claims.length;
        claims.push({ id: slot.claim, text: body, cites });
      }
      slots.push(slot);
    }
  });
  const { judgements, usage } = claims.length
    ? await judgeClaims(claims, evidence, {
        model: await resolveModel(VERIFIER, config),
        batchSize: settings.verifyBatchSize,
        concurrency: settings.verifyConcurrency,
        signal: config.signal,
        agentName: VERIFIER,
      })
    : { judgements: [], usage: emptyUsage() };
  const results: ClaimResult[] = [];
  const kept: string[][] = state.draft.map(() => []);
  for (const slot of slots) {
    if (slot.result) {
      results.push(slot.result);
      continue;
    }
    const j = judgements[slot.claim!];
    const passageIds = slot.cites.map((n) => refs.get(n)!.id);
    // A sentence written with citations keeps them; one written without gets those named as support.
    const cites = slot.uncited ? j.supportedBy : slot.cites;
    const base = {
      text: slot.body,
      verdict: j.verdict,
      passage_ids: passageIds,
      ...(slot.uncited
        ? { reason: "written without a citation: checked against its section's passages" }
        : {}),
    };
    if (j.verdict === "supported") {
      kept[slot.section].push(withCitations(slot.body, cites));
      results.push({ ...base, action: "kept", citations: cites });
    } else if (j.verdict === "fixed") {
      kept[slot.section].push(withCitations(j.fix!, cites));
      results.push({ ...base, action: "fixed", fixed_text: j.fix, citations: cites });
    } else {
      // Not supported: the citations it was written with (none for an uncited sentence).
      const written = slot.uncited ? [] : slot.cites;
      if (j.verdict === "unsupported" && settings.onUnsupported === "drop") {
        results.push({ ...base, action: "dropped", citations: written });
      } else {
        const flag = j.verdict === "unsupported" ? FLAG_UNSUPPORTED : FLAG_UNVERIFIED;
        kept[slot.section].push(`${withCitations(slot.body, written)} ${flag}`);
        results.push({ ...base, action: "flagged", citations: written });
      }
    }
  }
  const verified: ReportSection[] = state.draft.map((s, i) => ({ ...s, text: kept[i].join(" ") }));
  const report = tally(results, slots.filter((s) => s.uncited).length, usage);
  const own: UsageByAgent = usage.calls ? { [VERIFIER]: usage } : {};
  return {
    verified,
    verification: report,
    usage: own,
    nodeUsage: own,
    stage: `checked ${report.checked} cited sentence(s): ${report.supported} supported, ${report.fixed} fixed, ${report.dropped} dropped, ${report.flagged} flagged`,
  };
}
