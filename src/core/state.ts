import { Annotation, type Overwrite } from "@langchain/langgraph";
import type { GuestError, JsonValue } from "../sandbox/contract.ts";
import { asVariablesLog, type VariablesDelta, type VariablesLog } from "./variables.ts";
import { type UsageByAgent, type UsageTotals, mergeUsage } from "./usage.ts";
import type { ApprovalOutcome } from "./journal.ts";

/** Metadata a tool reports about what it used (e.g. `{ title, url }` of a Wikipedia page). */
export type Source = Record<string, JsonValue>;

/** One tool call made by a code action, as recorded in the trajectory. */
export interface ToolCallRecord {
  callIndex: number;
  tool: string;
  /** Validated arguments (raw guest arguments if validation failed). */
  args: unknown;
  ok: boolean;
  /** Error message when `ok` is false. */
  error?: string;
  durationMs: number;
  /** True when the outcome was served from the call journal instead of running the tool. */
  fromJournal: boolean;
  /**
   * The human decision on a call that needed approval (src/core/approval.ts): approved, rejected
   * (with the reason) or run with edited arguments (`args`, the arguments the tool got).
   */
  approval?: ApprovalOutcome;
}

/**
 * One step of the trajectory: the record the model's view is computed from (src/core/history.ts),
 * and what Studio, `codehop show` and the eval's trajectory export read.
 */
export interface StepRecord {
  /** Agent-local action number (planning/final-answer records carry the action they precede/follow). */
  step: number;
  kind: "action" | "planning" | "final_answer";
  /** The model's raw reply. */
  modelOutput: string;
  thought: string;
  code: string | null;
  /** Observation text as shown to the model ("" for planning). */
  observation: string;
  /** Guest error or format error, if the action failed. */
  error: GuestError | null;
  toolCalls: ToolCallRecord[];
  isFinalAnswer: boolean;
  finalAnswer?: unknown;
  /** Usage of this step's model call. */
  usage?: UsageTotals;
  /** Wall time of the code action (0 when no code ran). */
  durationMs: number;
}

/** Plan node → act node: the parsed model reply. */
export interface PendingAction {
  step: number;
  modelOutput: string;
  thought: string;
  code: string | null;
  /** Format problem when `code` is null. */
  parseError?: string;
  usage: UsageTotals;
}

/** Act node → observe node: what running the code produced. */
export interface ActionOutcome {
  step: number;
  ok: boolean;
  logs: string;
  isFinalAnswer: boolean;
  finalAnswer: unknown;
  error: GuestError | null;
  toolCalls: ToolCallRecord[];
  durationMs: number;
  /** Names the action left holding values that cannot be carried over to the next step, with why (sandbox `notCarriedOver`). */
  notCarriedOver?: Record<string, string>;
}

/** Why the run ended (or "running"). */
export type AgentStatus = "running" | "final_answer" | "max_steps" | "repeated_action";

const last = <T>(fallback: () => T) =>
  Annotation<T>({ reducer: (_left: T, right: T) => right, default: fallback });

function appendUnique(left: Source[], right: Source[] | undefined): Source[] {
  if (!right?.length) return left;
  const seen = new Set(left.map((s) => JSON.stringify(s)));
  const out = [...left];
  for (const s of right) {
    const key = JSON.stringify(s);
    if (!seen.has(key)) {
      seen.add(key);
      out.push(s);
    }
  }
  return out;
}

/** Input of every code agent: the task, and context its tools may be bound to. */
export const AgentInput = Annotation.Root({
  /** The task in natural language (becomes the first user message). */
  task: Annotation<string>,
  /** Run context for tool factories (e.g. `{ page: "Rome" }` for a page agent). Not shown to the model. */
  context: Annotation<Record<string, unknown>>,
  /** The agent's name, passed by a parent calling it as a tool (the stamp is in the input checkpoint). */
  agent: Annotation<string>,
});

/**
 * Full state of a code agent: the record of the run, stored once. What the model sees is not
 * stored: it is computed from `steps` at prompt time (src/core/history.ts, `promptMessages`).
 * Every channel with its reducer and writers; the channels that accumulate over a task (steps,
 * usage, sources) are replaced (LangGraph `Overwrite`) by the `new_task` node when a new task
 * arrives on a finished thread.
 */
export const AgentState = Annotation.Root({
  /** Input task. Last value. */
  task: last<string>(() => ""),
  /** Input context (tool binding). Last value. */
  context: last<Record<string, unknown>>(() => ({})),
  /**
   * The agent's own name, stamped into its checkpoints (by the parent's call, by `new_task`, or by
   * the first model node), so histories and trees label a checkpoint by who wrote it. Last value.
   */
  agent: last<string>(() => ""),
  /**
   * The trajectory: every planning step, action (its reply, code, observation, error, tool calls)
   * and forced final answer, in order. Reducer appends; written by planning/observe/final_answer;
   * replaced by new_task. The model's view of its past is computed from it.
   */
  steps: Annotation<StepRecord[], StepRecord[] | StepRecord | Overwrite<StepRecord[]>>({
    // An Overwrite never reaches the reducer (the channel applies it), hence the narrowing casts.
    reducer: (left, right) => left.concat(right as StepRecord[] | StepRecord),
    default: () => [],
  }),
  /** Parsed model reply waiting to run. Last value; written by plan, consumed by act. */
  pending: last<PendingAction | null>(() => null),
  /** Result of the last code action. Last value; written by act, consumed by observe. */
  outcome: last<ActionOutcome | null>(() => null),
  /** Code actions completed so far. Last value; written by observe. */
  stepCount: last<number>(() => 0),
  /**
   * Sandbox variables after the last action, so a resumed run gets them back: a log of what each
   * action changed (src/core/variables.ts; `foldVariables` gives the snapshot). Reducer appends;
   * written by act and final_answer; compacted with an Overwrite.
   */
  variables: Annotation<VariablesLog, VariablesDelta | Overwrite<VariablesLog>>({
    reducer: (left, right) => [...asVariablesLog(left), right as VariablesDelta],
    default: () => [],
  }),
  /** The result: the final answer, or the last observation under the max-steps policy. Last value. */
  answer: last<unknown>(() => null),
  /** Why the run ended. Last value; written by observe/final_answer. */
  status: last<AgentStatus>(() => "running"),
  /** Tokens and model calls per agent name; reducer sums (sub-agents roll up here). */
  usage: Annotation<UsageByAgent, UsageByAgent | Overwrite<UsageByAgent>>({
    reducer: (left, right) => mergeUsage(left, right as UsageByAgent),
    default: () => ({}),
  }),
  /** Sources tools reported (pages read, ...); reducer appends, dropping duplicates. */
  sources: Annotation<Source[], Source[] | Overwrite<Source[]>>({
    reducer: (left, right) => appendUnique(left, right as Source[]),
    default: () => [],
  }),
  /**
   * Repeated-action detector: a hash of the last (normalized code, observation) and how often in
   * a row it came back. Last value; written by observe.
   */
  repeat: last<{ fingerprint: string; count: number }>(() => ({ fingerprint: "", count: 0 })),
  /** Set by observe to force a planning step next. Last value. */
  replan: last<boolean>(() => false),
  /**
   * Which task of the thread this is: 0 for the first, +1 for each new task on a finished thread
   * (written by new_task). Part of every call-journal key, so a new task's calls never meet the
   * previous task's records (its step numbers restart at 1) and a replay of an old checkpoint is
   * served that task's calls. Last value.
   */
  taskEpoch: last<number>(() => 0),
});

/** The state annotation type of a code agent. */
export type AgentStateAnnotation = typeof AgentState;
/** Code-agent state as read by nodes. */
export type AgentState = AgentStateAnnotation["State"];
/** Partial update returned by nodes. */
export type AgentUpdate = AgentStateAnnotation["Update"];
/** What callers pass to `graph.invoke` (`agent` is set by a parent calling the agent as a tool). */
export type AgentInputValue = { task: string; context?: Record<string, unknown>; agent?: string };
