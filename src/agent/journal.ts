/**
 * Call journal contract: records every tool / sub-agent call made inside a code action so that a
 * re-executed action (after a crash + resume, or a replay) is served the recorded results instead
 * of repeating finished work. The act node consults it; the SQLite implementation lives in
 * src/persistence/.
 */
import type { ToolReport } from "../tools/define-tool.ts";

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

/**
 * A finished call's outcome. `reports` (optional, added by the agent core) holds what the tool
 * reported through `ctx.report` (a sub-agent's usage and sources), re-applied when the outcome is
 * served from the journal so a resumed parent still accounts for work done before the crash.
 */
export type CallOutcome =
  | { ok: true; value: unknown; reports?: ToolReport[] }
  | { ok: false; error: string; reports?: ToolReport[] };

/** Storage for call outcomes. */
export interface CallJournal {
  get(key: CallKey): Promise<CallOutcome | undefined> | CallOutcome | undefined;
  put(key: CallKey, outcome: CallOutcome): Promise<void> | void;
}
