import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import type { KnowledgeSource } from "../../store/types.ts";
import type { AppGraph, RunApp, RunOptions } from "../../runs/app.ts";
import { modelSettingsOf, type AppConfig } from "../../runs/config.ts";
import { threadHistory, traceThread, type CheckpointSummary } from "../../runs/inspect.ts";
import {
  readRunResult,
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
import { openSourceFor } from "../common/knowledge-source.ts";
import { configForStoredSource } from "../common/source-record.ts";
import { qaRecording } from "./recording.ts";
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
  async openServices(config: AppConfig, options: RunOptions, stored?: Record<string, unknown>) {
    if (options.source)
      return { context: { knowledgeSource: options.source }, close: async () => {} };
    const source = await openSourceFor(
      configForStoredSource(config, Boolean(options.config?.corpus), stored),
    );
    return { context: { knowledgeSource: source }, close: () => source.close() };
  },
};

/** Options of {@link ask}. */
export type AskOptions = StartOptions;

/**
 * Answers a question with the three-agent system (manager → wikipedia_search → page_search),
 * checkpointing every step to `<CODEHOP_HOME>/checkpoints.db`. The thread (question, knowledge
 * source, model names) is recorded before anything slow happens, so a run killed at any point can
 * be continued with {@link resume}.
 */
export function ask(question: string, options: AskOptions = {}): Promise<AskResult> {
  return startRun(qaApp, question, options);
}

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
