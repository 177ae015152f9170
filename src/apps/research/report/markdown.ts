import { citationOf } from "../../common/citations.ts";
import { citationNumbers, renumberCitations } from "../../common/claims.ts";
import type { VerificationReport } from "../../common/verifier.ts";
import type { QuestionRecord } from "../base/records.ts";
import type { Citation, ReportReference, ReportSection } from "../base/state.ts";

/** Everything the finished report is assembled from. */
export interface ReportParts {
  title: string;
  topic: string;
  /** The summary first (heading ""), then one section per answered sub-question. */
  sections: readonly ReportSection[];
  /** The draft's citation numbers (the sections cite these). */
  references: readonly ReportReference[];
  questions: readonly QuestionRecord[];
  verification: VerificationReport | null;
  /** How the knowledge source is named in the text ("the corpus", "Wikipedia"). */
  sourceName: string;
}

/** The finished report: Markdown, its citations as numbered there, and the draft → report numbering. */
export interface AssembledReport {
  markdown: string;
  citations: Citation[];
  /** Draft citation number → number in the report (numbers that are no longer cited are absent). */
  renumber: Map<number, number>;
  /** True when there is no finding at all (nothing relevant was found). */
  empty: boolean;
  /** The report's title: the planner's, or the topic itself when there is no finding. */
  title: string;
}

/** Why sub-questions left gaps in the report, one line each. */
function gapLines(
  questions: readonly QuestionRecord[],
  sections: readonly ReportSection[],
): string[] {
  const lines: string[] = [];
  for (const q of questions) {
    if (q.status !== "answered") {
      const what = q.status === "failed" ? "research failed" : "no relevant source found";
      lines.push(`- "${q.question}": ${what} — ${q.reason ?? "no notes"}.`);
    } else if (!sections.some((s) => s.question === q.question && s.text.trim())) {
      lines.push(
        `- "${q.question}": its section was removed, as none of its sentences was supported by the cited passages.`,
      );
    }
  }
  return lines;
}

function referenceLine(c: Citation): string {
  const where = c.section ? `, section "${c.section}"` : "";
  const url = c.url ? ` <${c.url}>` : "";
  // A web page: its URL, title and the passage's position in it (its id is `<url>#<n>`).
  if (c.position)
    return `${c.n}. **${c.title}**${where} — passage ${c.position.index} of ${c.position.of} (${c.source})${url}`;
  const doc = c.doc_id && c.doc_id !== c.title ? `, document ${c.doc_id}` : "";
  return `${c.n}. **${c.title}**${where} — passage ${c.passage_id}${doc} (${c.source})${url}`;
}

/** The verification line under the report. */
export function verificationLine(v: VerificationReport): string {
  const parts = [
    `${v.supported} supported`,
    `${v.fixed} corrected`,
    `${v.dropped} removed as unsupported`,
    ...(v.flagged ? [`${v.flagged} flagged`] : []),
  ];
  const uncited = v.uncited
    ? ` ${v.uncited} of them were written without a citation and checked against their section's passages.`
    : "";
  return `_Verification: ${v.checked} sentence(s) checked against the passages they cite: ${parts.join(", ")}.${uncited}_`;
}

/**
 * Assembles the report: title, summary, one section per answered sub-question, the gaps (sub-questions
 * that failed or found nothing, sections emptied by verification), the References section, and the
 * verification figures. Citations are renumbered by first appearance, and only numbers that resolve
 * to a passage are printed: any other marker is removed. Without findings the report says that
 * nothing relevant was found in the source, and lists what was tried.
 */
export function assembleReport(parts: ReportParts): AssembledReport {
  const byNumber = new Map(parts.references.map((r) => [r.n, r.passage]));
  const renumber = new Map<number, number>();
  const sections = parts.sections.map((s) => ({ ...s, text: s.text.trim() }));
  for (const s of sections) {
    for (const n of citationNumbers(s.text)) {
      if (byNumber.has(n) && !renumber.has(n)) renumber.set(n, renumber.size + 1);
    }
  }
  const body = sections
    .map((s) => ({ ...s, text: renumberCitations(s.text, (n) => renumber.get(n)) }))
    .filter((s) => s.text);
  const gaps = gapLines(parts.questions, body);
  const empty = !body.some((s) => s.heading);
  // The planner's title is model text too: a report with no finding is titled by its topic.
  const title = empty ? parts.topic : parts.title;
  const lines = [`# ${title}`, ""];
  if (empty) {
    const drafted = parts.sections.some((s) => s.heading);
    lines.push(
      drafted
        ? `None of the drafted statements was supported by the passages of ${parts.sourceName} they cited, so all were removed: there is nothing to report.`
        : parts.questions.length
          ? `No relevant information was found in ${parts.sourceName} for this topic, so there is nothing to report: nothing was written from memory.`
          : `No sub-question was researched for this topic, so there is nothing to report: nothing was written from memory.`,
      "",
    );
    if (parts.questions.length) lines.push("Sub-questions researched:", "", ...gaps, "");
    return {
      markdown: `${lines.join("\n").trim()}\n`,
      citations: [],
      renumber: new Map(),
      empty,
      title,
    };
  }
  for (const s of body) {
    if (s.heading) lines.push(`## ${s.heading}`, "");
    lines.push(s.text, "");
  }
  if (gaps.length) lines.push("## Gaps", "", ...gaps, "");
  const citations: Citation[] = [...renumber.entries()].map(([draft, n]) =>
    citationOf(byNumber.get(draft)!, n),
  );
  lines.push("## References", "", ...citations.map(referenceLine), "");
  if (parts.verification) lines.push("---", "", verificationLine(parts.verification), "");
  return { markdown: `${lines.join("\n").trim()}\n`, citations, renumber, empty, title };
}
