import { CodehopError, ErrorCodes } from "../errors.ts";
import type { CodehopEnv } from "../config/env.ts";
import { endpointErrorText } from "../core/models.ts";
import { runPool } from "../util/concurrency.ts";
import { gaiaScore } from "./gaia.ts";
import { AnswerJudge } from "./judge.ts";
import { scoreAnswer } from "./metrics.ts";
import { createChatModel } from "./model.ts";
import { EvalRecorder } from "./recorder.ts";
import type { EvalExecutor } from "./run-options.ts";
import type { EvalSystem } from "./system.ts";
import type { AgentUsage, EvalExample, QuestionResult, SystemName } from "./types.ts";

/**
 * Answering one question with one system: its time limit, its scores (EM / F1, GAIA's rule,
 * supporting pages), the system's reflection on its score, the LLM judge, and the result row;
 * and the executor that answers a run's questions in this process.
 */

/** Answers the tasks in this process, at most `concurrency` at once. */
export const localExecutor: EvalExecutor = {
  async run(tasks, execution) {
    await runPool(
      tasks,
      execution.concurrency,
      async ({ example, system }) => {
        const result = await answerOne(example, system, {
          runId: execution.runId,
          signal: execution.signal,
          judge: execution.judge,
          timeoutMs: execution.questionTimeoutMs,
          log: execution.log,
        });
        // Interrupted: nothing stored, the rerun will redo it.
        if (result) execution.record(result);
      },
      execution.signal,
    );
  },
};

/** The LLM judge of `env` (CODEHOP_JUDGE_MODEL ...). */
export function createJudge(env: CodehopEnv): AnswerJudge {
  if (!env.judgeModel) {
    throw new CodehopError(
      ErrorCodes.MODEL_NOT_CONFIGURED,
      "--judge needs CODEHOP_JUDGE_MODEL (and CODEHOP_JUDGE_BASE_URL / CODEHOP_JUDGE_API_KEY if it is not the main endpoint)",
    );
  }
  const model = createChatModel(
    {
      model: env.judgeModel,
      baseURL: env.judgeBaseUrl,
      temperature: 0,
      maxRetries: env.maxRetries ?? 2,
      timeoutMs: env.modelTimeoutMs,
    },
    env.judgeApiKey,
  );
  return new AnswerJudge(model);
}

/** What {@link answerOne} needs besides the question and the system. */
export interface AnswerContext {
  runId: string;
  /** The run's signal (Ctrl-C). */
  signal: AbortSignal;
  judge?: AnswerJudge;
  /** Per-question time limit for the system (0/undefined = none). */
  timeoutMs?: number;
  log: (line: string) => void;
}

/** Runs one system on one question; `undefined` when the run was interrupted mid-question. */
export async function answerOne(
  example: EvalExample,
  system: EvalSystem,
  ctx: AnswerContext,
): Promise<QuestionResult | undefined> {
  // A per-question signal: model clients add abort listeners to whatever signal they get, so
  // handing them the run-wide one would pile up a listener per call. It also carries the
  // per-question time limit.
  const question = new AbortController();
  const forward = () => question.abort(ctx.signal.reason);
  ctx.signal.addEventListener("abort", forward, { once: true });
  const timer = ctx.timeoutMs
    ? setTimeout(() => question.abort(new Error("question timeout")), ctx.timeoutMs)
    : undefined;
  try {
    return await answerOneWith(example, system, ctx, question.signal, () => clearTimeout(timer));
  } finally {
    clearTimeout(timer);
    ctx.signal.removeEventListener("abort", forward);
  }
}

/** The score a system learns from: GAIA's correctness (reported as EM), else token F1. */
function scoreFor(example: EvalExample): "em" | "f1" {
  return example.scoring === "gaia" ? "em" : "f1";
}

async function answerOneWith(
  example: EvalExample,
  system: EvalSystem,
  ctx: AnswerContext,
  signal: AbortSignal,
  stopTimer: () => void,
): Promise<QuestionResult | undefined> {
  const threadId = `${ctx.runId}:${system.name}:${example.id}`;
  const recorder = new EvalRecorder(system.name, system.agents);
  const started = performance.now();
  let prediction = "";
  let sources: string[] = [];
  let steps = 0;
  let status: string | undefined;
  let reportedUsage: Record<string, AgentUsage> | undefined;
  let error: string | undefined;
  try {
    const res = await system.answer(example, { threadId, recorder, signal });
    prediction = res.answer;
    sources = res.sources;
    steps = res.steps;
    status = res.status;
    reportedUsage = res.usage;
  } catch (err) {
    // Ctrl-C: nothing is stored, the rerun redoes (or, agentic, resumes) the question.
    if (ctx.signal.aborted) return undefined;
    // Over the time limit: stored as an error (scored wrong); a rerun tries again.
    error = signal.aborted
      ? `timed out after ${(ctx.timeoutMs ?? 0) / 1000} s`
      : describeError(err);
  }
  stopTimer();
  const wallMs = performance.now() - started;
  if (ctx.signal.aborted && error) return undefined;
  const scores = scoreAnswer(prediction, example.answers);
  // GAIA: its own rule decides correctness (numbers, lists, strings), reported as EM.
  if (example.scoring === "gaia")
    scores.em = example.answers.some((gold) => gaiaScore(prediction, gold)) ? 1 : 0;
  if (system.scored && !error) {
    try {
      await system.scored(example, { threadId, recorder, signal }, scores[scoreFor(example)]);
    } catch (err) {
      if (ctx.signal.aborted) return undefined;
      ctx.log(`reflection failed on ${system.name} ${example.id}: ${describeError(err)}`);
    }
  }
  const supportRecall = supportingRecall(example, system.name, sources, !!error);
  let verdict;
  if (ctx.judge && !error) {
    try {
      verdict = await ctx.judge.judge(example.question, example.answers, prediction, ctx.signal);
    } catch (err) {
      if (ctx.signal.aborted) return undefined;
      // The answer stands; the next run with a judge grades it (see toGrade in runEval).
      ctx.log(`judge failed on ${system.name} ${example.id}: ${describeError(err)}`);
    }
  }
  const usage = reportedUsage ?? recorder.usage;
  const sum = (k: "calls" | "inputTokens" | "outputTokens" | "cachedTokens") =>
    Object.values(usage).reduce((a, u) => a + u[k], 0);
  return {
    system: system.name,
    questionId: example.id,
    index: example.position.index,
    question: example.question,
    answers: example.answers,
    ...(example.kind ? { kind: example.kind } : {}),
    prediction,
    ...scores,
    supportRecall,
    judge: verdict,
    modelCalls: sum("calls"),
    inputTokens: sum("inputTokens"),
    outputTokens: sum("outputTokens"),
    cachedTokens: sum("cachedTokens"),
    usage,
    steps,
    status,
    wallMs: Math.round(wallMs),
    error,
    threadId,
    sources,
    transcripts: recorder.transcripts(),
    finishedAt: new Date().toISOString(),
  };
}

/** Share of the supporting pages among the pages used (titles compared case-insensitively). */
function supportingRecall(
  example: EvalExample,
  system: SystemName,
  sources: string[],
  failed: boolean,
): number | undefined {
  if (system === "direct" || example.supportingTitles.length === 0) return undefined;
  if (failed) return 0;
  const used = new Set(sources.map((t) => t.trim().toLowerCase()));
  const found = example.supportingTitles.filter((t) => used.has(t.trim().toLowerCase())).length;
  return found / example.supportingTitles.length;
}

/** An error as the sentence a result or a log line carries. */
export function describeError(err: unknown): string {
  if (CodehopError.isInstance(err)) return `${err.message} [${err.code}]`;
  // A model endpoint's failure as a sentence (status and the server's message, no raw body).
  return endpointErrorText(err);
}
