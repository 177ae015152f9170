/**
 * Sentences and numbered citations in Markdown text: what the verifier treats as one claim, which
 * `[n]` markers it cites, and how a sentence is written back with its citations.
 */

/** A citation marker: `[3]`, `[1, 4]`, `[2; 5]`, `[^3]` (footnote style). */
const MARKER = /\s*\[\^?(\d{1,4}(?:\s*[,;]\s*\^?\d{1,4})*)\]/g;
/** Citation markers at the very start of a text (left there when a sentence ended before them). */
const LEADING_MARKERS = /^(?:\s*\[\^?\d{1,4}(?:\s*[,;]\s*\^?\d{1,4})*\])+/;

const segmenter = new Intl.Segmenter("en", { granularity: "sentence" });

/** Labelled markers small models write for a numbered source: `[P2]`, `[Passage 2]`, `[source 2]`. */
const LABELLED = /\[(?:p|passage|source|src|note|ref)\.?\s*(\d{1,4})\]/gi;

/** The text with labelled citation markers (`[P2]`, `[Passage 2]` ...) written as `[2]`. */
export function normalizeCitationMarkers(text: string): string {
  return text.replace(LABELLED, "[$1]");
}

/**
 * The sentences of a paragraph, in order. Citation markers written after a sentence's full stop
 * ("... in 1889. [1] The tower ...") stay with the sentence they follow.
 */
export function splitSentences(paragraph: string): string[] {
  const raw = [...segmenter.segment(paragraph.replace(/\s+/g, " ").trim())]
    .map((s) => s.segment.trim())
    .filter(Boolean);
  const out: string[] = [];
  for (const sentence of raw) {
    const lead = LEADING_MARKERS.exec(sentence);
    if (lead && out.length) {
      out[out.length - 1] = `${out[out.length - 1]} ${lead[0].trim()}`;
      const rest = sentence.slice(lead[0].length).trim();
      if (rest) out.push(rest);
    } else {
      out.push(sentence);
    }
  }
  return out;
}

/** The citation numbers a sentence cites, in order of appearance, each once. */
export function citationNumbers(sentence: string): number[] {
  const out: number[] = [];
  for (const m of sentence.matchAll(MARKER)) {
    for (const part of m[1].split(/[,;]/)) {
      const n = Number(part.replace(/[\s^]/g, ""));
      if (Number.isInteger(n) && !out.includes(n)) out.push(n);
    }
  }
  return out;
}

/** The sentence without its citation markers. */
export function withoutCitations(sentence: string): string {
  return sentence
    .replace(MARKER, "")
    .replace(/\s+([.,;:!?])/g, "$1")
    .replace(/\s+/g, " ")
    .trim();
}

/**
 * The sentence with citation markers `[a][b]` placed before its final punctuation ("... in 1889 [1].").
 * No numbers: the sentence unchanged.
 */
export function withCitations(body: string, numbers: readonly number[]): string {
  const text = body.trim();
  if (!numbers.length) return text;
  const marks = numbers.map((n) => `[${n}]`).join("");
  const m = /([.!?]["'”’)]*)$/.exec(text);
  if (!m) return `${text} ${marks}`;
  return `${text.slice(0, m.index).trimEnd()} ${marks}${m[1]}`;
}

/** Replaces each citation number of a text by `map(n)`, dropping markers whose number maps to undefined. */
export function renumberCitations(text: string, map: (n: number) => number | undefined): string {
  return text
    .replace(MARKER, (whole, inner: string) => {
      const kept = inner
        .split(/[,;]/)
        .map((p) => map(Number(p.replace(/[\s^]/g, ""))))
        .filter((n): n is number => n !== undefined);
      const lead = /^\s*/.exec(whole)![0];
      return kept.length ? `${lead}${kept.map((n) => `[${n}]`).join("")}` : "";
    })
    .replace(/\s+([.,;:!?])/g, "$1");
}
