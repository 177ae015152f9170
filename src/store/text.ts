/**
 * Small text helpers shared by both knowledge sources: FTS5 query building, title keys, summaries
 * and fuzzy title similarity (for "did you mean" suggestions).
 */
import { parseHeading } from "./chunking.ts";

// Function words that match nearly every passage: an OR query containing them would scan most of
// the index for no ranking benefit. BM25's IDF would down-weight them anyway; dropping them keeps
// query latency flat on large corpora.
const STOPWORDS = new Set(
  (
    "a an and are as at be been but by did do does for from had has have how i in into is it its " +
    "of on or that the their there these this to was were what when where which who whom why will " +
    "with about after before between during than then was were one also can could would should"
  ).split(" "),
);

/** Lower-cased word tokens of a query (letters and digits, Unicode-aware). */
export function queryTokens(query: string): string[] {
  return (query.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter((t) => t.length > 0);
}

/** {@link queryTokens} without function words ("the", "of", "which", ...): all of them if only those. */
export function contentTokens(text: string): string[] {
  const all = queryTokens(text);
  const content = all.filter((t) => !STOPWORDS.has(t));
  return content.length > 0 ? content : all;
}

/**
 * Builds an FTS5 MATCH expression from free text: every useful word quoted (so FTS5 syntax in the
 * user's text — quotes, AND, NEAR, column filters — is taken literally) and OR-ed, letting BM25
 * rank passages that contain more (and rarer) words first. Returns "" when nothing is searchable.
 */
export function ftsQuery(query: string): string {
  return [...new Set(contentTokens(query))].map((t) => `"${t}"`).join(" OR ");
}

/** FTS5 query for the trigram title index: the title's trigrams, OR-ed. */
export function trigramQuery(title: string): string {
  const s = title.toLowerCase().replace(/\s+/g, " ").trim();
  const grams = new Set<string>();
  for (let i = 0; i + 3 <= s.length; i++) {
    const g = s.slice(i, i + 3);
    if (!g.includes('"')) grams.add(g);
  }
  return [...grams].map((g) => `"${g}"`).join(" OR ");
}

/** Case-, underscore- and whitespace-insensitive key for titles ("eiffel tower" = "Eiffel_Tower"). */
export function titleKey(title: string): string {
  return exactTitle(title).toLowerCase();
}

/** A title with underscores as spaces and whitespace collapsed, case kept ("Red_Meat " → "Red Meat"). */
export function exactTitle(title: string): string {
  return title.normalize("NFC").replace(/_/g, " ").replace(/\s+/g, " ").trim();
}

/** Separates the folded key from the exact title in a {@link caseVariantKey}. */
const CASE_VARIANT_SEPARATOR = "\u0001";

/**
 * The key of a page (or redirect) whose title differs only in case from one stored under
 * {@link titleKey}: the folded key plus the exact title, so "Red Meat" and "Red meat" are two
 * pages, as on MediaWiki. Lookups try it first, then the folded key.
 */
export function caseVariantKey(title: string): string {
  return `${titleKey(title)}${CASE_VARIANT_SEPARATOR}${exactTitle(title)}`;
}

/** The folded key inside a {@link caseVariantKey} (a folded key is returned as it is). */
export function foldedKey(key: string): string {
  const i = key.indexOf(CASE_VARIANT_SEPARATOR);
  return i === -1 ? key : key.slice(0, i);
}

/** Similarity of two titles in [0, 1] (Dice coefficient over character bigrams). */
export function titleSimilarity(a: string, b: string): number {
  const grams = (s: string) => {
    const t = ` ${titleKey(s)} `;
    const m = new Map<string, number>();
    for (let i = 0; i + 2 <= t.length; i++)
      m.set(t.slice(i, i + 2), (m.get(t.slice(i, i + 2)) ?? 0) + 1);
    return m;
  };
  const ga = grams(a);
  const gb = grams(b);
  let inter = 0;
  let total = 0;
  for (const [g, n] of ga) {
    inter += Math.min(n, gb.get(g) ?? 0);
    total += n;
  }
  for (const n of gb.values()) total += n;
  return total === 0 ? 0 : (2 * inter) / total;
}

/**
 * A ~`maxChars` plain-text summary: heading lines dropped, whitespace collapsed, cut at a word
 * boundary with an ellipsis when shortened.
 */
export function summarize(text: string, maxChars = 1000): string {
  const body = text
    .replace(/\r\n?/g, "\n")
    .split("\n")
    .filter((line) => parseHeading(line) === undefined)
    .join(" ")
    .replace(/\s+/g, " ")
    .trim();
  if (body.length <= maxChars) return body;
  const cut = body.slice(0, maxChars);
  const space = cut.lastIndexOf(" ");
  return `${(space > maxChars * 0.6 ? cut.slice(0, space) : cut).trimEnd()}…`;
}

/** Reciprocal rank fusion of ranked id lists (k = 60 as in Cormack et al. 2009). */
export function reciprocalRankFusion<T>(lists: T[][], k = 60): Map<T, number> {
  const scores = new Map<T, number>();
  for (const list of lists) {
    list.forEach((id, rank) => scores.set(id, (scores.get(id) ?? 0) + 1 / (k + rank + 1)));
  }
  return scores;
}
