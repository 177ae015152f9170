import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import type { KnowledgeSource } from "../../store/types.ts";
import type { AppGraph, RunApp, RunOptions } from "../../runs/app.ts";
import type { RunnableConfig } from "@langchain/core/runnables";
import { resolveModel } from "../../core/models.ts";
import {
  detectModel,
  loadAppConfig,
  modelSettingsOf,
  persistenceLocation,
  type AppConfig,
} from "../../runs/config.ts";
import { threadHistory, traceThread, type CheckpointSummary } from "../../runs/inspect.ts";
import {
  readRunResult,
  reflectOnScore,
  replayRun,
  resumeRun,
  startRun,
  type ReplayOptions,
  type ResumeOptions,
  type StartOptions,
} from "../../runs/lifecycle.ts";
import type { RunProgress } from "../../runs/progress.ts";
import type { AskResult } from "../../runs/result.ts";
import type { Persistence } from "../../persistence/port.ts";
import type { Citation } from "../common/citations.ts";
import { putThreadRecord } from "../../core/journal.ts";
import { openPersistenceFor } from "../../persistence/open.ts";
import { openKnowledgeServices } from "../common/knowledge-source.ts";
import {
  type AnswerVerification,
  failedVerification,
  passagesReadIn,
  verifyAnswer,
  hasNoSupport,
  NO_SUPPORT_ANSWER,
} from "./verify.ts";
import { qaRecording } from "./recording.ts";
import {
  VERIFICATION_RECORD,
  verificationOf,
  type RecordedVerification,
} from "./verification-record.ts";
import { createManagerGraph, MANAGER_RECURSION_LIMIT, qaTeam } from "./team.ts";

/**
 * The QA app for the run lifecycle: a question in, the manager → wikipedia_search → page_search
 * team, over online Wikipedia or a local corpus (the thread remembers which).
 */
export const qaApp: RunApp = {
  ...qaRecording,
  team: qaTeam,
  graph: (checkpointer: BaseCheckpointSaver) => createManagerGraph({ checkpointer }) as AppGraph,
  recursionLimit: MANAGER_RECURSION_LIMIT,
  input: (question) => ({ question }),
  inputText: (input) => String(input.question ?? ""),
  openServices: openKnowledgeServices,
};

/** Options of {@link ask}. */
export interface AskOptions extends StartOptions {
  /**
   * Verify the final answer: the verifier (the research app's, src/apps/common/verifier.ts)
   * checks each sentence of the answer against passages of the pages the agents used, and the
   * result gains `citations` and `verification`. Its model is CODEHOP_MODEL_VERIFIER, else the
   * run's model.
   */
  verify?: boolean;
}

/** A result of {@link ask} with `verify`: the answer's evidence and what the verifier said. */
export interface VerifiedAskResult extends AskResult {
  /** The passages the answer was checked against, numbered. */
  citations: Citation[];
  /** Claim by claim: supported or not, by which citations; figures and the verifier's usage. */
  verification: AnswerVerification;
  /**
   * When no passage supports any claim of the model's answer: that answer, kept here, labelled;
   * `answer` then says that nothing supports one ({@link NO_SUPPORT_ANSWER}).
   */
  unsupported_answer?: string;
}

/**
 * A result with its verification; the model's answer is withheld (moved to `unsupported_answer`)
 * when no passage supports any of its claims, so it is never printed as a finding.
 */
function verified(
  result: AskResult,
  outcome: Pick<VerifiedAskResult, "citations" | "verification">,
): VerifiedAskResult {
  if (!hasNoSupport(outcome.verification)) return { ...result, ...outcome };
  return { ...result, ...outcome, answer: NO_SUPPORT_ANSWER, unsupported_answer: result.answer };
}

/**
 * Answers a question with the three-agent system (manager → wikipedia_search → page_search),
 * checkpointing every step to `<CODEHOP_HOME>/checkpoints.db`. The thread (question, knowledge
 * source, model names) is recorded before anything slow happens, so a run killed at any point can
 * be continued with {@link resume}. With `verify`, the answer is then checked against its sources
 * ({@link VerifiedAskResult}); every other field is the same as without.
 */
export async function ask(
  question: string,
  options: AskOptions & { verify: true },
): Promise<VerifiedAskResult>;
export async function ask(question: string, options?: AskOptions): Promise<AskResult>;
export async function ask(question: string, options: AskOptions = {}): Promise<AskResult> {
  const { verify, ...start } = options;
  const result = await startRun(qaApp, question, start);
  // A run paused for an approval has no answer yet: nothing to verify.
  if (!verify || result.approval) return result;
  return reflectedAndVerified(result, await verifyResult(result, start), start);
}

/**
 * The verification's share of supported claims is a score of the run: below
 * CODEHOP_REFLECTION_MIN_SCORE it leaves a lesson (CODEHOP_REFLECTION=1); then {@link verified}.
 */
async function reflectedAndVerified(
  result: AskResult,
  outcome: Pick<VerifiedAskResult, "citations" | "verification">,
  options: RunOptions,
): Promise<VerifiedAskResult> {
  const v = outcome.verification;
  if (v.status === "verified" && v.checked > 0)
    await reflectOnScore(
      qaApp,
      result.thread_id,
      { value: v.supported / v.checked, by: "the verifier (share of supported claims)" },
      options,
    );
  return verified(result, outcome);
}

export { VERIFICATION_RECORD, verificationOf, type RecordedVerification };

/**
 * Runs the verifier on a finished QA result — outside the agent graph, after it — over the
 * passages the run's agents read (its call journal), with the thread's knowledge source and the
 * verifier's model, and records the outcome with the thread ({@link VERIFICATION_RECORD}: shown by
 * `codehop show`, replaced by the next verification). A verifier that fails (an endpoint that is
 * down, replies with no usable verdict, no model) does not fail the run: the answer is kept and the
 * verification says "failed" and why. Only the caller's abort (Ctrl-C) stops it.
 */
async function verifyResult(
  result: AskResult,
  options: RunOptions,
): Promise<Pick<VerifiedAskResult, "citations" | "verification">> {
  const config = loadAppConfig(options.config);
  const persistence =
    options.persistence ?? (await openPersistenceFor(persistenceLocation(config)));
  try {
    const record = await persistence.threads.get(result.thread_id);
    const stored = record?.options ?? {};
    let outcome: Pick<VerifiedAskResult, "citations" | "verification">;
    let services: Awaited<ReturnType<typeof openKnowledgeServices>> | undefined;
    try {
      const model =
        options.model ??
        (config.models[VERIFIER_MODEL] ||
          config.model ||
          (typeof stored.model === "string" && stored.model) ||
          (await detectModel(config, [VERIFIER_MODEL])));
      const context = {
        ...(model ? { model } : {}),
        ...(Object.keys(config.models).length ? { models: config.models } : {}),
        modelSettings: modelSettingsOf(config),
      };
      // The thread's own knowledge source (its recorded corpus), unless the caller gives one.
      services = await openKnowledgeServices(config, options, stored);
      const read = passagesReadIn(
        await persistence.journal.entries(result.thread_id),
        result.sources.map((source) => source.title),
      );
      outcome = await verifyAnswer(
        {
          question: record?.question ?? "",
          answer: result.answer,
          sources: result.sources,
          read,
        },
        {
          source: services.context.knowledgeSource as KnowledgeSource,
          model: await resolveModel(VERIFIER_MODEL, { context } as RunnableConfig),
          signal: options.signal,
        },
      );
    } catch (err) {
      if (options.signal?.aborted) throw err;
      const why = err instanceof Error ? err.message : String(err);
      outcome = { citations: [], verification: failedVerification(why) };
    } finally {
      await services?.close();
    }
    const recorded: RecordedVerification = {
      answer: result.answer,
      checkpoint_id: result.checkpoint_id,
      verified_at: new Date().toISOString(),
      ...outcome,
    };
    await putThreadRecord(persistence.journalRows, result.thread_id, VERIFICATION_RECORD, recorded);
    return outcome;
  } finally {
    if (!options.persistence) await persistence.close();
  }
}

/**
 * Verifies a QA thread's answer as `ask --verify` does (see {@link verifyResult}): for
 * `resumeThread(..., { verify: true })` and `codehop resume <thread> --verify`, which re-verify a
 * finished thread without running its agents again.
 */
export async function withVerification(
  result: AskResult,
  options: RunOptions = {},
): Promise<AskResult> {
  if (result.approval || !result.answer) return result;
  return reflectedAndVerified(result, await verifyResult(result, options), options);
}

/** Model name of the answer verifier (CODEHOP_MODEL_VERIFIER). */
const VERIFIER_MODEL = "verifier";

/**
 * Continues a QA thread from its last checkpoint — after a crash, a kill -9, an endpoint failure
 * or Ctrl-C, or with the decision on the approval it waits for (`options.approval`). Sub-agent and
 * tool calls that had finished are served from the call journal, not re-run. A thread that already
 * finished returns its stored result without calling the model.
 */
export function resume(threadId: string, options: ResumeOptions = {}): Promise<AskResult> {
  return resumeRun(qaApp, threadId, options);
}

/** Re-runs (forks) a QA thread from one of its checkpoints (see `replayRun`). */
export function replay(
  threadId: string,
  checkpointId: string,
  options: ReplayOptions = {},
): Promise<AskResult> {
  return replayRun(qaApp, threadId, checkpointId, options);
}

/** A QA thread's checkpoints, newest first (see `threadHistory`). */
export function history(
  threadId: string,
  options: Parameters<typeof threadHistory>[2] = {},
): Promise<CheckpointSummary[]> {
  return threadHistory(qaApp, threadId, options);
}

/** A QA thread's whole run as a tree, rebuilt from its checkpoints (see `traceThread`). */
export function trace(
  threadId: string,
  options: Parameters<typeof traceThread>[2] = {},
): Promise<RunProgress> {
  return traceThread(qaApp, threadId, options);
}

/** The result stored in a QA thread's latest checkpoint. */
export function readResult(
  persistence: Persistence,
  threadId: string,
  started?: number,
): Promise<AskResult> {
  return readRunResult(qaApp, persistence, threadId, started);
}

/**
 * The run context of a QA run as `configurable` keys (thread id, journal, knowledge source, model
 * settings and names), for `graph.invoke(input, { configurable: runConfigurable(...) })` on a graph
 * built with `createManagerGraph` (the run context also reads plain `configurable` keys).
 */
export function runConfigurable(
  config: AppConfig,
  extra: {
    threadId: string;
    persistence: Pick<Persistence, "journal">;
    source: KnowledgeSource;
    model?: BaseChatModel | string;
  },
): Record<string, unknown> {
  const configurable: Record<string, unknown> = {
    thread_id: extra.threadId,
    journal: extra.persistence.journal,
    knowledgeSource: extra.source,
    modelSettings: modelSettingsOf(config),
  };
  if (extra.model) configurable.model = extra.model;
  else {
    if (config.model) configurable.model = config.model;
    if (Object.keys(config.models).length) configurable.models = config.models;
  }
  return configurable;
}
