/**
 * Call journal: records every tool / sub-agent call made inside a code action so that a
 * re-executed action (after a crash + resume, or a replay) is served the recorded results instead
 * of repeating finished work. The act node consults it. Its semantics — which recorded call
 * answers which key (exact namespace for a resume, namespace without task ids for a replay fork,
 * task epochs, tool and arguments must match) — live here, over a plain row store that each
 * persistence adapter provides ({@link JournalRowStore}; SQLite and Postgres in src/persistence/).
 */
import { checkpointCorrupt, quoted } from "../errors.ts";
import type { ToolReport } from "../tools/define-tool.ts";
import type { ApprovalJournal, ApprovalResume } from "./approval-decision.ts";

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
   * Which task the call belongs to: the `taskEpoch` state channel (src/core/state.ts: 0 for a
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
  | { ok: true; value: unknown; reports?: ToolReport[]; approval?: ApprovalOutcome }
  | { ok: false; error: string; reports?: ToolReport[]; approval?: ApprovalOutcome };

/** The human decision recorded with a call that needed approval (src/core/approval.ts). */
export type ApprovalOutcome =
  | { decision: "approve" }
  | { decision: "reject"; reason?: string }
  | { decision: "edit"; args: Record<string, unknown> };

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

/** Storage for call outcomes (what the act node uses). */
export interface CallJournal {
  get(key: CallKey): Promise<CallOutcome | undefined> | CallOutcome | undefined;
  put(key: CallKey, outcome: CallOutcome): Promise<void> | void;
}

/** One stored row of the journal, as an adapter keeps it. */
export interface JournalRow {
  threadId: string;
  /** The exact checkpoint namespace, or `~` + its {@link stableNamespace} (the replay copy). */
  checkpointNs: string;
  /** {@link taskEpochTag} of the key's epochs. */
  taskEpoch: string;
  step: number;
  callIndex: number;
  tool: string;
  argsJson: string;
  outcomeJson: string;
  /** ISO time the row was written. */
  recordedAt: string;
}

/** Position of a row: its primary key (a put of the same position replaces the row). */
export type JournalRowKey = Pick<
  JournalRow,
  "threadId" | "checkpointNs" | "taskEpoch" | "step" | "callIndex"
>;

/**
 * What a persistence adapter stores for the journal: rows by position, nothing more. Writes of one
 * `putRows` call are atomic (both copies of a call, or neither) and durable when the promise
 * resolves (a call that finished before a `kill -9` is served after the resume).
 */
export interface JournalRowStore {
  getRow(key: JournalRowKey): Promise<JournalRow | undefined> | JournalRow | undefined;
  putRows(rows: readonly JournalRow[]): Promise<void> | void;
  /** Every row of a thread, oldest first (recorded time, then position). */
  listRows(threadId: string): Promise<JournalRow[]> | JournalRow[];
  deleteThread(threadId: string): Promise<void> | void;
}

/**
 * A checkpoint namespace without LangGraph task ids ("act:9f..|1|act:c4.." → "act|1|act"). Task ids
 * are the same when a thread resumes from its checkpoint, but new when a replay forks from an
 * older one; the stable form lets a replay find the calls its original run made.
 */
export function stableNamespace(checkpointNs: string): string {
  return checkpointNs
    .split("|")
    .map((part) => part.split(":")[0])
    .join("|");
}

/** Where the decision for an approval is stored among a thread's rows. */
function decisionPosition(threadId: string, approvalId: string): JournalRowKey {
  return {
    threadId,
    checkpointNs: DECISION_NAMESPACE_PREFIX + approvalId,
    taskEpoch: "",
    step: 0,
    callIndex: 0,
  };
}

/** Prefix of the rows keyed by {@link stableNamespace} (exact rows use the namespace as given). */
export const STABLE_NAMESPACE_PREFIX = "~";

/**
 * What a replay copy row holds instead of the outcome: the exact namespace of the row that has it
 * (rows written before this existed hold the outcome itself; both are read).
 */
interface ReplayReference {
  ref: string;
}

/** The table every adapter keeps the journal's rows in (an error names it). */
export const JOURNAL_TABLE = "codehop_call_journal";

/** A journal row's key, as an error names it. */
export function journalRowKey(row: JournalRowKey): string {
  return `thread_id ${quoted(row.threadId)}, checkpoint_ns ${quoted(row.checkpointNs)}, task_epoch ${quoted(row.taskEpoch)}, step ${row.step}, call_index ${row.callIndex}`;
}

/**
 * A row's stored JSON, parsed and of the shape `valid` accepts; anything else is damaged data
 * (CODEHOP_CHECKPOINT_CORRUPT naming the row), never a JSON parser's message quoting the bytes.
 */
function parseRow<T>(row: JournalRow, valid: (value: unknown) => boolean): T {
  let value: unknown;
  try {
    value = JSON.parse(row.outcomeJson);
  } catch {
    throw checkpointCorrupt({
      thread: row.threadId,
      table: JOURNAL_TABLE,
      row: journalRowKey(row),
      problem: "its stored JSON does not parse",
    });
  }
  if (!valid(value))
    throw checkpointCorrupt({
      thread: row.threadId,
      table: JOURNAL_TABLE,
      row: journalRowKey(row),
      problem: "its stored value is not what the journal keeps there",
    });
  return value as T;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
/** A call's outcome as stored, or a replay copy's reference to it. */
const isStoredOutcome = (v: unknown) =>
  isObject(v) && (typeof v.ok === "boolean" || isReplayReference(v));
const isOutcome = (v: unknown) => isObject(v) && typeof v.ok === "boolean";
const isDecision = (v: unknown) =>
  isObject(v) && typeof v.approvalId === "string" && typeof v.decision === "string";

/**
 * Why a stored journal row cannot be served (its JSON does not parse, or is not what rows at its
 * position hold), or undefined when it reads: what `codehop check` asks of every row.
 */
export function journalRowProblem(row: JournalRow): string | undefined {
  const ns = row.checkpointNs;
  const valid = ns.startsWith(RECORD_NAMESPACE_PREFIX)
    ? () => true
    : ns.startsWith(DECISION_NAMESPACE_PREFIX)
      ? (v: unknown) => v === true || isDecision(v)
      : isStoredOutcome;
  try {
    parseRow(row, valid);
    return undefined;
  } catch (err) {
    return (err as { problem?: string }).problem ?? (err as Error).message;
  }
}

function isReplayReference(value: unknown): value is ReplayReference {
  return (
    typeof value === "object" &&
    value !== null &&
    !("ok" in value) &&
    typeof (value as { ref?: unknown }).ref === "string"
  );
}

/** One recorded call as listed by {@link ReplayableJournal.entries}. */
export interface JournalEntry extends CallKey {
  /** Stored canonical form: trailing zeros dropped (`[]` = the thread's first task everywhere). */
  taskEpochs: number[];
  outcome: CallOutcome;
  recordedAt: string;
}

/**
 * Prefix of the rows holding approval decisions (`?<approvalId>`, step 0, call 0): a decision given
 * for a call that needed approval, kept until the call's outcome is journaled (src/core/approval.ts).
 */
export const DECISION_NAMESPACE_PREFIX = "?";

/** Marks, among the decision rows, the approvals a run paused to ask for (`?asked:<id>`). */
const ASKED_PREFIX = "asked:";

/**
 * Prefix of the rows holding a thread's own records (`@<name>`, step 0, call 0): what an app did
 * with a thread outside its graph — `ask --verify`'s verification — kept beside the thread's calls
 * (deleted with them, in every adapter), never served to a run.
 */
export const RECORD_NAMESPACE_PREFIX = "@";

/** Where a thread's record `name` is stored among its rows. */
function recordPosition(threadId: string, name: string): JournalRowKey {
  return {
    threadId,
    checkpointNs: RECORD_NAMESPACE_PREFIX + name,
    taskEpoch: "",
    step: 0,
    callIndex: 0,
  };
}

/** Stores (replaces) a thread's record `name` (see {@link RECORD_NAMESPACE_PREFIX}). */
export async function putThreadRecord(
  rows: JournalRowStore,
  threadId: string,
  name: string,
  value: unknown,
): Promise<void> {
  await rows.putRows([
    {
      ...recordPosition(threadId, name),
      tool: "",
      argsJson: "",
      outcomeJson: JSON.stringify(value),
      recordedAt: new Date().toISOString(),
    },
  ]);
}

/** A thread's record `name`, or undefined when none was stored. */
export async function getThreadRecord<T>(
  rows: JournalRowStore,
  threadId: string,
  name: string,
): Promise<T | undefined> {
  const row = await rows.getRow(recordPosition(threadId, name));
  return row ? parseRow<T>(row, () => true) : undefined;
}

/**
 * A call journal that can also serve replays and list what it holds. It also keeps approval
 * decisions ({@link ApprovalJournal}: optional, so adapters written before approvals still fit;
 * without them a decision lives in LangGraph's resume values only).
 */
export interface ReplayableJournal extends CallJournal, Partial<ApprovalJournal> {
  /** The same journal, also serving calls recorded before a replay's fork (task ids differ there). */
  forReplay(): ReplayableJournal;
  /** Every recorded call of a thread, in recording order (for `codehop history` and tests). */
  entries(threadId: string): Promise<JournalEntry[]>;
}

/**
 * The call journal over an adapter's rows. Each call is stored under its exact checkpoint
 * namespace (what a resumed run looks up: it always matches the same call), and a copy under the
 * namespace without task ids (what a replay fork looks up, since forking gives tasks new ids; the
 * latest call of the same task at that position wins) that refers to the exact row for the outcome. A recorded outcome is served only when the tool name
 * and the arguments match, so a replay from an edited state that makes different calls runs them
 * for real. Task epochs keep a new task on a finished thread, whose steps restart at 1, from
 * meeting the previous task's calls.
 *
 * @param matchAcrossForks also serve the namespace-without-task-ids copies (replays); off for runs
 *   and resumes, where only the exact call may be served.
 */
export function createCallJournal(
  rows: JournalRowStore,
  options: { matchAcrossForks?: boolean } = {},
): ReplayableJournal & Required<ApprovalJournal> {
  return {
    async get(key) {
      const namespaces = [key.checkpointNs];
      if (options.matchAcrossForks)
        namespaces.push(STABLE_NAMESPACE_PREFIX + stableNamespace(key.checkpointNs));
      const taskEpoch = taskEpochTag(key.taskEpochs);
      for (const checkpointNs of namespaces) {
        const row = await rows.getRow({
          threadId: key.threadId,
          checkpointNs,
          taskEpoch,
          step: key.step,
          callIndex: key.callIndex,
        });
        if (!row || row.tool !== key.tool || row.argsJson !== key.argsJson) continue;
        const stored = parseRow<CallOutcome | ReplayReference>(row, isStoredOutcome);
        if (!isReplayReference(stored)) return stored;
        // A replay copy holds where the call's outcome is: the row of its exact namespace.
        const target = await rows.getRow({ ...row, checkpointNs: stored.ref });
        if (target && target.tool === key.tool && target.argsJson === key.argsJson) {
          const outcome = parseRow<CallOutcome | ReplayReference>(target, isStoredOutcome);
          if (!isReplayReference(outcome)) return outcome;
        }
      }
      return undefined;
    },
    async put(key, outcome) {
      const base = {
        threadId: key.threadId,
        taskEpoch: taskEpochTag(key.taskEpochs),
        step: key.step,
        callIndex: key.callIndex,
        tool: key.tool,
        argsJson: key.argsJson,
        recordedAt: new Date().toISOString(),
      };
      // The outcome is stored once: the replay copy refers to the exact row (same position but
      // the namespace), which lives as long as it does (rows go by thread).
      const reference: ReplayReference = { ref: key.checkpointNs };
      await rows.putRows([
        { ...base, checkpointNs: key.checkpointNs, outcomeJson: JSON.stringify(outcome) },
        {
          ...base,
          checkpointNs: STABLE_NAMESPACE_PREFIX + stableNamespace(key.checkpointNs),
          outcomeJson: JSON.stringify(reference),
        },
      ]);
    },
    forReplay: () => createCallJournal(rows, { matchAcrossForks: true }),
    async getDecision(threadId, approvalId) {
      const row = await rows.getRow(decisionPosition(threadId, approvalId));
      return row ? parseRow<ApprovalResume>(row, isDecision) : undefined;
    },
    async putDecision(threadId, decision) {
      const position = decisionPosition(threadId, decision.approvalId);
      // The first decision given for a call is the one that counts.
      if (await rows.getRow(position)) return;
      await rows.putRows([
        {
          ...position,
          tool: "",
          argsJson: "",
          outcomeJson: JSON.stringify(decision),
          recordedAt: new Date().toISOString(),
        },
      ]);
    },
    async markAsked(threadId, approvalId) {
      const position = decisionPosition(threadId, `${ASKED_PREFIX}${approvalId}`);
      if (await rows.getRow(position)) return;
      await rows.putRows([
        {
          ...position,
          tool: "",
          argsJson: "",
          outcomeJson: "true",
          recordedAt: new Date().toISOString(),
        },
      ]);
    },
    async wasAsked(threadId, approvalId) {
      return Boolean(await rows.getRow(decisionPosition(threadId, `${ASKED_PREFIX}${approvalId}`)));
    },
    async entries(threadId) {
      return (await rows.listRows(threadId))
        .filter(
          (r) =>
            !r.checkpointNs.startsWith(STABLE_NAMESPACE_PREFIX) &&
            !r.checkpointNs.startsWith(DECISION_NAMESPACE_PREFIX) &&
            !r.checkpointNs.startsWith(RECORD_NAMESPACE_PREFIX),
        )
        .map((r) => ({
          threadId: r.threadId,
          checkpointNs: r.checkpointNs,
          taskEpochs: r.taskEpoch ? r.taskEpoch.split(".").map(Number) : [],
          step: r.step,
          callIndex: r.callIndex,
          tool: r.tool,
          argsJson: r.argsJson,
          outcome: parseRow<CallOutcome>(r, isOutcome),
          recordedAt: r.recordedAt,
        }));
    },
  };
}
