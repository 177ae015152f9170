import { Annotation } from "@langchain/langgraph";
import { z } from "zod";
import { appendUnique, lastValue, type Source } from "../../../core/state.ts";
import { type UsageByAgent, mergeUsage } from "../../../core/usage.ts";
import type { Citation } from "../../common/citations.ts";
import type { VerificationReport } from "../../common/verifier.ts";
import type { CitedPassage, Note, QuestionRecord } from "./records.ts";
import { MAX_QUESTIONS, MAX_TOPIC_CHARS } from "./settings.ts";

const last = lastValue;

/** A usage channel: tokens and model calls per agent name; the reducer sums. */
const usageChannel = () =>
  Annotation<UsageByAgent>({
    reducer: (left, right) => mergeUsage(left, right),
    default: () => ({}),
  });
/** A sources channel: records appended, duplicates (same JSON) dropped. */
const sourcesChannel = () =>
  Annotation<Source[]>({ reducer: (left, right) => appendUnique(left, right), default: () => [] });

/** A citation of the finished report, as printed in its References section and in `--json`. */
export type { Citation };

/** Input of the researcher graph (the CLI, `research()`, Studio). */
export const ResearchInput = z.object({
  topic: z
    .string()
    .min(1, "the research topic is empty: give a subject to research")
    .max(
      MAX_TOPIC_CHARS,
      `the topic is longer than ${MAX_TOPIC_CHARS} characters: state the subject in a sentence (documents belong in a corpus: codehop ingest)`,
    )
    .describe("the subject to research"),
  maxQuestions: z
    .number()
    .int("maxQuestions must be a whole number")
    .min(1, `maxQuestions must be from 1 to ${MAX_QUESTIONS}`)
    .max(MAX_QUESTIONS, `maxQuestions must be from 1 to ${MAX_QUESTIONS}`)
    .optional()
    .describe("at most this many sub-questions (default: the run's research settings, 4)"),
});

/** One section of the report: its heading, the sub-question it answers, its Markdown text. */
export interface ReportSection {
  /** Heading ("" for the summary at the top). */
  heading: string;
  /** The sub-question it answers ("" for the summary). */
  question: string;
  /** Paragraph text with numbered citations `[n]` (numbers of {@link ReportReference}s). */
  text: string;
}

/** A numbered reference of the draft: citation number → the passage it points to. */
export interface ReportReference {
  n: number;
  passage: CitedPassage;
}

/**
 * State of the researcher graph (start → research → write → verify → report). Every channel is
 * "last value" unless said otherwise; each is written by the node named.
 */
export const ResearchState = Annotation.Root({
  /** The topic (input). */
  topic: last<string>(() => ""),
  /** At most this many sub-questions (input, optional; else the run's settings). */
  maxQuestions: last<number | undefined>(() => undefined),
  /** The graph's name stamped for trees and histories ("research"; start). */
  agent: last<string>(() => ""),
  /** The topic as the task shown in trees (start). */
  task: last<string>(() => ""),
  /** The report's title: the planner's final answer when it is a short line, else the topic (research); the topic when the report has no finding (report). */
  title: last<string>(() => ""),
  /** Planner actions (research): what a run result reports as `steps`. */
  stepCount: last<number>(() => 0),
  /** How each sub-question went, in the order they were researched (research). */
  questions: last<QuestionRecord[]>(() => []),
  /** Notes kept, each tied to passages in `passages` (research). */
  notes: last<Note[]>(() => []),
  /** Every passage a note came from, by id (research). */
  passages: last<CitedPassage[]>(() => []),
  /** The report's sections as drafted: the summary first, then one per answered sub-question (write). */
  draft: last<ReportSection[]>(() => []),
  /** Citation numbers of the draft (write). */
  references: last<ReportReference[]>(() => []),
  /** The sections after verification: unsupported sentences removed or flagged (verify). */
  verified: last<ReportSection[]>(() => []),
  /** What the verifier checked and decided (verify). */
  verification: last<VerificationReport | null>(() => null),
  /** The finished report's citations, numbered as printed (report). */
  citations: last<Citation[]>(() => []),
  /** The finished report in Markdown (report). */
  answer: last<string | null>(() => null),
  /** "running"; then "final_answer" (a report with findings) or "no_evidence" (nothing relevant found) (report). */
  status: last<string>(() => "running"),
  /** Tokens and model calls per agent and step; reducer sums (research, write, verify). */
  usage: usageChannel(),
  /** Documents the report cites, `{ title, url? }` (report); reducer appends, dropping duplicates. */
  sources: sourcesChannel(),
  /** What the last pipeline node did, one line for the live tree (every node). */
  stage: last<string>(() => ""),
  /** The model usage of the last node's own calls (write, verify), for the live tree's totals. */
  nodeUsage: last<UsageByAgent>(() => ({})),
});

/** State of the researcher graph as nodes read it. */
export type ResearchStateValue = typeof ResearchState.State;
/** Partial update returned by the researcher graph's nodes. */
export type ResearchUpdate = typeof ResearchState.Update;

/**
 * State of one sub-question's pipeline (investigate → condense), the graph behind the planner's
 * `research(question)`. Its input is a code agent's (`{ task, context, agent }`), so it is called
 * like one (agentAsTool). Last value unless said otherwise.
 */
export const QuestionState = Annotation.Root({
  /** The sub-question (input). */
  task: last<string>(() => ""),
  /** Tool context (input; unused). */
  context: last<Record<string, unknown>>(() => ({})),
  /** The pipeline's name stamped for trees ("research_question"; input and investigate). */
  agent: last<string>(() => ""),
  /** The researcher agent's answer (investigate). */
  findings: last<string>(() => ""),
  /** Passages the researcher's page readers retrieved, by id (investigate). */
  read: last<CitedPassage[]>(() => []),
  /** Why the researcher produced nothing usable, if so (investigate). */
  failure: last<string | null>(() => null),
  /** What the planner's `research()` call returns: the notes as text, or why there are none (condense). */
  answer: last<string | null>(() => null),
  /** "running", then "final_answer" (condense). */
  status: last<string>(() => "running"),
  /** Usage per agent: the researcher's team and the condensation; reducer sums. */
  usage: usageChannel(),
  /** The question's record, its notes and their passages, for the planner (condense); reducer appends. */
  sources: sourcesChannel(),
  /** What the last node did, for the live tree. */
  stage: last<string>(() => ""),
  /** The model usage of the last node's own calls (condense), for the live tree's totals. */
  nodeUsage: last<UsageByAgent>(() => ({})),
});

/** State of a sub-question pipeline as nodes read it. */
export type QuestionStateValue = typeof QuestionState.State;
/** Partial update of a sub-question pipeline node. */
export type QuestionUpdate = typeof QuestionState.Update;
