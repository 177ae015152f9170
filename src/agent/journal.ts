/**
 * Call journal contract: records every tool / sub-agent call made inside a code action so that a
 * re-executed action (after a crash + resume, or a replay) is served the recorded results instead
 * of repeating finished work. The act node consults it; the SQLite implementation lives in
 * src/persistence/.
 */

/** Identifies one call: which thread, which (nested) agent, which action, which call within it. */
export interface CallKey {
  threadId: string;
  /** LangGraph checkpoint namespace of the agent graph making the call ("" for the root). */
  checkpointNs: string;
  /** Agent-local step number of the code action. */
  step: number;
  /** 0-based index of the call within the action (order the guest made the calls). */
  callIndex: number;
  /** Tool name; a recorded entry is only served if the tool name and arguments match. */
  tool: string;
  /** Stable JSON of the validated arguments. */
  argsJson: string;
}

/** A finished call's outcome. */
export type CallOutcome = { ok: true; value: unknown } | { ok: false; error: string };

/** Storage for call outcomes. */
export interface CallJournal {
  get(key: CallKey): Promise<CallOutcome | undefined> | CallOutcome | undefined;
  put(key: CallKey, outcome: CallOutcome): Promise<void> | void;
}
