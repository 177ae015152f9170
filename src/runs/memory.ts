import { randomBytes } from "node:crypto";
import { HumanMessage } from "@langchain/core/messages";
import type { BaseStore } from "@langchain/langgraph";
import type { CodehopEnv } from "../config/env.ts";
import {
  createMemoryTools,
  DEFAULT_MEMORY_USER,
  lessonsNamespace,
  type MemorySettings,
  memoryUserOf,
} from "../core/memory.ts";
import { callModel, messageText, resolveModel } from "../core/models.ts";
import type { RunContext } from "../core/run-context.ts";
import type { StepRecord } from "../core/state.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { renderPrompt } from "../prompts/render.ts";
import type { AskResult } from "./result.ts";

/**
 * Long-term memory in the run lifecycle: the memory settings of a configuration, the memory tools
 * given to an app's root agent, and the reflection step — a lesson written after a failed run
 * (one that ended without a final answer: its step limit, a repeated action) or a low-scored one
 * (a score below `minScore` from the eval harness or the verifier: {@link lowScoreOutcome}) and the lessons of
 * earlier attempts at similar tasks recalled before a run and shown to its root agent.
 */

/** A scored run below this score leaves a lesson (CODEHOP_REFLECTION_MIN_SCORE overrides it). */
export const DEFAULT_REFLECTION_MIN_SCORE = 0.5;

/** The memory settings the environment asks for (undefined: memory off). */
export function memorySettingsOf(env: CodehopEnv): MemorySettings | undefined {
  if (!env.memory && !env.reflection && !env.memoryUser) return undefined;
  const min = env.reflectionMinScore;
  if (min !== undefined && !(min >= 0 && min <= 1))
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `CODEHOP_REFLECTION_MIN_SCORE must be a score from 0 to 1 (got ${min}).`,
    );
  return {
    tools: env.memory ?? false,
    recall: env.memory ?? false,
    reflection: env.reflection ?? false,
    minScore: env.reflectionMinScore ?? DEFAULT_REFLECTION_MIN_SCORE,
    user: env.memoryUser ?? DEFAULT_MEMORY_USER,
  };
}

/**
 * Marks settings as the operator's (a symbol a client's JSON cannot carry): a served graph's guard
 * (src/core/client-settings.ts) lets a worker's own `memory` key through, while a client that
 * sends `memory` (its `user` above all) is refused.
 */
function operatorValue<T extends object>(value: T): T {
  return Object.assign({ ...value }, { [Symbol.for("codehop.operator-value")]: true });
}

/** The run context entries of memory: its settings, and the memory tools of the root agent. */
export function memoryContext(
  settings: MemorySettings | undefined,
  root: string,
  agentTools: RunContext["agentTools"],
): Partial<RunContext> {
  if (!settings) return {};
  const memory = operatorValue(settings);
  if (!settings.tools) return { memory };
  return {
    memory,
    agentTools: {
      ...agentTools,
      [root]: [...(agentTools?.[root] ?? []), ...createMemoryTools(root)],
    },
  };
}

/** Lessons recalled at most, and the least score one must have to be shown. */
const LESSONS = 3;
const MIN_LESSON_SCORE = 0.3;

/** Lessons of earlier attempts at tasks like `task`, best first. */
export async function recallLessons(
  store: BaseStore,
  settings: MemorySettings,
  app: string,
  task: string,
): Promise<string[]> {
  const user = memoryUserOf({ context: { memory: settings } });
  const found = await store.search(lessonsNamespace(user, app), { query: task, limit: LESSONS });
  return found
    .filter((i) => (i.score ?? 1) >= MIN_LESSON_SCORE)
    .map((i) => String(i.value.lesson ?? ""))
    .filter(Boolean);
}

/** Whether a run's result calls for a lesson: it ended without a final answer of its agents. */
export function failedOutcome(
  result: AskResult,
  state: Record<string, unknown>,
): string | undefined {
  if (result.approval) return undefined;
  const status = state.status;
  if (status === "max_steps") return "failed: the step limit was reached without a final answer";
  if (status === "repeated_action") return "failed: the agent kept repeating the same action";
  if (!String(result.answer ?? "").trim()) return "failed: no answer";
  return undefined;
}

/**
 * Whether a score calls for a lesson: below the settings' `minScore` (default
 * {@link DEFAULT_REFLECTION_MIN_SCORE}). `scoredBy` says who scored (e.g. "the eval's GAIA score").
 */
export function lowScoreOutcome(
  settings: MemorySettings,
  score: number,
  scoredBy: string,
  answer: string,
): string | undefined {
  const min = settings.minScore ?? DEFAULT_REFLECTION_MIN_SCORE;
  if (!Number.isFinite(score) || score >= min) return undefined;
  return `scored low: the final answer "${cut(answer, 200)}" got ${score.toFixed(2)} from ${scoredBy} (below ${min}), so it was wrong or unsupported`;
}

function cut(text: string, max: number): string {
  const t = text.replace(/\s+/g, " ").trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

/** The root agent's steps, short, for the reflection prompt. */
export function trajectoryText(steps: readonly StepRecord[] | undefined): string {
  const lines: string[] = [];
  for (const s of steps ?? []) {
    if (s.kind !== "action") continue;
    const seen = s.error ? `error: ${s.error.message}` : (s.observation ?? "");
    lines.push(
      `Step ${s.step}: ${cut(s.code ?? s.modelOutput ?? "", 300)}\n  -> ${cut(seen, 300)}`,
    );
  }
  return lines.slice(-8).join("\n") || "(no actions)";
}

/**
 * Writes a lesson for a failed run: the root agent's model reads the task, the outcome and the
 * trajectory and writes one sentence, stored under the user's lessons of the app. A failure of
 * this step is a warning, never the run's failure.
 */
export async function writeLesson(options: {
  store: BaseStore;
  settings: MemorySettings;
  app: string;
  agent: string;
  context: RunContext;
  threadId: string;
  task: string;
  outcome: string;
  steps?: readonly StepRecord[];
}): Promise<string> {
  const prompt = renderPrompt("reflection/lesson.md", {
    task: cut(options.task, 2000),
    outcome: options.outcome,
    trajectory: trajectoryText(options.steps),
  });
  const model = await resolveModel(options.agent, { context: options.context } as never);
  const reply = await callModel(model, [new HumanMessage(prompt)], { agentName: options.agent });
  const lesson = cut(
    messageText(reply)
      .replace(/^lesson:\s*/i, "")
      .split("\n")[0] ?? "",
    400,
  );
  if (!lesson) throw new Error("the model wrote an empty lesson");
  const user = memoryUserOf({ context: { memory: options.settings } });
  await options.store.put(lessonsNamespace(user, options.app), randomBytes(6).toString("hex"), {
    task: cut(options.task, 2000),
    lesson,
    outcome: options.outcome,
    thread_id: options.threadId,
  });
  return lesson;
}
