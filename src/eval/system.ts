import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { EvalRecorder } from "./recorder.ts";
import type { AgentUsage, EvalExample, SystemName } from "./types.ts";

/** What a system gets to answer one question. */
export interface SystemContext {
  /** Thread id of this question's run (run id + system + question id). */
  threadId: string;
  /** Pass to every model call / graph invoke (`callbacks: [recorder]`): records usage and transcripts. */
  recorder: EvalRecorder;
  /** Aborted on Ctrl-C: stop and throw. */
  signal: AbortSignal;
}

/** A system's answer to one question. */
export interface SystemAnswer {
  answer: string;
  /** Titles of the pages / passages used. */
  sources: string[];
  /** Plan/act/observe steps (agentic) or model calls (baselines). */
  steps: number;
  /**
   * Usage per agent as accounted by the system itself (agentic: the app's roll-up, which covers a
   * thread resumed across runs). When absent, the recorder's figures are used.
   */
  usage?: Record<string, AgentUsage>;
  /** Why the system stopped (agentic: "final_answer", "max_steps", ...). */
  status?: string;
}

/** A system under evaluation. */
export interface EvalSystem {
  readonly name: SystemName;
  /**
   * The agents whose model calls the recorder attributes by their enclosing graph run (the
   * agentic system: its app's team registry). Absent: calls carry their agent in metadata.
   */
  readonly agents?: readonly string[];
  /** Prompts and settings, recorded in the report. */
  readonly config: Record<string, unknown>;
  answer(example: EvalExample, ctx: SystemContext): Promise<SystemAnswer>;
  /**
   * The harness's score of an answered question (GAIA: its correctness; QA: token F1; 0..1), for
   * a system that learns from it (agentic: the reflection step's lesson after a low score).
   * Its failure is logged, never the question's.
   */
  scored?(example: EvalExample, ctx: SystemContext, score: number): Promise<void>;
  close?(): Promise<void>;
}

/** The model a baseline uses; a ChatOpenAI in practice. */
export type EvalChatModel = BaseChatModel;

/**
 * Pulls the short answer out of a model reply: the text after the last "Answer:" if present,
 * else the first non-empty line, without Markdown emphasis or wrapping quotes.
 */
export function extractAnswer(reply: string): string {
  let text = reply.replace(/<think>[\s\S]*?<\/think>/gi, "").trim();
  const m = /(?:^|\n)\s*(?:final\s+)?answer\s*:\s*([^\n]*)/gi;
  let last: string | undefined;
  for (const hit of text.matchAll(m)) if (hit[1].trim()) last = hit[1];
  if (last !== undefined) text = last;
  const line = text.split(/\r?\n/).find((l) => l.trim()) ?? "";
  return line
    .trim()
    .replace(/^\*\*(.*)\*\*$/, "$1")
    .replace(/^["'“”‘’](.*)["'“”‘’]$/, "$1")
    .trim();
}
