import type { AgentState, AgentUpdate } from "./state.ts";

/** Marker key of a reset update (see {@link resetTo}). */
export const RESET_KEY = "__codehop_reset__";

/** An update that replaces an accumulating channel's value instead of adding to it. */
export interface ResetUpdate<T> {
  [RESET_KEY]: true;
  value: T;
}

/** A reset update for an accumulating channel (history, steps, usage, sources). */
export function resetTo<T>(value: T): ResetUpdate<T> {
  return { [RESET_KEY]: true, value };
}

/** True for a reset update. */
export function isReset(update: unknown): update is ResetUpdate<unknown> {
  return typeof update === "object" && update !== null && (update as any)[RESET_KEY] === true;
}

/**
 * Wraps a channel reducer so a {@link resetTo} update replaces the value. Used by the channels that
 * accumulate over one task, so a new task on a finished thread starts from a clean slate.
 */
export function resettable<V, U>(reducer: (left: V, right: U) => V) {
  return (left: V, right: U | ResetUpdate<V>): V =>
    isReset(right) ? right.value : reducer(left, right as U);
}

/**
 * A new task on a thread whose previous task finished: the first node of the run (plan or
 * planning) sees a stopped status. Returns the state as a fresh run sees it (empty history,
 * trajectory, counters, usage and sources; the sandbox variables are kept, so a follow-up task can
 * use what the previous one computed; the task epoch is one more, so the call journal keeps this
 * task's calls apart from the previous one's) and a function turning the node's update into one
 * that resets those channels. Returns null for a run that is starting or continuing normally.
 */
export function newTaskOnFinishedThread(
  state: AgentState,
): { view: AgentState; wrap: (update: AgentUpdate) => AgentUpdate } | null {
  if (state.status === "running") return null;
  const taskEpoch = (state.taskEpoch ?? 0) + 1;
  const view: AgentState = {
    ...state,
    history: [],
    steps: [],
    pending: null,
    outcome: null,
    stepCount: 0,
    answer: null,
    status: "running",
    usage: {},
    sources: [],
    repeat: { fingerprint: "", count: 0 },
    replan: false,
    currentPlan: null,
    taskEpoch,
  };
  const list = <T>(v: T | T[] | undefined): T[] =>
    v === undefined ? [] : Array.isArray(v) ? v : [v];
  const wrap = (update: AgentUpdate): AgentUpdate =>
    ({
      stepCount: 0,
      answer: null,
      status: "running",
      repeat: { fingerprint: "", count: 0 },
      replan: false,
      currentPlan: null,
      outcome: null,
      ...update,
      history: resetTo(list(update.history as any)),
      steps: resetTo(list(update.steps as any)),
      usage: resetTo((update.usage as any) ?? {}),
      sources: resetTo((update.sources as any) ?? []),
      taskEpoch,
    }) as AgentUpdate;
  return { view, wrap };
}
