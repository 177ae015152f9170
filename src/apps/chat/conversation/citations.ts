import type { Source } from "../../../core/state.ts";

/** A citation of a reply: a passage of an attached file the agent read. */
export interface Citation {
  file: string;
  /** "p. 3", a section heading, or "" for text before the first heading. */
  section: string;
  /** PDF page, when the section is a page. */
  page?: number;
  /** The label answers cite it by: "report.pdf, p. 3", "notes.docx § Budget". */
  cite: string;
}

function asCitation(source: Source): Citation | undefined {
  const { file, section, page, cite } = source as Record<string, unknown>;
  if (typeof file !== "string" || typeof cite !== "string") return undefined;
  const c: Citation = { file, section: typeof section === "string" ? section : "", cite };
  if (typeof page === "number") c.page = page;
  return c;
}

const norm = (text: string) => text.toLowerCase().replace(/\s+/g, " ");

/**
 * The reply to the user and its citations, from the agent's answer and the sources its tools
 * reported (search_files reports each passage it returned). Passages whose label the answer cites
 * (`[report.pdf, p. 2]`) are its citations; an answer that searched the files but cites none gets
 * a "Sources:" line naming the first passage of each file it read, so every reply built on the
 * files says where it came from.
 */
export function withCitations(
  answer: string,
  sources: readonly Source[] | undefined,
): { content: string; citations: Citation[] } {
  const read = (sources ?? []).map(asCitation).filter((c): c is Citation => Boolean(c));
  const unique = [...new Map(read.map((c) => [c.cite, c])).values()];
  const text = norm(answer);
  const cited = unique.filter((c) => text.includes(norm(c.cite)));
  if (cited.length) return { content: answer, citations: cited };
  if (!unique.length) return { content: answer, citations: [] };
  const consulted: Citation[] = [];
  for (const c of unique) if (!consulted.some((x) => x.file === c.file)) consulted.push(c);
  return {
    content: `${answer}\n\nSources: ${consulted.map((c) => c.cite).join("; ")}`,
    citations: consulted,
  };
}
