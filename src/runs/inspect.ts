import type { CheckpointTuple } from "@langchain/langgraph";
import { cliCommand } from "../config/cli-command.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { openPersistenceFor, type Persistence, type ThreadRecord } from "../persistence/open.ts";
import { rootName, type AppOutline, type RunApp, type RunOptions } from "./app.ts";
import { loadAppConfig, persistenceLocation } from "./config.ts";
import { requireThread } from "./require-thread.ts";
import { displayTask, RunProgress } from "./progress.ts";
import { answerText } from "./result.ts";

/**
 * Inspecting a thread without running it: its checkpoints (`codehop history`) and the whole run as
 * a tree rebuilt from them (`codehop show`).
 */

/**
 * The agent that wrote a checkpoint: the name every agent stamps into its state (`agent`). Threads
 * checkpointed before agents stamped their name get the app's team path for the namespace depth.
 */
function agentOf(app: AppOutline, values: Record<string, unknown>, ns: string): string {
  if (typeof values.agent === "string" && values.agent) return values.agent;
  const depth = ns ? ns.split("|").filter((part) => part.includes(":")).length : 0;
  let name = app.team.root;
  for (let i = 0; i < depth; i++) {
    const member = app.team.members.find((m) => m.name === name);
    if (!member?.children.length) return `agent@${depth + 1}`;
    name = member.children[0];
  }
  return name;
}

/** One checkpoint of a thread as listed by {@link history}. */
export interface CheckpointSummary {
  checkpoint_id: string;
  parent_checkpoint_id: string | null;
  /** LangGraph super-step number. */
  step: number;
  /** "input", "loop" or "update" (a fork with an edited state). */
  source: string;
  /** Nodes that run next from here (empty = finished). */
  next: string[];
  /** Root-agent actions completed at this checkpoint. */
  actions: number;
  /** Short description of the latest root-agent step at this checkpoint. */
  summary: string;
  created_at: string;
  /** Checkpoint namespace ("" for the root agent; "act:<task>|..." for nested agent runs). */
  namespace: string;
  /** Agent that wrote the checkpoint (the name it stamps into its state). */
  agent: string;
  /** Full state values (only with `withValues`). */
  values?: Record<string, unknown>;
}

/** One line describing an agent state: what it is about to do, did, or answered. */
function summarizeState(values: Record<string, any>, next: readonly string[] | undefined): string {
  const steps = Array.isArray(values.steps) ? values.steps : [];
  const last = steps[steps.length - 1];
  const pending = values.pending;
  const outcome = values.outcome;
  const done = typeof values.stepCount === "number" ? values.stepCount : 0;
  const finished = next
    ? next.length === 0
    : typeof values.status === "string" && values.status !== "running";
  let summary = "";
  if (finished && values.answer != null) summary = `answer: ${answerText(values.answer)}`;
  else if (outcome && outcome.step > done && (!next || next.includes("observe"))) {
    summary = `ran step ${outcome.step}: ${outcome.error ? `${outcome.error.name}: ${outcome.error.message}` : outcome.logs || "(nothing printed)"}`;
  } else if (pending && pending.step > done && (!next || next.includes("act"))) {
    summary = `about to run step ${pending.step}: ${pending.thought ?? ""}`;
  } else if (last)
    summary = `observed step ${last.step}: ${last.observation || last.thought || ""}`;
  else if (typeof values.stage === "string" && values.stage) summary = values.stage;
  else if (values.question) summary = `question: ${values.question}`;
  else if (values.task) summary = `task: ${displayTask(String(values.task))}`;
  return summary.replace(/\s+/g, " ").trim();
}

/** Checkpoints of the nested agent runs of a thread (newest first within each namespace). */
async function nestedCheckpoints(
  app: AppOutline,
  persistence: Persistence,
  threadId: string,
  withValues?: boolean,
): Promise<CheckpointSummary[]> {
  const out: CheckpointSummary[] = [];
  const tuples: CheckpointTuple[] = [];
  for await (const tuple of persistence.checkpointer.list({
    configurable: { thread_id: threadId },
  })) {
    if (tuple.config.configurable?.checkpoint_ns) tuples.push(tuple);
  }
  // An agent run's input checkpoint holds no values yet: it is labelled by its run's other ones.
  const stamps = new Map<string, string>();
  for (const tuple of tuples) {
    const agent = (tuple.checkpoint.channel_values as Record<string, unknown>)?.agent;
    if (typeof agent === "string" && agent)
      stamps.set(String(tuple.config.configurable?.checkpoint_ns), agent);
  }
  for (const tuple of tuples) {
    const ns = String(tuple.config.configurable?.checkpoint_ns ?? "");
    const values = (tuple.checkpoint.channel_values ?? {}) as Record<string, any>;
    out.push({
      checkpoint_id: String(tuple.config.configurable?.checkpoint_id),
      parent_checkpoint_id:
        (tuple.parentConfig?.configurable?.checkpoint_id as string | undefined) ?? null,
      step: Number(tuple.metadata?.step ?? -1),
      source: String(tuple.metadata?.source ?? ""),
      next: [],
      actions: typeof values.stepCount === "number" ? values.stepCount : 0,
      summary: summarizeState(values, undefined),
      created_at: tuple.checkpoint.ts,
      namespace: ns,
      agent: stamps.get(ns) ?? agentOf(app, values, ns),
      ...(withValues ? { values } : {}),
    });
  }
  return out.sort(
    (a, b) =>
      a.namespace.localeCompare(b.namespace) || b.checkpoint_id.localeCompare(a.checkpoint_id),
  );
}

/** Lists a thread's root checkpoints, newest first (all branches). */
export async function threadHistory(
  app: RunApp,
  threadId: string,
  options: Pick<RunOptions, "config" | "persistence"> & {
    withValues?: boolean;
    checkpointId?: string;
    /** Also list the nested agents' checkpoints (after the root's; they cannot be replayed from). */
    allNamespaces?: boolean;
  } = {},
): Promise<CheckpointSummary[]> {
  return withThread(threadId, options, async (persistence) => {
    const graph = app.graph(persistence.checkpointer);
    const out: CheckpointSummary[] = [];
    for await (const snap of graph.getStateHistory({ configurable: { thread_id: threadId } })) {
      const values = (snap.values ?? {}) as Record<string, any>;
      const id = snap.config.configurable?.checkpoint_id as string;
      if (options.checkpointId && id !== options.checkpointId) continue;
      const summary = summarizeState(values, snap.next);
      out.push({
        checkpoint_id: id,
        parent_checkpoint_id:
          (snap.parentConfig?.configurable?.checkpoint_id as string | undefined) ?? null,
        step: Number(snap.metadata?.step ?? -1),
        source: String(snap.metadata?.source ?? ""),
        next: [...snap.next],
        actions: typeof values.stepCount === "number" ? values.stepCount : 0,
        summary,
        created_at: snap.createdAt ?? "",
        namespace: "",
        agent: agentOf(app, values, ""),
        ...(options.withValues ? { values } : {}),
      });
    }
    if (options.allNamespaces && !options.checkpointId)
      out.push(...(await nestedCheckpoints(app, persistence, threadId, options.withValues)));
    if (options.checkpointId && out.length === 0) {
      throw new CodehopError(
        ErrorCodes.CHECKPOINT_NOT_FOUND,
        `Thread "${threadId}" has no checkpoint "${options.checkpointId}". List them with \`${cliCommand(["history", threadId], { home: options.config?.home })}\`.`,
      );
    }
    return out;
  });
}

/**
 * The full tree of a thread — the manager's steps with every sub-agent call nested under the
 * action that made it — rebuilt from its checkpoints (current branch only), for finished, failed
 * or crashed runs alike. Checkpoint ids are time-ordered across namespaces, so replaying the
 * states in id order attaches each sub-agent run to the action that was running when it started.
 */
export async function traceThread(
  app: AppOutline,
  threadId: string,
  options: Pick<RunOptions, "config" | "persistence"> = {},
): Promise<RunProgress> {
  return withThread(threadId, options, async (persistence, record) => {
    const tuples: CheckpointTuple[] = [];
    for await (const t of persistence.checkpointer.list({ configurable: { thread_id: threadId } }))
      tuples.push(t);
    const nsOf = (t: CheckpointTuple) => String(t.config.configurable?.checkpoint_ns ?? "");
    const idOf = (t: CheckpointTuple) => String(t.config.configurable?.checkpoint_id ?? "");
    // The current branch of the root: from the newest root checkpoint back through its parents.
    const roots = new Map(tuples.filter((t) => nsOf(t) === "").map((t) => [idOf(t), t]));
    const branch = new Set<string>();
    let cursor = tuples.find((t) => nsOf(t) === "");
    while (cursor && !branch.has(idOf(cursor))) {
      branch.add(idOf(cursor));
      const parent = cursor.parentConfig?.configurable?.checkpoint_id as string | undefined;
      cursor = parent ? roots.get(parent) : undefined;
    }
    // Sub-agent runs belong to the branch when the root task that started them ran on it.
    const branchTasks = new Set<string>();
    for (const id of branch)
      for (const [taskId] of roots.get(id)?.pendingWrites ?? []) branchTasks.add(taskId);
    const inBranch = (t: CheckpointTuple) => {
      const ns = nsOf(t);
      if (!ns) return branch.has(idOf(t));
      return branchTasks.has(ns.split("|")[0].split(":")[1] ?? "");
    };
    const ordered = tuples.filter(inBranch).sort((a, b) => idOf(a).localeCompare(idOf(b)));

    const progress = new RunProgress({ rootName: rootName(app) });
    const seen = new Map<
      string,
      { steps: number; pending: number; done: boolean; stage?: string }
    >();
    for (const t of ordered) {
      const ns = nsOf(t);
      const path = ns ? ns.split("|") : [];
      const values = (t.checkpoint.channel_values ?? {}) as Record<string, any>;
      let state = seen.get(ns);
      if (!state) {
        const task = ns ? values.task : (values.question ?? values.task);
        if (typeof task !== "string" || !task) continue; // input checkpoint: nothing to show yet
        progress.apply([
          path,
          "tasks",
          { id: ns, name: "plan", input: { task, agent: agentOf(app, values, ns) } },
        ]);
        state = { steps: 0, pending: 0, done: false };
        seen.set(ns, state);
      }
      // A pipeline node's stage line (plain nodes of app graphs), once per change.
      if (typeof values.stage === "string" && values.stage && values.stage !== state.stage) {
        state.stage = values.stage;
        progress.apply([path, "updates", { stage: { stage: values.stage } }]);
      }
      const done = typeof values.stepCount === "number" ? values.stepCount : 0;
      const pending = values.pending;
      if (pending && pending.step > done && pending.step !== state.pending) {
        state.pending = pending.step;
        progress.apply([path, "updates", { plan: { pending } }]);
      }
      const steps = Array.isArray(values.steps) ? values.steps : [];
      const finished = typeof values.status === "string" && values.status !== "running";
      if (steps.length > state.steps || (finished && !state.done)) {
        const update: Record<string, unknown> = { steps: steps.slice(state.steps) };
        if (finished) Object.assign(update, { status: values.status, answer: values.answer });
        state.steps = steps.length;
        state.done = finished;
        progress.apply([path, "updates", { observe: update }]);
      }
    }
    // Agents still at work in the last checkpoints stopped there: say why.
    if (record.status === "interrupted") progress.interrupt();
    else if (record.status === "failed") progress.fail(record.error ?? "failed");
    return progress;
  });
}

/**
 * Runs `read` on the persistence holding an existing thread (opened from the data directory, which
 * must exist, and closed afterwards, unless the caller passed one in).
 */
async function withThread<T>(
  threadId: string,
  options: Pick<RunOptions, "config" | "persistence">,
  read: (persistence: Persistence, record: ThreadRecord) => Promise<T>,
): Promise<T> {
  const persistence =
    options.persistence ??
    (await openPersistenceFor(persistenceLocation(loadAppConfig(options.config)), {
      mustExist: true,
    }));
  try {
    const record = await requireThread(persistence, threadId, false, {
      home: options.config?.home,
    });
    return await read(persistence, record);
  } finally {
    if (!options.persistence) await persistence.close();
  }
}
