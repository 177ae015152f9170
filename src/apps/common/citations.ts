import { createHash } from "node:crypto";
import type { Passage } from "../../store/types.ts";

/** A passage that was read, with everything a citation needs. */
export interface CitedPassage {
  /** Passage id in its source (corpus passage row id, or `<title>#<chunk>` online). */
  id: string;
  /** Document id (corpus document row id, or the page title online). */
  doc_id?: string;
  title: string;
  /** Section heading ("" for the lead). */
  section: string;
  /** Page URL (online sources; a corpus document's own URL when it has one). */
  url?: string;
  /** "corpus", "wikipedia" or "web". */
  source: string;
  /** Where in its page: passage `index` (1-based) of `of` (web pages). */
  position?: { index: number; of: number };
  /** The passage's text (what cited sentences are checked against). */
  text: string;
}

/** A numbered citation as a result prints it (a research report's References, `ask --verify`). */
export interface Citation extends Omit<CitedPassage, "id"> {
  /** The number used in the text (`[n]`). */
  n: number;
  /** The passage's id in its source ({@link CitedPassage.id}). */
  passage_id: string;
}

/** A passage's id: the source's own, else one made from its page and text (stable for the same text). */
export function passageId(p: Pick<Passage, "id" | "title" | "text">): string {
  if (p.id) return p.id;
  const digest = createHash("sha256").update(p.text).digest("hex").slice(0, 12);
  return `${p.title}#${digest}`;
}

/** A retrieved passage with where it came from: what a citation of it needs. */
export function citedPassage(p: Passage, from: { url?: string; source: string }): CitedPassage {
  return {
    id: passageId(p),
    ...(p.docId ? { doc_id: p.docId } : {}),
    title: p.title,
    section: p.section,
    ...(from.url ? { url: from.url } : {}),
    source: from.source,
    ...(p.position ? { position: p.position } : {}),
    text: p.text,
  };
}

/** A passage as citation `n`. */
export function citationOf(p: CitedPassage, n: number): Citation {
  const { id, ...rest } = p;
  return { n, passage_id: id, ...rest };
}
