import type { BaseCheckpointSaver } from "@langchain/langgraph";
import type { AppGraph, RunApp } from "../../runs/app.ts";
import { startRun, type StartOptions } from "../../runs/lifecycle.ts";
import type { AskResult } from "../../runs/result.ts";
import { openKnowledgeServices } from "../common/knowledge-source.ts";
import type { VerificationReport } from "../common/verifier.ts";
import type { QuestionRecord } from "./base/records.ts";
import { RESEARCH_STAMP } from "./nodes/start.ts";
import { researchRecording } from "./recording.ts";
import { renderReportHtml } from "./report/html.ts";
import {
  checkSources,
  checkTopic,
  resolveResearchSettings,
  type ResearchSettingsInput,
} from "./base/settings.ts";
import type { Citation } from "./base/state.ts";
import {
  RESEARCH_MODEL_USERS,
  RESEARCH_RECURSION_LIMIT,
  createResearcherGraph,
  researchTeam,
} from "./team.ts";

/** One sub-question as a research result reports it. */
export interface ResearchQuestionReport {
  question: string;
  status: QuestionRecord["status"];
  notes: number;
  reason?: string;
  /** Model calls and tokens of its pipeline (researcher, page readers, condensation). */
  usage: { calls: number; input_tokens: number; output_tokens: number };
}

/**
 * What `research()` returns and `codehop research --json` prints: the fields every run has
 * (`answer` is the report's Markdown, `sources` the documents it cites, `usage` per agent and
 * model step, `steps` the planner's actions) plus the report's own.
 */
export interface ResearchResult extends AskResult {
  topic: string;
  title: string;
  /** The report in Markdown (the same text as `answer`). */
  report: string;
  /** The report's numbered citations: every `[n]` of the report is one of these. */
  citations: Citation[];
  /** What the verifier checked and decided (null when the report had nothing to verify). */
  verification: VerificationReport | null;
  /** How each sub-question went. */
  questions: ResearchQuestionReport[];
  /** The report as one self-contained HTML page (`research()` only; the CLI writes it with --out). */
  html?: string;
}

function questionReport(q: QuestionRecord): ResearchQuestionReport {
  let calls = 0;
  let input = 0;
  let output = 0;
  for (const u of Object.values(q.usage ?? {})) {
    calls += u.calls;
    input += u.inputTokens;
    output += u.outputTokens;
  }
  return {
    question: q.question,
    status: q.status,
    notes: q.notes,
    ...(q.reason ? { reason: q.reason } : {}),
    usage: { calls, input_tokens: input, output_tokens: output },
  };
}

/** The research fields of a result, from the thread's latest state values. */
export function researchResultFields(values: Record<string, unknown>): Record<string, unknown> {
  const report = typeof values.answer === "string" ? values.answer : "";
  return {
    topic: typeof values.topic === "string" ? values.topic : "",
    title: typeof values.title === "string" ? values.title : "",
    report,
    citations: Array.isArray(values.citations) ? values.citations : [],
    verification: (values.verification as VerificationReport | null | undefined) ?? null,
    questions: (Array.isArray(values.questions) ? (values.questions as QuestionRecord[]) : []).map(
      questionReport,
    ),
  };
}

/**
 * The research app for the run lifecycle: a topic in, the researcher graph (planner → researcher
 * pipelines → writer → verifier → report), over online Wikipedia or a local corpus (the thread
 * remembers which).
 */
export const researchApp: RunApp = {
  ...researchRecording,
  team: researchTeam,
  // The pipeline, not the planner agent, is the root of its trees (its start node stamps it).
  rootName: RESEARCH_STAMP,
  graph: (checkpointer: BaseCheckpointSaver) =>
    createResearcherGraph({ checkpointer }) as unknown as AppGraph,
  recursionLimit: RESEARCH_RECURSION_LIMIT,
  input: (topic) => ({ topic }),
  inputText: (input) => String(input.topic ?? ""),
  modelUsers: RESEARCH_MODEL_USERS,
  shapeResult: (snapshot) =>
    researchResultFields((snapshot.values ?? {}) as Record<string, unknown>),
  openServices: openKnowledgeServices,
};

/** Options of {@link research}. */
export interface ResearchOptions extends StartOptions {
  /** At most this many sub-questions (1–12; default 4). Recorded with the thread. */
  maxQuestions?: number;
  /** The other research settings (concurrency, batch sizes, `onUnsupported` ...); see ResearchSettingsSchema. */
  settings?: ResearchSettingsInput;
}

/** The report of a research result as a self-contained HTML page. */
export function researchHtml(result: Pick<ResearchResult, "report" | "citations">): string {
  return renderReportHtml({ markdown: result.report, citations: result.citations });
}

/**
 * Researches a topic and writes a cited, verified report: the planner splits the topic into
 * sub-questions researched in parallel (each: a researcher agent searches and reads pages, what it
 * read is condensed into notes tied to passages), a writer drafts the report with numbered
 * citations, and a verifier checks every cited sentence against its passages. Every step is
 * checkpointed (`resume`, `replay` and `history` work on its thread like on `ask`'s). Throws
 * CODEHOP_INPUT_INVALID for an empty or huge topic and CODEHOP_CONFIG_INVALID for bad limits,
 * before anything runs.
 */
export async function research(
  topic: string,
  options: ResearchOptions = {},
): Promise<ResearchResult> {
  const text = checkTopic(topic);
  const { maxQuestions, settings, ...start } = options;
  checkSources(start.config);
  resolveResearchSettings({
    ...settings,
    ...(maxQuestions !== undefined ? { maxQuestions } : {}),
  });
  const result = (await startRun(researchApp, text, {
    ...start,
    ...(maxQuestions !== undefined ? { input: { ...start.input, maxQuestions } } : {}),
    context: { ...start.context, ...(settings ? { research: settings } : {}) },
  })) as ResearchResult;
  return { ...result, html: researchHtml(result) };
}
