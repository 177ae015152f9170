import { AIMessage, type BaseMessage, HumanMessage, SystemMessage } from "@langchain/core/messages";
import { OBSERVATION_HEADER } from "./observation.ts";
import { stripThinkBlocks } from "./parser.ts";
import type { StepRecord } from "./state.ts";

/**
 * The model's view of its past: entries computed from the trajectory record (the `steps` state
 * channel) at prompt time and filtered by the agent's history policy. Nothing of the view is
 * stored: changing the policy changes what the next prompt shows, never what was recorded.
 */
export interface HistoryEntry {
  /**
   * "plan": a planning step's output; "action": the model's reply (an assistant turn);
   * "observation": what the action produced; "last_action": a note (a user turn) recalling the last
   * action's code, at the end of a condensed view.
   */
  kind: "plan" | "action" | "observation" | "last_action";
  /** Agent-local action number the entry belongs to (plans: the action they precede). */
  step: number;
  content: string;
  /** Observations of failed actions (errors, no code): dropped once a later observation exists. */
  isError?: boolean;
  /** Actions: the code that ran (null when the reply had none). */
  code?: string | null;
}

/**
 * How much of the past goes into the prompt: "condensed", "full", or a custom view — a pure,
 * idempotent function from all entries (chronological) to the entries to keep.
 */
export type HistoryPolicy = "condensed" | "full" | ((entries: HistoryEntry[]) => HistoryEntry[]);

/** Longest reply text recalled in the last-action note of a reply without code. */
const MAX_NOTE_REPLY_CHARS = 600;

/** How every last-action note starts (scripted models tell notes from observations by it). */
export const LAST_ACTION_NOTE = /^Your last (?:code|reply) \(step \d+\)/;

/** The note recalling the last action, right after its observation in a condensed view. */
export function lastActionNote(action: HistoryEntry): HistoryEntry {
  const content =
    action.code !== undefined && action.code !== null
      ? `Your last code (step ${action.step}) gave the observation above:\n\`\`\`js\n${action.code}\n\`\`\``
      : `Your last reply (step ${action.step}) had no code; the observation above says why:\n${action.content.slice(0, MAX_NOTE_REPLY_CHARS)}`;
  return { kind: "last_action", step: action.step, content };
}

/**
 * The condensed view (the default): the latest plan, every observation except resolved errors, in
 * order, and right after the last observation a short note with the last action's code. Append-mostly: from one step to the
 * next the prompt only grows by the new observation and its note replaces the previous note at the
 * very end, so a server with prefix caching (vLLM, OpenAI) recomputes little more than the new
 * tokens — keeping the last action in place before its observation, as earlier versions did, made
 * every prompt diverge where that action had been (about two observations and an action recomputed
 * per step). Resolved errors and a superseded plan are dropped where they were (rare rewrites).
 * The note shows the code without the thought, so the view stays smaller than the
 * last-action-in-place layout. Idempotent.
 */
export function condenseHistory(entries: readonly HistoryEntry[]): HistoryEntry[] {
  let lastPlan = -1;
  let lastObservation = -1;
  let lastAction: HistoryEntry | undefined;
  let lastNote: HistoryEntry | undefined;
  entries.forEach((e, i) => {
    if (e.kind === "plan") lastPlan = i;
    else if (e.kind === "action") lastAction = e;
    else if (e.kind === "observation") lastObservation = i;
    else lastNote = e;
  });
  const kept = entries.filter((e, i) => {
    if (e.kind === "plan") return i === lastPlan;
    if (e.kind === "observation") return !e.isError || i === lastObservation;
    return false;
  });
  const note = lastAction ? lastActionNote(lastAction) : lastNote;
  if (!note) return kept;
  // Right after the last action's observation (a plan written since then comes after the note).
  const at = kept.findLastIndex((e) => e.kind === "observation" && e.step === note.step);
  kept.splice(at === -1 ? kept.length : at + 1, 0, note);
  return kept;
}

/** The entries a policy keeps of all entries (chronological). */
export function applyHistoryPolicy(
  policy: HistoryPolicy,
  entries: readonly HistoryEntry[],
): HistoryEntry[] {
  if (typeof policy === "function") return policy([...entries]);
  return policy === "condensed" ? condenseHistory(entries) : [...entries];
}

/**
 * An action as the model sees it in later prompts: its reply without think blocks (reasoning
 * models' chat templates leave them out too: they are long and never run), closed with
 * <end_action> as the format asks — so the model keeps closing its actions even though the server
 * cut the marker off.
 */
export function shownAction(modelOutput: string, code: string | null): string {
  const visible = stripThinkBlocks(modelOutput).trim();
  const shown =
    code !== null && !visible.includes("<end_action>") ? `${visible}<end_action>` : visible;
  return shown.trim() ? shown : "(empty reply)";
}

/**
 * Every history entry of a trajectory, in order: a planning step is a plan, an action is the
 * model's reply then its observation (an error while the action failed). Forced final answers are
 * not part of the view.
 */
export function historyEntries(steps: readonly StepRecord[]): HistoryEntry[] {
  const out: HistoryEntry[] = [];
  for (const s of steps) {
    if (s.kind === "planning") {
      out.push({ kind: "plan", step: s.step, content: s.modelOutput.trim() || "(empty plan)" });
    } else if (s.kind === "action") {
      out.push({
        kind: "action",
        step: s.step,
        content: shownAction(s.modelOutput, s.code),
        code: s.code,
      });
      out.push({
        kind: "observation",
        step: s.step,
        content: `${OBSERVATION_HEADER}\n${s.observation}`,
        isError: s.error !== null && s.error !== undefined,
      });
    }
  }
  return out;
}

/** User turn after a plan: the plan is the model's own turn, and the prompt must end with the user. */
export const PLAN_FOLLOW_UP = "Now proceed and carry out this plan.";

/**
 * Chat messages for a model call: system, task, then the history. Observations and the last-action
 * note are user messages (chat templates like Qwen's only know system/user/assistant). A plan is an assistant message
 * followed by the user turn PLAN_FOLLOW_UP, always (not only when it is last), so the prompt never
 * ends with an assistant turn (servers treat one as a prefill), a plan never merges with the next
 * action, and the messages written at a planning step stay a prefix of the later prompts. Adjacent
 * actions (possible under a custom history policy) are merged so no two assistant messages meet.
 */
export function historyToMessages(
  system: string,
  task: string,
  history: readonly HistoryEntry[],
): BaseMessage[] {
  const messages: BaseMessage[] = [new SystemMessage(system), new HumanMessage(task)];
  let pendingAssistant: string[] = [];
  const flush = () => {
    if (pendingAssistant.length) messages.push(new AIMessage(pendingAssistant.join("\n\n")));
    pendingAssistant = [];
  };
  for (const entry of history) {
    if (entry.kind === "observation" || entry.kind === "last_action") {
      flush();
      messages.push(new HumanMessage(entry.content));
    } else if (entry.kind === "plan") {
      flush();
      messages.push(new AIMessage(entry.content), new HumanMessage(PLAN_FOLLOW_UP));
    } else {
      pendingAssistant.push(entry.content);
    }
  }
  flush();
  return messages;
}
