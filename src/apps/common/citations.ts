import { createHash } from "node:crypto";
import type { Passage } from "../../store/types.ts";

/** A numbered citation as a result prints it (a research report's References, `ask --verify`). */
export interface Citation {
  /** The number used in the text (`[n]`). */
  n: number;
  /** Passage id in its source (corpus passage row id, or `<title>#<chunk>` online). */
  passage_id: string;
  /** Document id (corpus document row id, or the page title online). */
  doc_id?: string;
  title: string;
  /** Section heading ("" for the lead). */
  section: string;
  /** Page URL (online sources; a corpus document's own URL when it has one). */
  url?: string;
  /** "corpus" or "wikipedia". */
  source: string;
  /** The passage's text (what cited sentences are checked against). */
  text: string;
}

/** A passage's id: the source's own, else one made from its page and text (stable for the same text). */
export function passageId(p: Pick<Passage, "id" | "title" | "text">): string {
  if (p.id) return p.id;
  const digest = createHash("sha256").update(p.text).digest("hex").slice(0, 12);
  return `${p.title}#${digest}`;
}

/** A retrieved passage as citation `n`. */
export function citationOf(
  p: Passage,
  n: number,
  extra: { url?: string; source: string },
): Citation {
  return {
    n,
    passage_id: passageId(p),
    ...(p.docId ? { doc_id: p.docId } : {}),
    title: p.title,
    section: p.section,
    ...(extra.url ? { url: extra.url } : {}),
    source: extra.source,
    text: p.text,
  };
}
