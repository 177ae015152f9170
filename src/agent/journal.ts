/**
 * Call journal contract: records every tool / sub-agent call made inside a code action so that a
 * re-executed action (after a crash + resume, or a replay) is served the recorded results instead
 * of repeating finished work. The act node consults it; the SQLite implementation lives in
 * src/persistence/.
 */
import type { ToolReport } from "../tools/define-tool.ts";

/**
 * Identifies one call: which thread, which (nested) agent, which task of the thread, which action,
 * which call within it.
 */
export interface CallKey {
  threadId: string;
  /**
   * LangGraph checkpoint namespace of the node running the code (its task's namespace, e.g.
   * "act:<task id>" in a root agent, "act:<id>|1|act:<id>" in the sub-agent of a second call).
   */
  checkpointNs: string;
  /**
   * Which task the call belongs to: the `taskEpoch` state channel (src/agent/state.ts: 0 for a
   * thread's first task, +1 for each new task on a finished thread) of every agent from the root
   * down to the caller, e.g. `[1, 0]` for a sub-agent's call during the root's second task. A new
   * task restarts step numbers at 1, so without this its calls would sit at the previous task's
   * positions. Absent means the first task everywhere (keys built before epochs existed). Compare
   * epochs with {@link taskEpochTag}: trailing zeros don't count (`[1]` = `[1, 0]`, `[]` = `[0, 0]`).
   */
  taskEpochs?: readonly number[];
  /** Agent-local step number of the code action. */
  step: number;
  /** 0-based index of the call within the action (order the guest made the calls). */
  callIndex: number;
  /** Tool name; a recorded entry is only served if the tool name and arguments match. */
  tool: string;
  /** Stable JSON of the validated arguments. */
  argsJson: string;
}

/**
 * A finished call's outcome. `reports` (optional, added by the agent core) holds what the tool
 * reported through `ctx.report` (a sub-agent's usage and sources), re-applied when the outcome is
 * served from the journal so a resumed parent still accounts for work done before the crash.
 */
export type CallOutcome =
  | { ok: true; value: unknown; reports?: ToolReport[] }
  | { ok: false; error: string; reports?: ToolReport[] };

/**
 * Canonical text form of {@link CallKey.taskEpochs}: the epochs joined with "." without trailing
 * zeros, so "" is the first task of every agent on the path (and of keys recorded before epochs
 * existed), "1" the root's second task with its sub-agents' first tasks, "0.1" a sub-agent's second
 * task during the root's first.
 */
export function taskEpochTag(epochs: readonly number[] | undefined): string {
  const list = [...(epochs ?? [])];
  while (list.length && list.at(-1) === 0) list.pop();
  return list.join(".");
}

/** Storage for call outcomes. */
export interface CallJournal {
  get(key: CallKey): Promise<CallOutcome | undefined> | CallOutcome | undefined;
  put(key: CallKey, outcome: CallOutcome): Promise<void> | void;
}
