import { HumanMessage, SystemMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { callModel, messageText, resolveModel } from "../../../core/models.ts";
import { stripThinkBlocks } from "../../../core/parser.ts";
import { type UsageByAgent, mergeUsage, usageFromMessage } from "../../../core/usage.ts";
import { renderPrompt } from "../../../prompts/render.ts";
import {
  citationNumbers,
  normalizeCitationMarkers,
  withoutCitations,
} from "../../common/claims.ts";
import {
  type CitedPassage,
  type Note,
  noteRecord,
  passageRecord,
  questionRecord,
} from "../base/records.ts";
import { researchSettingsOf } from "../base/settings.ts";
import type { QuestionStateValue, QuestionUpdate } from "../base/state.ts";

/** Model name of the condensation step (CODEHOP_MODEL_CONDENSER, usage key). */
export const CONDENSER = "condenser";

/**
 * Reads a condensation reply: one note per line ("- fact [2][3]"), each keeping the passage
 * numbers it cites that exist (1..`passages`). Lines citing no existing passage are dropped — a
 * note must come from something that was read. "NONE" (or nothing usable) gives no notes.
 */
export function parseNotes(
  reply: string,
  passages: number,
  max: number,
): { notes: Array<{ text: string; cites: number[] }>; dropped: number } {
  const notes: Array<{ text: string; cites: number[] }> = [];
  let dropped = 0;
  for (const raw of normalizeCitationMarkers(stripThinkBlocks(reply)).split("\n")) {
    const line = raw.replace(/^\s*(?:[-*•]|\d+[.)])\s*/, "").trim();
    if (!line || /^none\b/i.test(line) || /^notes?:?$/i.test(line)) continue;
    const numbers = citationNumbers(line);
    if (!numbers.length) continue;
    const cites = numbers.filter((n) => n >= 1 && n <= passages);
    const text = withoutCitations(line);
    if (!cites.length || text.length < 3) {
      dropped++;
      continue;
    }
    if (notes.length < max) notes.push({ text, cites });
  }
  return { notes, dropped };
}

/** The passages as the condensation prompt numbers them: `[n] (Title — Section) text`. */
export function numberedPassages(passages: readonly CitedPassage[]): string {
  return passages
    .map((p, i) => {
      const where = p.section ? `${p.title} — ${p.section}` : p.title;
      return `[${i + 1}] (${where}) ${p.text.replace(/\s+/g, " ").trim()}`;
    })
    .join("\n");
}

/**
 * condense (sub-question pipeline; Search-o1's "reason in documents"): one model call turns the
 * passages the researcher read into a few short notes for the sub-question, each tied to the exact
 * passages it came from; notes citing no passage that was read are dropped. What goes back to the
 * planner is the notes, not the pages — and the sub-question's record (answered, no evidence or
 * failed), its notes and their passages, as sources for the report. No passages (the researcher
 * failed or read nothing): no model call, the record says why.
 */
export async function condense(
  state: QuestionStateValue,
  config: LangGraphRunnableConfig,
): Promise<QuestionUpdate> {
  const question = state.task;
  const settings = researchSettingsOf(config);
  const read = state.read ?? [];
  if (!read.length) {
    const reason = state.failure ?? "nothing was read";
    const status = /failed/.test(reason) ? "failed" : "no_evidence";
    return {
      answer: `Nothing found for "${question}": ${reason}. This sub-question is left out of the report (the report notes the gap).`,
      status: "final_answer",
      sources: [questionRecord({ question, status, notes: 0, reason, usage: state.usage })],
      stage: `no notes: ${reason}`,
    };
  }
  const model = await resolveModel(CONDENSER, config);
  const reply = await callModel(
    model,
    [
      new SystemMessage(
        renderPrompt("condenser/instructions.md", {
          max_notes: settings.maxNotesPerQuestion,
        }),
      ),
      new HumanMessage(
        renderPrompt("condenser/request.md", { question, passages: numberedPassages(read) }),
      ),
    ],
    { agentName: CONDENSER, signal: config.signal },
  );
  const own: UsageByAgent = { [CONDENSER]: usageFromMessage(reply) };
  const usage = mergeUsage(state.usage ?? {}, own);
  const { notes: parsed } = parseNotes(
    messageText(reply),
    read.length,
    settings.maxNotesPerQuestion,
  );
  const notes: Note[] = parsed.map((n) => ({
    question,
    text: n.text,
    passages: n.cites.map((c) => read[c - 1].id),
  }));
  if (!notes.length) {
    const reason = "the passages read do not answer it";
    return {
      answer: `Nothing found for "${question}": ${reason}. This sub-question is left out of the report (the report notes the gap).`,
      status: "final_answer",
      usage: own,
      nodeUsage: own,
      sources: [questionRecord({ question, status: "no_evidence", notes: 0, reason, usage })],
      stage: `no notes: ${reason}`,
    };
  }
  const cited = new Set(notes.flatMap((n) => n.passages));
  const passages = read.filter((p) => cited.has(p.id));
  const pages = [...new Set(passages.map((p) => p.title))];
  return {
    answer: `Notes on "${question}" (from: ${pages.join(", ")}):\n${notes.map((n) => `- ${n.text}`).join("\n")}`,
    status: "final_answer",
    usage: own,
    nodeUsage: own,
    sources: [
      questionRecord({ question, status: "answered", notes: notes.length, usage }),
      ...notes.map(noteRecord),
      ...passages.map(passageRecord),
    ],
    stage: `${notes.length} note(s) from ${passages.length} of ${read.length} passage(s)`,
  };
}
