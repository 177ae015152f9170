import { HumanMessage, SystemMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { callModel, messageText, resolveModel } from "../../../core/models.ts";
import { stripThinkBlocks } from "../../../core/parser.ts";
import { type UsageTotals, addUsage, emptyUsage, usageFromMessage } from "../../../core/usage.ts";
import { loadPrompt, renderPrompt } from "../../../prompts/render.ts";
import { mapPool } from "../../../util/concurrency.ts";
import { citationNumbers, normalizeCitationMarkers, splitSentences } from "../../common/claims.ts";
import type { Note } from "../base/records.ts";
import { researchSettingsOf } from "../base/settings.ts";
import type {
  ReportReference,
  ReportSection,
  ResearchStateValue,
  ResearchUpdate,
} from "../base/state.ts";

/** Model name of the writer (CODEHOP_MODEL_WRITER, usage key). */
export const WRITER = "writer";

/**
 * Citation numbers for the draft: every passage a note of an answered sub-question came from,
 * numbered by first use (sub-questions in research order, notes in order).
 */
export function numberReferences(state: Pick<ResearchStateValue, "notes" | "passages">): {
  references: ReportReference[];
  numberOf: Map<string, number>;
} {
  const byId = new Map(state.passages.map((p) => [p.id, p]));
  const numberOf = new Map<string, number>();
  const references: ReportReference[] = [];
  for (const note of state.notes) {
    for (const id of note.passages) {
      const passage = byId.get(id);
      if (!passage || numberOf.has(id)) continue;
      numberOf.set(id, references.length + 1);
      references.push({ n: references.length + 1, passage });
    }
  }
  return { references, numberOf };
}

/** A note as the writer sees it: `- text [n][m]` with the draft's citation numbers. */
function noteLine(note: Note, numberOf: ReadonlyMap<string, number>): string {
  const marks = note.passages
    .map((id) => numberOf.get(id))
    .filter((n): n is number => n !== undefined)
    .map((n) => `[${n}]`)
    .join("");
  return `- ${note.text} ${marks}`.trimEnd();
}

/**
 * Reads a section reply: an optional heading line ("Heading: ...", or a Markdown heading) and the
 * paragraph (its lines joined; list markers and labels dropped). No heading: `fallback`.
 */
export function parseSection(reply: string, fallback: string): { heading: string; text: string } {
  let heading = "";
  const lines: string[] = [];
  for (const raw of normalizeCitationMarkers(stripThinkBlocks(reply)).split("\n")) {
    const line = raw.trim();
    if (!line) continue;
    const h =
      /^(?:#+\s*)?(?:\*\*)?heading(?:\*\*)?\s*:\s*(.+)$/i.exec(line) ?? /^#+\s+(.+)$/.exec(line);
    if (h && !heading && !lines.length) {
      heading = h[1]
        .replace(/\*\*/g, "")
        .replace(/^#+\s*/, "")
        .trim();
      continue;
    }
    lines.push(line.replace(/^(?:[-*•]\s+|(?:paragraph|summary)\s*:\s*)/i, ""));
  }
  return { heading: heading || fallback, text: lines.join(" ").replace(/\s+/g, " ").trim() };
}

/** A heading from a sub-question when the writer gave none ("When was X built?" → "When was X built"). */
function headingOf(question: string): string {
  return question.replace(/[?.!]+$/, "").trim();
}

/**
 * write: drafts the report from the notes — one model call per answered sub-question (its
 * section: a heading and a paragraph citing the notes' passages as `[n]`, at most
 * `writerConcurrency` at once), then one call for the summary at the top, written from the
 * sections. No notes at all: nothing is written (the report says nothing relevant was found).
 */
export async function write(
  state: ResearchStateValue,
  config: LangGraphRunnableConfig,
): Promise<ResearchUpdate> {
  const { references, numberOf } = numberReferences(state);
  const answered = state.questions.filter(
    (q) => q.status === "answered" && state.notes.some((n) => n.question === q.question),
  );
  if (!answered.length || !references.length) {
    return { draft: [], references: [], stage: "nothing to write: no sub-question found evidence" };
  }
  const settings = researchSettingsOf(config, state.maxQuestions);
  const model = await resolveModel(WRITER, config);
  const system = new SystemMessage(loadPrompt("writer/instructions.md"));
  const topic = state.task || state.topic;
  let usage: UsageTotals = emptyUsage();
  const ask = async (user: string) => {
    const reply = await callModel(model, [system, new HumanMessage(user)], {
      agentName: WRITER,
      signal: config.signal,
    });
    usage = addUsage(usage, usageFromMessage(reply));
    return messageText(reply);
  };
  const sections: ReportSection[] = await mapPool(
    answered,
    settings.writerConcurrency,
    async (q) => {
      const notes = state.notes.filter((n) => n.question === q.question);
      const reply = await ask(
        renderPrompt("writer/section.md", {
          topic,
          question: q.question,
          notes: notes.map((n) => noteLine(n, numberOf)).join("\n"),
        }),
      );
      const { heading, text } = parseSection(reply, headingOf(q.question));
      return { heading, question: q.question, text };
    },
    config.signal,
  );
  const written = sections.filter((s) => s.text);
  const summaryReply = written.length
    ? await ask(
        renderPrompt("writer/summary.md", {
          topic,
          sections: written.map((s) => `## ${s.heading}\n${s.text}`).join("\n\n"),
        }),
      )
    : "";
  const summary = parseSection(summaryReply, "").text;
  const draft: ReportSection[] = [{ heading: "", question: "", text: summary }, ...written];
  const cited = draft
    .flatMap((s) => splitSentences(s.text))
    .filter((x) => citationNumbers(x).length).length;
  const own = { [WRITER]: usage };
  return {
    draft,
    references,
    usage: own,
    nodeUsage: own,
    stage: `drafted ${written.length} section(s) and a summary: ${cited} cited sentence(s) from ${state.notes.length} note(s)`,
  };
}
