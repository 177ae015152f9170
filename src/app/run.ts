import { randomUUID } from "node:crypto";
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { CheckpointTuple, StateSnapshot } from "@langchain/langgraph";
import { getDefaultSandbox } from "../agent/default-sandbox.ts";
import type { UsageByAgent } from "../agent/usage.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { createManagerGraph, MANAGER_RECURSION_LIMIT } from "../graphs/manager.ts";
import { openPersistence, type Persistence, type ThreadRecord } from "../persistence/index.ts";
import type { KnowledgeSource } from "../store/types.ts";
import {
  AGENT_NAMES,
  assertModelConfigured,
  detectModel,
  loadAppConfig,
  type AppConfig,
  type AppConfigOverrides,
} from "./config.ts";
import { displayTask, RunProgress, type StreamEvent } from "./progress.ts";
import { answerText, shapeSources, shapeUsage, type AskResult } from "./result.ts";
import { openSourceFor } from "./source.ts";
import { runRecord } from "./thread-record.ts";

/** Options shared by {@link ask}, {@link resume} and {@link replay}. */
export interface RunOptions {
  /** Configuration overrides (the rest comes from the environment, see src/app/config.ts). */
  config?: AppConfigOverrides;
  /** An already open persistence (else `<home>/checkpoints.db` is opened and closed per call). */
  persistence?: Persistence;
  /** An already open knowledge source (else chosen by `config.corpus`: corpus DB or online Wikipedia). */
  source?: KnowledgeSource;
  /** A chat model (instance or name) for every agent, overriding the configuration. */
  model?: BaseChatModel | string;
  /** Receives every stream event (`[namespace, mode, chunk]`), e.g. for a live tree. */
  onEvent?: (event: StreamEvent) => void;
  /** Called once the thread id is known, before the first model call. */
  onStart?: (info: { threadId: string; dbPath: string; state?: Record<string, unknown> }) => void;
  /** Aborts the run (the thread stays resumable from its last checkpoint). */
  signal?: AbortSignal;
}

/** Fills in the endpoint's first model when none is configured, then checks every agent has one. */
async function requireModel(config: AppConfig): Promise<void> {
  if (!config.model && config.baseURL) config.model = await detectModel(config);
  assertModelConfigured(config);
}

/** Builds the `configurable` keys the agents read (model factory, journal, knowledge source). */
export function runConfigurable(
  config: AppConfig,
  extra: {
    threadId: string;
    persistence: Persistence;
    source: KnowledgeSource;
    model?: BaseChatModel | string;
  },
): Record<string, unknown> {
  const configurable: Record<string, unknown> = {
    thread_id: extra.threadId,
    journal: extra.persistence.journal,
    knowledgeSource: extra.source,
    modelSettings: {
      baseURL: config.baseURL,
      apiKey: config.apiKey,
      temperature: config.temperature,
      maxTokens: config.maxTokens,
      maxRetries: config.maxRetries,
      timeoutMs: config.timeoutMs,
    },
  };
  if (extra.model) configurable.model = extra.model;
  else {
    if (config.model) configurable.model = config.model;
    if (Object.keys(config.models).length) configurable.models = config.models;
  }
  return configurable;
}

type ManagerGraph = ReturnType<typeof createManagerGraph>;

/** What one call of {@link ask}, {@link resume} or {@link replay} opens, and closes at the end. */
interface Session {
  config: AppConfig;
  persistence: Persistence;
  source?: KnowledgeSource;
  /** The manager graph over this session's checkpointer (built on first use, then reused). */
  readonly graph: ManagerGraph;
  close(): Promise<void>;
}

async function openSession(
  options: RunOptions,
  config: AppConfig = loadAppConfig(options.config),
): Promise<Session> {
  const persistence = options.persistence ?? openPersistence(config.home);
  let graph: ManagerGraph | undefined;
  const session: Session = {
    config,
    persistence,
    get graph() {
      graph ??= createManagerGraph({ checkpointer: persistence.checkpointer });
      return graph;
    },
    async close() {
      if (session.source && session.source !== options.source)
        await session.source.close().catch(() => {});
      if (!options.persistence) persistence.close();
    },
  };
  return session;
}

/**
 * Opens the knowledge source of a run. A thread continues with the source it started with (the
 * registry remembers the corpus path, or that it used online Wikipedia) unless the caller names
 * one explicitly (`--corpus`, `config.corpus`); the environment only decides for new threads.
 */
async function withSource(
  session: Session,
  options: RunOptions,
  stored?: Record<string, unknown>,
): Promise<KnowledgeSource> {
  if (options.source) return (session.source = options.source);
  let config = session.config;
  if (!options.config?.corpus && stored) {
    if (typeof stored.corpus === "string" && stored.corpus)
      config = { ...config, corpus: stored.corpus };
    else if (stored.source === "wikipedia") config = { ...config, corpus: undefined };
  }
  session.source = await openSourceFor(config);
  return session.source;
}

/**
 * Everything a run needs before its first model call: the model the thread was started with
 * (`stored`, when none is configured now), else the endpoint's first, and the knowledge source.
 */
async function prepareRun(
  session: Session,
  options: RunOptions,
  stored?: Record<string, unknown>,
): Promise<void> {
  if (stored) applyStoredModel(session.config, stored);
  if (!options.model) await requireModel(session.config);
  await withSource(session, options, stored);
}

/**
 * Streams the manager graph for `input` (a new question, or null to continue from the thread's
 * latest checkpoint, or from `from.checkpointId`) and returns the shaped result read from the
 * final checkpoint. Unless `from.started` (ask marks its thread running and announces it itself),
 * the thread is marked running and announced here, with the state it continues from (`from.state`
 * when the caller has just read it).
 */
async function execute(
  session: Session,
  options: RunOptions,
  threadId: string,
  input: { question: string } | null,
  from: { checkpointId?: string; started?: boolean; state?: Record<string, unknown> } = {},
): Promise<AskResult> {
  const started = Date.now();
  const { persistence, config, graph } = session;
  const { checkpointId } = from;
  if (!from.started) persistence.threads.start(threadId);
  const configurable = runConfigurable(config, {
    threadId,
    persistence,
    source: session.source!,
    model: options.model,
  });
  if (checkpointId) {
    configurable.checkpoint_id = checkpointId;
    // A replay forks: its tasks get new ids, so recorded calls are matched by position too.
    configurable.journal = persistence.journal.forReplay();
  }
  const runConfig: RunnableConfig = {
    configurable,
    recursionLimit: MANAGER_RECURSION_LIMIT,
    signal: options.signal,
  };
  let state = from.state;
  if (input === null && !state) {
    // Resumed or replayed: hand the checkpointed state to the caller (the live tree shows it).
    const snapshot = await graph.getState({
      configurable: {
        thread_id: threadId,
        ...(checkpointId ? { checkpoint_id: checkpointId } : {}),
      },
    });
    state = snapshot.values as Record<string, unknown>;
  }
  // Start the sandbox's warm child now, so its spawn overlaps the first model call.
  void getDefaultSandbox().catch(() => {});
  if (!from.started) options.onStart?.({ threadId, dbPath: persistence.dbPath, state });
  try {
    const stream = await graph.stream(input, {
      ...runConfig,
      subgraphs: true,
      streamMode: ["updates", "tasks"],
    });
    for await (const event of stream as AsyncIterable<StreamEvent>) options.onEvent?.(event);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    persistence.threads.fail(threadId, message);
    const hint = `The thread is saved: continue it with \`codehop resume ${threadId}\`.`;
    if (options.signal?.aborted) {
      throw new CodehopError(
        ErrorCodes.RUN_INTERRUPTED,
        `Run interrupted on thread ${threadId}.\n${hint}`,
        { cause: err },
      );
    }
    if (CodehopError.isInstance(err))
      throw new CodehopError(err.code, `${err.message}\n${hint}`, { cause: err });
    throw new CodehopError(
      ErrorCodes.GRAPH_INVARIANT,
      `Run failed on thread ${threadId}: ${message}\n${hint}`,
      { cause: err },
    );
  }
  const snapshot = await graph.getState({ configurable: { thread_id: threadId } });
  const result = shapeResult(persistence, threadId, snapshot, Date.now() - started);
  persistence.threads.finish(threadId, result.answer, result.duration_ms);
  return result;
}

/** The result stored in a thread's latest checkpoint. */
export async function readResult(
  persistence: Persistence,
  threadId: string,
  started?: number,
): Promise<AskResult> {
  const graph = createManagerGraph({ checkpointer: persistence.checkpointer });
  const snapshot = await graph.getState({ configurable: { thread_id: threadId } });
  // A stored result reports how long the run that finished it took.
  const durationMs =
    started !== undefined
      ? Date.now() - started
      : (persistence.threads.get(threadId)?.durationMs ?? 0);
  return shapeResult(persistence, threadId, snapshot, durationMs);
}

/** An {@link AskResult} from a thread's latest state snapshot. */
function shapeResult(
  persistence: Persistence,
  threadId: string,
  snapshot: StateSnapshot,
  durationMs: number,
): AskResult {
  const values = (snapshot.values ?? {}) as Record<string, unknown>;
  return {
    answer: answerText(values.answer),
    thread_id: threadId,
    status:
      typeof values.status === "string"
        ? values.status
        : snapshot.next.length
          ? "interrupted"
          : "unknown",
    sources: shapeSources(values.sources),
    usage: shapeUsage(values.usage as UsageByAgent | undefined),
    steps: typeof values.stepCount === "number" ? values.stepCount : 0,
    checkpoint_id: (snapshot.config?.configurable?.checkpoint_id as string | undefined) ?? null,
    checkpoint_db: persistence.dbPath,
    duration_ms: durationMs,
  };
}

/**
 * The latest state of a thread that has checkpoints: `stored` is its result when the run already
 * finished (nothing runs next), read from this one snapshot; else `state` is where it continues.
 */
async function latest(
  session: Session,
  options: RunOptions,
  record: ThreadRecord,
): Promise<{ stored: AskResult } | { state: Record<string, unknown> }> {
  const { persistence } = session;
  const snapshot = await session.graph.getState({ configurable: { thread_id: record.threadId } });
  if (snapshot.next.length > 0) return { state: snapshot.values as Record<string, unknown> };
  options.onStart?.({ threadId: record.threadId, dbPath: persistence.dbPath });
  // A stored result reports how long the run that finished it took.
  const stored = shapeResult(persistence, record.threadId, snapshot, record.durationMs ?? 0);
  if (record.status !== "done") persistence.threads.finish(record.threadId, stored.answer);
  return { stored };
}

/** Options of {@link ask}. */
export interface AskOptions extends RunOptions {
  /**
   * Thread id to use (default: a new UUID). A thread holds one question: asking the same question
   * again on a finished thread returns its stored result; any other reuse of a thread with
   * checkpoints is rejected.
   */
  threadId?: string;
}

/**
 * A resumed thread uses the model it was started with when none is configured now (before asking
 * the endpoint which models it serves).
 */
function applyStoredModel(config: AppConfig, stored: Record<string, unknown>): void {
  if (!config.model && typeof stored.model === "string" && stored.model)
    config.model = stored.model;
  if (!Object.keys(config.models).length && stored.models && typeof stored.models === "object")
    config.models = { ...(stored.models as Record<string, string>) };
}

/**
 * Answers a question with the three-agent system (manager → wikipedia_search → page_search),
 * checkpointing every step to `<CODEHOP_HOME>/checkpoints.db`. The thread (question, knowledge
 * source, model names) is recorded before anything slow happens, so a run killed at any point can
 * be continued with {@link resume}.
 */
export async function ask(question: string, options: AskOptions = {}): Promise<AskResult> {
  if (!question.trim()) throw new CodehopError(ErrorCodes.CONFIG_INVALID, "The question is empty.");
  const config = loadAppConfig(options.config);
  // Nothing to ask the endpoint about: fail before touching the data directory.
  if (!options.model && !config.baseURL) assertModelConfigured(config);
  const session = await openSession(options, config);
  try {
    const { persistence } = session;
    const threadId = options.threadId ?? randomUUID();
    const existing = persistence.threads.get(threadId);
    if (existing && existing.checkpoints > 0) {
      // Asking the same question again on a finished thread is idempotent: the stored result.
      if (existing.question?.trim() === question.trim()) {
        const found = await latest(session, options, existing);
        if ("stored" in found) return found.stored;
      }
      // One question per thread: a second question would inherit the first one's steps and limits.
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `Thread "${threadId}" already holds a run (status ${existing.status}). Continue it with \`codehop resume ${threadId}\`, ` +
          `re-run it from a checkpoint with \`codehop replay ${threadId} --checkpoint <id>\`, or choose a new --thread.`,
      );
    }
    persistence.threads.start(threadId, {
      question,
      options: runRecord(config, options),
      replaceQuestion: true,
    });
    options.onStart?.({ threadId, dbPath: persistence.dbPath });
    try {
      await prepareRun(session, options);
    } catch (err) {
      persistence.threads.fail(threadId, err instanceof Error ? err.message : String(err));
      throw err;
    }
    return await execute(session, options, threadId, { question }, { started: true });
  } finally {
    await session.close();
  }
}

function requireThread(persistence: Persistence, threadId: string, toRun = false): ThreadRecord {
  const record = persistence.threads.get(threadId);
  if (!record) {
    throw new CodehopError(
      ErrorCodes.THREAD_NOT_FOUND,
      `No thread "${threadId}" in ${persistence.dbPath}. List threads with \`codehop threads\` (and check CODEHOP_HOME).`,
    );
  }
  // Two processes advancing one thread would interleave their checkpoints.
  if (toRun && record.status === "running" && record.pid !== null && record.pid !== process.pid) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Thread "${threadId}" is being run by process ${record.pid}. Wait for it to finish (or stop it) before resuming or replaying.`,
    );
  }
  return record;
}

/**
 * Continues a thread from its last checkpoint — after a crash, a kill -9, an endpoint failure or
 * Ctrl-C. Sub-agent and tool calls that had finished are served from the call journal, not re-run.
 * A thread that already finished returns its stored result without calling the model.
 */
export async function resume(threadId: string, options: RunOptions = {}): Promise<AskResult> {
  const session = await openSession(options);
  try {
    const record = requireThread(session.persistence, threadId, true);
    let input: { question: string } | null = null;
    let state: Record<string, unknown> | undefined;
    if (record.checkpoints === 0) {
      // The run died before its first checkpoint: start it again from the recorded question.
      if (!record.question)
        throw new CodehopError(
          ErrorCodes.THREAD_NOT_FOUND,
          `Thread "${threadId}" has no checkpoints.`,
        );
      input = { question: record.question };
    } else {
      const found = await latest(session, options, record);
      if ("stored" in found) return found.stored;
      state = found.state;
    }
    await prepareRun(session, options, record.options);
    return await execute(session, options, threadId, input, { state });
  } finally {
    await session.close();
  }
}

/** Options of {@link replay}. */
export interface ReplayOptions extends RunOptions {
  /**
   * State values to change before re-running (a fork with an edited state), applied with
   * `updateState` as if written by `asNode` (default: the node that wrote the checkpoint).
   */
  update?: Record<string, unknown>;
  asNode?: string;
}

/**
 * Re-runs a thread from one of its checkpoints. LangGraph forks: new checkpoints branch off the
 * chosen one and the original history stays intact (`codehop history` shows both branches).
 * Calls recorded in the journal for the same action and arguments are served from it, which makes
 * an unedited replay deterministic; an edited state that changes a call runs it for real.
 */
export async function replay(
  threadId: string,
  checkpointId: string,
  options: ReplayOptions = {},
): Promise<AskResult> {
  const session = await openSession(options);
  try {
    const record = requireThread(session.persistence, threadId, true);
    const tuple = await session.persistence.checkpointer.getTuple({
      configurable: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: checkpointId },
    });
    if (!tuple) {
      throw new CodehopError(
        ErrorCodes.CHECKPOINT_NOT_FOUND,
        `Thread "${threadId}" has no checkpoint "${checkpointId}". List them with \`codehop history ${threadId}\`.`,
      );
    }
    await prepareRun(session, options, record.options);
    const from = options.update
      ? await forkWithUpdate(session.graph, threadId, checkpointId, options.update, options.asNode)
      : checkpointId;
    return await execute(session, options, threadId, null, { checkpointId: from });
  } finally {
    await session.close();
  }
}

/** Writes `update` as a new checkpoint forked off `checkpointId`; returns the fork's id. */
async function forkWithUpdate(
  graph: ManagerGraph,
  threadId: string,
  checkpointId: string,
  update: Record<string, unknown>,
  asNode: string | undefined,
): Promise<string> {
  // LangGraph drops unknown keys silently: name them instead.
  const known = Object.keys(
    (graph as unknown as { channels: Record<string, unknown> }).channels,
  ).filter((k) => !k.startsWith("__") && !k.includes(":"));
  const unknown = Object.keys(update).filter((k) => !known.includes(k));
  if (unknown.length) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Unknown state key(s) ${unknown.join(", ")}. The manager's state has: ${known.sort().join(", ")}.`,
    );
  }
  let forked: RunnableConfig;
  try {
    forked = await graph.updateState(
      { configurable: { thread_id: threadId, checkpoint_id: checkpointId } },
      update,
      asNode,
    );
  } catch (err) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Cannot edit the state at checkpoint ${checkpointId}: ${(err as Error).message}` +
        (asNode
          ? ` (nodes: ${Object.keys((graph as any).nodes)
              .filter((n) => !n.startsWith("__"))
              .join(", ")})`
          : ""),
      { cause: err },
    );
  }
  return forked.configurable?.checkpoint_id as string;
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
  /** Manager actions completed at this checkpoint. */
  actions: number;
  /** Short description of the latest manager step at this checkpoint. */
  summary: string;
  created_at: string;
  /** Checkpoint namespace ("" for the manager; "act:<task>|..." for nested agent runs). */
  namespace: string;
  /** Agent that wrote the checkpoint. */
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
  else if (values.question) summary = `question: ${values.question}`;
  else if (values.task) summary = `task: ${displayTask(String(values.task))}`;
  return summary.replace(/\s+/g, " ").trim();
}

/** Checkpoints of the nested agent runs of a thread (newest first within each namespace). */
async function nestedCheckpoints(
  persistence: Persistence,
  threadId: string,
  withValues?: boolean,
): Promise<CheckpointSummary[]> {
  const out: CheckpointSummary[] = [];
  for await (const tuple of persistence.checkpointer.list({
    configurable: { thread_id: threadId },
  })) {
    const ns = String(tuple.config.configurable?.checkpoint_ns ?? "");
    if (!ns) continue;
    const values = (tuple.checkpoint.channel_values ?? {}) as Record<string, any>;
    const depth = ns.split("|").filter((part) => part.includes(":")).length;
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
      agent: AGENT_NAMES[depth] ?? `agent@${depth + 1}`,
      ...(withValues ? { values } : {}),
    });
  }
  return out.sort(
    (a, b) =>
      a.namespace.localeCompare(b.namespace) || b.checkpoint_id.localeCompare(a.checkpoint_id),
  );
}

/** Lists a thread's root checkpoints, newest first (all branches). */
export async function history(
  threadId: string,
  options: Pick<RunOptions, "config" | "persistence"> & {
    withValues?: boolean;
    checkpointId?: string;
    /** Also list the nested agents' checkpoints (after the manager's; they cannot be replayed from). */
    allNamespaces?: boolean;
  } = {},
): Promise<CheckpointSummary[]> {
  return withThread(threadId, options, async (persistence) => {
    const graph = createManagerGraph({ checkpointer: persistence.checkpointer });
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
        agent: "manager",
        ...(options.withValues ? { values } : {}),
      });
    }
    if (options.allNamespaces && !options.checkpointId)
      out.push(...(await nestedCheckpoints(persistence, threadId, options.withValues)));
    if (options.checkpointId && out.length === 0) {
      throw new CodehopError(
        ErrorCodes.CHECKPOINT_NOT_FOUND,
        `Thread "${threadId}" has no checkpoint "${options.checkpointId}". List them with \`codehop history ${threadId}\`.`,
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
export async function trace(
  threadId: string,
  options: Pick<RunOptions, "config" | "persistence"> = {},
): Promise<RunProgress> {
  return withThread(threadId, options, async (persistence) => {
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

    const progress = new RunProgress();
    const seen = new Map<string, { steps: number; pending: number; done: boolean }>();
    for (const t of ordered) {
      const ns = nsOf(t);
      const path = ns ? ns.split("|") : [];
      const values = (t.checkpoint.channel_values ?? {}) as Record<string, any>;
      let state = seen.get(ns);
      if (!state) {
        const task = ns ? values.task : (values.question ?? values.task);
        if (typeof task !== "string" || !task) continue; // input checkpoint: nothing to show yet
        progress.apply([path, "tasks", { id: ns, name: "plan", input: { task } }]);
        state = { steps: 0, pending: 0, done: false };
        seen.set(ns, state);
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
  read: (persistence: Persistence) => Promise<T>,
): Promise<T> {
  const persistence =
    options.persistence ?? openPersistence(loadAppConfig(options.config).home, { mustExist: true });
  try {
    requireThread(persistence, threadId);
    return await read(persistence);
  } finally {
    if (!options.persistence) persistence.close();
  }
}
