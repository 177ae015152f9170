/**
 * Types shared by the evaluation harness: examples loaded from datasets, per-question results
 * and the aggregated report.
 */

/** Dataset formats `codehop eval --format` understands. */
export const DATASET_FORMATS = ["hotpotqa", "2wiki", "musique", "jsonl", "gaia"] as const;
export type DatasetFormat = (typeof DATASET_FORMATS)[number];

/**
 * Systems compared by the harness, all with the same model: `agentic` (the QA app), `rag`,
 * `direct`, and `assistant` (the general assistant, for GAIA-style tasks with files).
 */
export const SYSTEM_NAMES = ["agentic", "rag", "direct", "assistant"] as const;
export type SystemName = (typeof SYSTEM_NAMES)[number];

/** Where a record sits in the dataset file, for error messages. */
export interface RecordPosition {
  /** 0-based index of the record (array element or JSONL line with content). */
  index: number;
  /** 1-based line number where the record starts. */
  line: number;
}

/** A context paragraph shipped with a question (distractor settings). */
export interface ContextParagraph {
  title: string;
  text: string;
}

/** One question, normalized across formats. */
export interface EvalExample {
  /** Dataset id (`_id`, `id`), or `q<index>` when the record has none. */
  id: string;
  question: string;
  /** The gold answer first, then its aliases; scoring takes the best match. */
  answers: string[];
  /** Paragraphs the dataset ships with the question, if any. */
  paragraphs: ContextParagraph[];
  /** Titles of the supporting paragraphs, if the dataset marks them. */
  supportingTitles: string[];
  /** Question type / level etc. when present (e.g. "bridge", "comparison", "2hop"; GAIA: "1"-"3"). */
  kind?: string;
  /** Files the question comes with (GAIA's attachments), absolute paths. */
  files?: string[];
  /** How answers are scored: GAIA's question_scorer for `em` (default: SQuAD-style EM). */
  scoring?: "gaia";
  position: RecordPosition;
}

/** A record that could not be used, with the reason. */
export interface BadRecord {
  position: RecordPosition;
  reason: string;
}

/** Result of loading a dataset file. */
export interface LoadedDataset {
  format: DatasetFormat;
  path: string;
  examples: EvalExample[];
  /** Records that were skipped, with their position and why. */
  bad: BadRecord[];
}

/** Token usage of one agent within one question. */
export interface AgentUsage {
  calls: number;
  inputTokens: number;
  outputTokens: number;
  /** Input tokens served from the endpoint's prefix cache, when it reports them. */
  cachedTokens: number;
}

/** One chat message of a transcript. */
export interface TranscriptMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** The conversation of one agent invocation (its last model call plus the reply). */
export interface AgentTranscript {
  agent: string;
  messages: TranscriptMessage[];
}

/** Verdict of the optional LLM judge. */
export interface JudgeVerdict {
  correct: boolean;
  /** The judge's raw reply (trimmed), for auditing. */
  raw: string;
  inputTokens: number;
  outputTokens: number;
}

/** Result of running one system on one question. */
export interface QuestionResult {
  system: SystemName;
  questionId: string;
  /** Dataset position (for ordering and drill-down). */
  index: number;
  question: string;
  answers: string[];
  /** The question's type or level (GAIA: "1", "2", "3"), when the dataset gives one. */
  kind?: string;
  /** The system's answer ("" when it failed). */
  prediction: string;
  em: number;
  f1: number;
  coverEm: number;
  /**
   * Share of the dataset's supporting pages among the pages the system used (`sources`), when
   * the dataset marks supporting facts and the system retrieves (rag, agentic).
   */
  supportRecall?: number;
  judge?: JudgeVerdict;
  /** Model calls across all agents. */
  modelCalls: number;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  /** Usage per agent (e.g. { manager, wikipedia_search, page_search } or { direct }). */
  usage: Record<string, AgentUsage>;
  /** Plan/act/observe steps (agentic) or model calls (baselines). */
  steps: number;
  /** Why the system stopped, when it says (agentic: "final_answer", "max_steps", "repeated_action"). */
  status?: string;
  wallMs: number;
  /** Error message when the system failed on this question (counted as wrong). */
  error?: string;
  /** Thread id of the run (checkpoints for agentic), derived from run id + system + question id. */
  threadId: string;
  /** Page titles / sources the system used. */
  sources: string[];
  transcripts: AgentTranscript[];
  finishedAt: string;
}

/** Aggregated figures for one system. */
export interface SystemSummary {
  system: SystemName;
  questions: number;
  em: number;
  f1: number;
  coverEm: number;
  /** Judge accuracy, when a judge ran. */
  judgeAccuracy?: number;
  /** Mean supporting-page recall over the questions that have one. */
  supportRecall?: number;
  errors: number;
  avgModelCalls: number;
  avgInputTokens: number;
  avgOutputTokens: number;
  avgTotalTokens: number;
  avgSteps: number;
  avgWallMs: number;
  p50WallMs: number;
  p95WallMs: number;
  /** Average tokens per agent. */
  perAgent: Record<string, { avgCalls: number; avgInputTokens: number; avgOutputTokens: number }>;
}
