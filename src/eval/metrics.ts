/**
 * Answer-quality metrics for multi-hop QA, following the official HotpotQA / SQuAD evaluation
 * scripts so figures are comparable with published numbers:
 * - normalization: lower-case, drop punctuation, drop the articles a/an/the, collapse whitespace;
 * - EM: normalized prediction equals a normalized gold answer;
 * - F1: token-level F1 over the normalized bags of words (HotpotQA's rule: if either side is
 *   yes / no / noanswer and they differ, F1 is 0);
 * - cover-EM: a normalized gold answer appears inside the normalized prediction (on word
 *   boundaries), the lenient metric used by Search-R1 and others for verbose models.
 * Every metric takes the best score over the gold answer and its aliases.
 *
 * Deliberate extensions of the ASCII-only official script, which only matter for non-ASCII text:
 * the text is NFC-normalized first (so a composed "é" equals "e" + combining accent), and Unicode
 * punctuation (\p{P}, e.g. curly quotes, en dashes) is removed like ASCII punctuation. Numbers
 * are not rewritten ("two" ≠ "2"); "1,000" and "1000" match because the comma is punctuation.
 */

// Python's string.punctuation, as used by the official scripts.
const ASCII_PUNCTUATION = /[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/g;
const UNICODE_PUNCTUATION = /\p{P}/gu;
// Unicode-aware word boundaries (JS \b is ASCII-only and would cut "a" off "añejo").
const ARTICLES = /(?<![\p{L}\p{M}\p{N}_])(a|an|the)(?![\p{L}\p{M}\p{N}_])/gu;

/** Standard answer normalization (see the module comment). */
export function normalizeAnswer(text: string): string {
  let s = String(text ?? "")
    .normalize("NFC")
    .toLowerCase();
  s = s.replace(ASCII_PUNCTUATION, "").replace(UNICODE_PUNCTUATION, "");
  s = s.replace(ARTICLES, " ");
  return s.split(/\s+/u).filter(Boolean).join(" ");
}

/** Scores of one prediction against one question's gold answers. */
export interface AnswerScores {
  /** 1 if the normalized prediction equals a normalized gold answer, else 0. */
  em: number;
  /** Best token-level F1 over the gold answers (0..1). */
  f1: number;
  /** 1 if a normalized gold answer occurs in the normalized prediction on word boundaries. */
  coverEm: number;
}

/** EM of one prediction against one gold answer. */
export function exactMatch(prediction: string, gold: string): number {
  return normalizeAnswer(prediction) === normalizeAnswer(gold) ? 1 : 0;
}

const SPECIAL = new Set(["yes", "no", "noanswer"]);

/** Token F1 of one prediction against one gold answer (HotpotQA official rules). */
export function f1Score(prediction: string, gold: string): number {
  const p = normalizeAnswer(prediction);
  const g = normalizeAnswer(gold);
  if ((SPECIAL.has(p) || SPECIAL.has(g)) && p !== g) return 0;
  const pt = p.split(" ").filter(Boolean);
  const gt = g.split(" ").filter(Boolean);
  if (pt.length === 0 || gt.length === 0) return pt.length === gt.length ? 1 : 0;
  const counts = new Map<string, number>();
  for (const t of gt) counts.set(t, (counts.get(t) ?? 0) + 1);
  let same = 0;
  for (const t of pt) {
    const c = counts.get(t) ?? 0;
    if (c > 0) {
      same++;
      counts.set(t, c - 1);
    }
  }
  if (same === 0) return 0;
  const precision = same / pt.length;
  const recall = same / gt.length;
  return (2 * precision * recall) / (precision + recall);
}

/** Cover-EM of one prediction against one gold answer. */
export function coverExactMatch(prediction: string, gold: string): number {
  const p = normalizeAnswer(prediction);
  const g = normalizeAnswer(gold);
  if (!g) return p === g ? 1 : 0;
  return ` ${p} `.includes(` ${g} `) ? 1 : 0;
}

/** Best EM / F1 / cover-EM of a prediction over a list of gold answers (answer + aliases). */
export function scoreAnswer(prediction: string | undefined | null, golds: string[]): AnswerScores {
  const pred = prediction ?? "";
  let em = 0;
  let f1 = 0;
  let coverEm = 0;
  for (const gold of golds) {
    em = Math.max(em, exactMatch(pred, gold));
    f1 = Math.max(f1, f1Score(pred, gold));
    coverEm = Math.max(coverEm, coverExactMatch(pred, gold));
  }
  // No prediction is never correct, even against an empty gold answer.
  if (!normalizeAnswer(pred)) return { em: 0, f1: 0, coverEm: 0 };
  return { em, f1, coverEm };
}
