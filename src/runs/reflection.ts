import type { StateSnapshot } from "@langchain/langgraph";
import { readEnv } from "../config/env.ts";
import type { RunContext } from "../core/run-context.ts";
import type { StepRecord } from "../core/state.ts";
import type { RunApp, RunOptions } from "./app.ts";
import {
  failedOutcome,
  lowScoreOutcome,
  memorySettingsOf,
  recallLessons,
  writeLesson,
} from "./memory.ts";
import type { AskResult } from "./result.ts";
import { shapeResult } from "./shape-result.ts";
import { openSession, runContextFor, type Session } from "./session.ts";

/**
 * Reflection (CODEHOP_REFLECTION=1, docs/memory.md): a run that failed, or scored low, leaves a
 * lesson in the memory store, recalled for the next similar task.
 */

/**
 * The reflection step (CODEHOP_REFLECTION=1): a run that ended without a final answer leaves a
 * lesson for later attempts at similar tasks. Its failure is a warning, never the run's.
 */
export async function reflect(
  session: Session,
  options: RunOptions,
  threadId: string,
  result: AskResult,
  snapshot: StateSnapshot,
  context: RunContext,
): Promise<void> {
  const settings = session.memorySettings;
  if (!settings?.reflection) return;
  const values = (snapshot.values ?? {}) as Record<string, unknown>;
  const outcome = failedOutcome(result, values);
  if (!outcome) return;
  try {
    const task = (await session.persistence.threads.get(threadId))?.question ?? "";
    const lesson = await writeLesson({
      store: session.memory,
      settings,
      app: session.app.name,
      agent: session.app.team.root,
      context,
      threadId,
      task,
      outcome,
      steps: values.steps as StepRecord[] | undefined,
    });
    options.onWarning?.(`reflection: lesson kept for similar tasks: ${lesson}`);
  } catch (err) {
    options.onWarning?.(`reflection: no lesson written (${(err as Error).message})`);
  }
}

/**
 * The reflection step for a run scored after it finished (CODEHOP_REFLECTION=1): the eval
 * harness's score of its answer, or the verifier's share of supported claims. Below the settings'
 * `minScore` (CODEHOP_REFLECTION_MIN_SCORE, default 0.5) the root agent's model writes a lesson
 * from the task, the score and the trajectory, recalled for similar tasks like a failed run's. A
 * run that failed already left its lesson; reflection off, a paused or unknown thread: nothing.
 * Returns the lesson written; its failure is a warning (`onWarning`), never the caller's.
 */
export async function reflectOnScore(
  app: RunApp,
  threadId: string,
  score: { value: number; by: string },
  options: RunOptions = {},
): Promise<string | undefined> {
  // Reflection off (the usual case): no session is opened.
  if (!memorySettingsOf(readEnv())?.reflection) return undefined;
  const session = await openSession(app, options);
  try {
    const settings = session.memorySettings;
    if (!settings?.reflection) return undefined;
    const record = await session.persistence.threads.get(threadId);
    if (!record) return undefined;
    const snapshot = await session.graph.getState({ configurable: { thread_id: threadId } });
    const values = (snapshot.values ?? {}) as Record<string, unknown>;
    const result = shapeResult(app, session.persistence, threadId, snapshot, 0);
    if (result.approval || failedOutcome(result, values)) return undefined;
    const outcome = lowScoreOutcome(settings, score.value, score.by, result.answer);
    if (!outcome) return undefined;
    try {
      const lesson = await writeLesson({
        store: session.memory,
        settings,
        app: app.name,
        agent: app.team.root,
        context: runContextFor(session, options, false),
        threadId,
        task: record.question ?? "",
        outcome,
        steps: values.steps as StepRecord[] | undefined,
      });
      options.onWarning?.(`reflection: lesson kept for similar tasks: ${lesson}`);
      return lesson;
    } catch (err) {
      options.onWarning?.(`reflection: no lesson written (${(err as Error).message})`);
      return undefined;
    }
  } finally {
    await session.close();
  }
}

/** Lessons of earlier attempts at tasks like `text`, for the run about to start. */
export async function prepareLessons(
  session: Session,
  options: RunOptions,
  text: string,
): Promise<void> {
  const settings = session.memorySettings;
  if (!settings?.reflection) return;
  try {
    session.lessons = await recallLessons(session.memory, settings, session.app.name, text);
  } catch (err) {
    options.onWarning?.(`reflection: lessons not recalled (${(err as Error).message})`);
  }
}
