import { randomUUID } from "node:crypto";
import type { RunnableConfig } from "@langchain/core/runnables";
import { Command, type LangGraphRunnableConfig, type StateSnapshot } from "@langchain/langgraph";
import {
  type ApprovalDecision,
  approvalResume,
  describeApproval,
  pendingApprovals,
} from "../core/approval.ts";
import { getDefaultSandbox } from "../core/default-sandbox.ts";
import { readEnv } from "../config/env.ts";
import { runTracing } from "../tracing/index.ts";
import type { MemorySettings } from "../core/memory.ts";
import type { StepRecord } from "../core/state.ts";
import { LazyStore, memoryStoreOptions, openMemoryStore } from "../memory/open.ts";
import {
  failedOutcome,
  lowScoreOutcome,
  memoryContext,
  memorySettingsOf,
  recallLessons,
  writeLesson,
} from "./memory.ts";
import type { RunContext } from "../core/run-context.ts";
import type { UsageByAgent } from "../core/usage.ts";
import { cliCommand, placeholder, type CommandContext } from "../config/cli-command.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { openPersistenceFor, type Persistence, type ThreadRecord } from "../persistence/index.ts";
import { rootName, type AppGraph, type RunApp, type RunOptions, type RunServices } from "./app.ts";
import {
  assertModelConfigured,
  detectModel,
  loadAppConfig,
  modelSettingsOf,
  persistenceLocation,
  type AppConfig,
} from "./config.ts";
import { stateValueProblem, stateValueSchemas } from "../core/state-values.ts";
import type { StreamEvent } from "./progress.ts";
import { answerText, shapeSources, shapeUsage, type AskResult } from "./result.ts";
import { runRecord } from "./thread-record.ts";
import { openRunMcp, type RunMcp } from "./mcp.ts";

/**
 * The run lifecycle every app shares: start a thread, resume it, replay it from a checkpoint, read
 * its result. What is app-specific (graph, input, services) comes from a {@link RunApp}.
 */

/** What one start / resume / replay opens, and closes at the end. */
export interface Session {
  readonly app: RunApp;
  readonly config: AppConfig;
  readonly persistence: Persistence;
  /** The app's graph over this session's checkpointer (built on first use, then reused). */
  readonly graph: AppGraph;
  /** The run's services, once prepared. */
  services?: RunServices;
  /** The run's MCP servers and their tools, once prepared (none configured: undefined). */
  mcp?: RunMcp;
  /** The long-term memory store of the session's runs (LangGraph's `config.store`), opened on first use. */
  readonly memory: LazyStore;
  /** Memory settings from the environment (undefined: off). */
  readonly memorySettings?: MemorySettings;
  /** Lessons recalled for the run's input (reflection). */
  lessons?: string[];
  close(): Promise<void>;
}

/** Opens a session of `app` (persistence under the configured home unless one is given). */
export async function openSession(
  app: RunApp,
  options: Pick<RunOptions, "config" | "persistence">,
  config: AppConfig = loadAppConfig(options.config),
  open: { mustExist?: boolean } = {},
): Promise<Session> {
  const persistence =
    options.persistence ?? (await openPersistenceFor(persistenceLocation(config), open));
  let graph: AppGraph | undefined;
  const env = readEnv();
  const memory = new LazyStore(() =>
    openMemoryStore(persistenceLocation(config), memoryStoreOptions(env)),
  );
  const session: Session = {
    app,
    config,
    persistence,
    memory,
    memorySettings: memorySettingsOf(env),
    get graph() {
      graph ??= app.graph(persistence.checkpointer);
      return graph;
    },
    async close() {
      await session.services?.close().catch(() => {});
      await session.mcp?.close().catch(() => {});
      await memory.close().catch(() => {});
      if (!options.persistence) await persistence.close();
    },
  };
  return session;
}

/** Every name a model is resolved for in `app`: its agents, then its other model callers. */
function modelUsersOf(app: RunApp): string[] {
  return [...app.team.members.map((m) => m.name), ...(app.modelUsers ?? [])];
}

/** Fills in the endpoint's first model when none is configured, then checks every agent has one. */
async function requireModel(session: Session): Promise<void> {
  const { config, app } = session;
  const agents = modelUsersOf(app);
  if (!config.model && config.baseURL) config.model = await detectModel(config, agents);
  assertModelConfigured(config, agents);
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
 * Everything a run needs before its first model call: the model the thread was started with
 * (`stored`, when none is configured now), else the endpoint's first, and the app's services.
 */
async function prepareRun(
  session: Session,
  options: RunOptions,
  stored?: Record<string, unknown>,
): Promise<void> {
  if (stored) applyStoredModel(session.config, stored);
  if (!options.model) await requireModel(session);
  session.services = await session.app.openServices(session.config, options, stored);
  session.mcp = await openRunMcp(session.config, options, session.app.team);
}

/**
 * A run that could not be prepared (no model, a bad corpus, an MCP server that does not start)
 * never started: a thread without a checkpoint is removed from the registry again (the CLI
 * records it before loading the agents), so `codehop threads` lists no 0-checkpoint "failed"
 * thread for a configuration error; asking again starts it afresh. A thread with checkpoints (a
 * conversation's earlier rounds) is marked failed, and one stopped by its user while preparing
 * (Ctrl-C) stays registered as interrupted, resumable with its recorded input.
 */
async function preparationFailed(
  session: Session,
  threadId: string,
  err: unknown,
  options: RunOptions,
): Promise<void> {
  const { persistence } = session;
  const interrupted = Boolean(options.signal?.aborted);
  const checkpoints = (await persistence.threads.get(threadId))?.checkpoints ?? 0;
  if (!interrupted && checkpoints === 0) return persistence.deleteThread(threadId);
  await persistence.threads.fail(threadId, err instanceof Error ? err.message : String(err), {
    interrupted,
  });
}

/** The run context of a run: models, journal, the app's services, the caller's extras. */
function runContextFor(session: Session, options: RunOptions, replay: boolean): RunContext {
  const { config, persistence } = session;
  const context: RunContext = {
    // A replay forks: its tasks get new ids, so recorded calls are matched by position too.
    journal: replay ? persistence.journal.forReplay() : persistence.journal,
    modelSettings: modelSettingsOf(config),
    ...session.services?.context,
    ...(session.mcp ? { agentTools: session.mcp.agentTools } : {}),
    ...(session.lessons?.length ? { lessons: session.lessons } : {}),
  };
  Object.assign(
    context,
    memoryContext(session.memorySettings, session.app.team.root, context.agentTools),
  );
  Object.assign(context, options.context);
  if (options.model) context.model = options.model;
  else {
    if (config.model) context.model = config.model;
    if (Object.keys(config.models).length) context.models = config.models;
  }
  return context;
}

/**
 * What printed next-step commands repeat for a run: the data directory and corpus it was given
 * (flags or API options), so `codehop resume ...` reaches the same thread.
 */
export function commandContext(options: Pick<RunOptions, "config">): CommandContext {
  return { home: options.config?.home, corpus: options.config?.corpus };
}

/** How a failed run is reported: the thread is saved, and the command that continues it. */
async function failRun(
  session: Session,
  options: RunOptions,
  threadId: string,
  err: unknown,
  replayOf?: string,
): Promise<never> {
  const message = err instanceof Error ? err.message : String(err);
  const interrupted = Boolean(options.signal?.aborted);
  await session.persistence.threads.fail(threadId, message, { interrupted });
  const context = commandContext(options);
  // A configuration error fails again until the configuration changes: say so first.
  const configError =
    CodehopError.isInstance(err) &&
    (err.code === ErrorCodes.CONFIG_INVALID || err.code === ErrorCodes.MCP_SERVER_FAILED);
  let hint = `The thread is saved: ${configError ? "once the configuration is fixed, " : ""}continue it with \`${cliCommand(["resume", threadId], context)}\``;
  // A replay that failed may have failed because of its edit: the checkpoint it started from is
  // unchanged, so re-running from there always works.
  if (replayOf)
    hint += `, or re-run from the checkpoint you chose with \`${cliCommand(["replay", threadId, "--checkpoint", replayOf], context)}\``;
  hint += ".";
  if (interrupted) {
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

/**
 * Streams the app graph for `input` (a new input, or null to continue from the thread's latest
 * checkpoint, or from `from.checkpointId`) and returns the shaped result read from the final
 * checkpoint. Unless `from.started` (a start marks its thread running and announces it itself),
 * the thread is marked running and announced here, with the state it continues from (`from.state`
 * when the caller has just read it).
 */
async function execute(
  session: Session,
  options: RunOptions,
  threadId: string,
  input: Record<string, unknown> | Command | null,
  from: {
    checkpointId?: string;
    started?: boolean;
    state?: Record<string, unknown>;
    /** A replay: the checkpoint the user chose (a fork with an edit starts after it). */
    replayOf?: string;
  } = {},
): Promise<AskResult> {
  const started = Date.now();
  const { persistence, graph, app } = session;
  const { checkpointId } = from;
  if (!from.started) await persistence.threads.start(threadId);
  const runConfig: RunnableConfig & { context: RunContext } = {
    configurable: { thread_id: threadId, ...(checkpointId ? { checkpoint_id: checkpointId } : {}) },
    context: runContextFor(session, options, Boolean(checkpointId)),
    recursionLimit: app.recursionLimit,
    signal: options.signal,
  };
  // LangGraph's long-term store of the run's graphs (`config.store`, `getStore()`).
  (runConfig as LangGraphRunnableConfig).store = session.memory;
  const tracing = await runTracing(readEnv());
  const callbacks = [...tracing.handlers, ...(options.callbacks ?? [])];
  if (callbacks.length) runConfig.callbacks = callbacks;
  let state = from.state;
  if (input === null && !state) {
    // Resumed or replayed: hand the checkpointed state to the caller (the live tree shows it).
    const snapshot = await graph.getState({ configurable: runConfig.configurable });
    state = snapshot.values as Record<string, unknown>;
  }
  // Start the sandbox's warm child now, so its spawn overlaps the first model call.
  void getDefaultSandbox().catch(() => {});
  if (!from.started)
    options.onStart?.({ threadId, dbPath: persistence.location, state, root: rootName(app) });
  try {
    // The live tree needs every agent's task and update events; with nobody listening, the root's
    // values are enough (what invoke streams): each event of every nested agent costs a stream
    // chunk, promises and async-context bookkeeping that nothing reads.
    const stream = options.onEvent
      ? await graph.stream(input, {
          ...runConfig,
          subgraphs: true,
          streamMode: ["updates", "tasks"],
        })
      : await graph.stream(input, { ...runConfig, streamMode: "values" });
    for await (const event of stream as AsyncIterable<StreamEvent>) options.onEvent?.(event);
  } catch (err) {
    await tracing.flush();
    return failRun(session, options, threadId, err, from.replayOf);
  }
  // The run's traces are sent before it returns (a CLI process exits right after).
  await tracing.flush();
  const snapshot = await graph.getState({ configurable: { thread_id: threadId } });
  const result = shapeResult(app, persistence, threadId, snapshot, Date.now() - started);
  await reflect(session, options, threadId, result, snapshot, runConfig.context);
  if (result.approval) await markAwaitingApproval(persistence, threadId, result);
  else await persistence.threads.finish(threadId, result.answer, result.duration_ms);
  return result;
}

/**
 * The reflection step (CODEHOP_REFLECTION=1): a run that ended without a final answer leaves a
 * lesson for later attempts at similar tasks. Its failure is a warning, never the run's.
 */
async function reflect(
  session: Session,
  options: RunOptions,
  threadId: string,
  result: AskResult,
  snapshot: StateSnapshot,
  context: RunContext,
): Promise<void> {
  const settings = session.memorySettings;
  if (!settings?.reflection) return;
  const values = (snapshot.values ?? {}) as Record<string, unknown>;
  const outcome = failedOutcome(result, values);
  if (!outcome) return;
  try {
    const task = (await session.persistence.threads.get(threadId))?.question ?? "";
    const lesson = await writeLesson({
      store: session.memory,
      settings,
      app: session.app.name,
      agent: session.app.team.root,
      context,
      threadId,
      task,
      outcome,
      steps: values.steps as StepRecord[] | undefined,
    });
    options.onWarning?.(`reflection: lesson kept for similar tasks: ${lesson}`);
  } catch (err) {
    options.onWarning?.(`reflection: no lesson written (${(err as Error).message})`);
  }
}

/**
 * The reflection step for a run scored after it finished (CODEHOP_REFLECTION=1): the eval
 * harness's score of its answer, or the verifier's share of supported claims. Below the settings'
 * `minScore` (CODEHOP_REFLECTION_MIN_SCORE, default 0.5) the root agent's model writes a lesson
 * from the task, the score and the trajectory, recalled for similar tasks like a failed run's. A
 * run that failed already left its lesson; reflection off, a paused or unknown thread: nothing.
 * Returns the lesson written; its failure is a warning (`onWarning`), never the caller's.
 */
export async function reflectOnScore(
  app: RunApp,
  threadId: string,
  score: { value: number; by: string },
  options: RunOptions = {},
): Promise<string | undefined> {
  // Reflection off (the usual case): no session is opened.
  if (!memorySettingsOf(readEnv())?.reflection) return undefined;
  const session = await openSession(app, options);
  try {
    const settings = session.memorySettings;
    if (!settings?.reflection) return undefined;
    const record = await session.persistence.threads.get(threadId);
    if (!record) return undefined;
    const snapshot = await session.graph.getState({ configurable: { thread_id: threadId } });
    const values = (snapshot.values ?? {}) as Record<string, unknown>;
    const result = shapeResult(app, session.persistence, threadId, snapshot, 0);
    if (result.approval || failedOutcome(result, values)) return undefined;
    const outcome = lowScoreOutcome(settings, score.value, score.by, result.answer);
    if (!outcome) return undefined;
    try {
      const lesson = await writeLesson({
        store: session.memory,
        settings,
        app: app.name,
        agent: app.team.root,
        context: runContextFor(session, options, false),
        threadId,
        task: record.question ?? "",
        outcome,
        steps: values.steps as StepRecord[] | undefined,
      });
      options.onWarning?.(`reflection: lesson kept for similar tasks: ${lesson}`);
      return lesson;
    } catch (err) {
      options.onWarning?.(`reflection: no lesson written (${(err as Error).message})`);
      return undefined;
    }
  } finally {
    await session.close();
  }
}

/** Lessons of earlier attempts at tasks like `text`, for the run about to start. */
async function prepareLessons(session: Session, options: RunOptions, text: string): Promise<void> {
  const settings = session.memorySettings;
  if (!settings?.reflection) return;
  try {
    session.lessons = await recallLessons(session.memory, settings, session.app.name, text);
  } catch (err) {
    options.onWarning?.(`reflection: lessons not recalled (${(err as Error).message})`);
  }
}

/** A thread paused for an approval stays resumable: recorded as interrupted, saying for what. */
async function markAwaitingApproval(
  persistence: Persistence,
  threadId: string,
  result: AskResult,
): Promise<void> {
  await persistence.threads.fail(
    threadId,
    `Waiting for approval ${result.approval!.approvalId} (${describeApproval(result.approval!)}).`,
    { interrupted: true },
  );
}

/** An {@link AskResult} from a thread's latest state snapshot (with the app's own fields). */
function shapeResult(
  app: RunApp,
  persistence: Persistence,
  threadId: string,
  snapshot: StateSnapshot,
  durationMs: number,
): AskResult {
  const values = (snapshot.values ?? {}) as Record<string, unknown>;
  const approval = pendingApprovals(snapshot)[0] ?? null;
  return {
    answer: answerText(values.answer),
    thread_id: threadId,
    status: approval
      ? "awaiting_approval"
      : typeof values.status === "string"
        ? values.status
        : snapshot.next.length
          ? "interrupted"
          : "unknown",
    approval,
    sources: shapeSources(values.sources),
    usage: shapeUsage(values.usage as UsageByAgent | undefined),
    steps: typeof values.stepCount === "number" ? values.stepCount : 0,
    checkpoint_id: (snapshot.config?.configurable?.checkpoint_id as string | undefined) ?? null,
    checkpoint_db: persistence.location,
    duration_ms: durationMs,
    ...app.shapeResult?.(snapshot),
  };
}

/** The result stored in a thread's latest checkpoint. */
export async function readRunResult(
  app: RunApp,
  persistence: Persistence,
  threadId: string,
  started?: number,
): Promise<AskResult> {
  const snapshot = await app
    .graph(persistence.checkpointer)
    .getState({ configurable: { thread_id: threadId } });
  // A stored result reports how long the run that finished it took.
  const durationMs =
    started !== undefined
      ? Date.now() - started
      : ((await persistence.threads.get(threadId))?.durationMs ?? 0);
  return shapeResult(app, persistence, threadId, snapshot, durationMs);
}

/**
 * The latest state of a thread that has checkpoints: `stored` is its result when the run already
 * finished (nothing runs next), read from this one snapshot; else `state` is where it continues.
 */
async function latest(
  session: Session,
  options: RunOptions,
  record: ThreadRecord,
): Promise<{ stored: AskResult } | { state: Record<string, unknown>; snapshot: StateSnapshot }> {
  const { persistence } = session;
  const snapshot = await session.graph.getState({ configurable: { thread_id: record.threadId } });
  if (snapshot.next.length > 0)
    return { state: snapshot.values as Record<string, unknown>, snapshot };
  options.onStart?.({
    threadId: record.threadId,
    dbPath: persistence.location,
    root: rootName(session.app),
  });
  // A stored result reports how long the run that finished it took.
  const stored = shapeResult(
    session.app,
    persistence,
    record.threadId,
    snapshot,
    record.durationMs ?? 0,
  );
  if (record.status !== "done") await persistence.threads.finish(record.threadId, stored.answer);
  return { stored };
}

/**
 * The session of a new input (start, turn). With no endpoint to ask for a model, a missing model
 * fails here, before the data directory is touched.
 */
async function openForInput(app: RunApp, options: RunOptions): Promise<Session> {
  const config = loadAppConfig(options.config);
  // Nothing to ask the endpoint about: fail before touching the data directory.
  if (!options.model && !config.baseURL) assertModelConfigured(config, modelUsersOf(app));
  return openSession(app, options, config);
}

/** Options of {@link startRun}. */
export interface StartOptions extends RunOptions {
  /**
   * Thread id to use (default: a new UUID). A thread holds one input: starting the same input
   * again on a finished thread returns its stored result; any other reuse of a thread with
   * checkpoints is rejected.
   */
  threadId?: string;
  /**
   * More graph input besides the text (e.g. `{ maxQuestions: 3 }`), merged over `app.input(text)`
   * and recorded with the thread, so a run that dies before its first checkpoint restarts with it.
   */
  input?: Record<string, unknown>;
}

/**
 * Starts `app` on `text` (its input, e.g. the question), checkpointing every step. The thread (input,
 * app, services, model names) is recorded before anything slow happens, so a run killed at any
 * point can be continued with {@link resumeRun}.
 */
export async function startRun(
  app: RunApp,
  text: string,
  options: StartOptions = {},
): Promise<AskResult> {
  if (!text.trim()) throw new CodehopError(ErrorCodes.CONFIG_INVALID, "The input is empty.");
  const session = await openForInput(app, options);
  const { config } = session;
  try {
    const { persistence } = session;
    const threadId = options.threadId ?? randomUUID();
    const existing = await persistence.threads.get(threadId);
    if (existing && existing.checkpoints > 0) {
      // Starting the same input again on a finished thread is idempotent: the stored result.
      if (existing.question?.trim() === text.trim()) {
        const found = await latest(session, options, existing);
        if ("stored" in found) return found.stored;
      }
      // One input per thread: a second one would inherit the first one's steps and limits.
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `Thread "${threadId}" already holds a run (status ${existing.status}). Continue it with \`${cliCommand(["resume", threadId], commandContext(options))}\`, ` +
          `re-run it from a checkpoint with \`${cliCommand(["replay", threadId, "--checkpoint", placeholder("id")], commandContext(options))}\`, or choose a new --thread.`,
      );
    }
    await persistence.threads.start(threadId, {
      question: text,
      options: {
        ...runRecord(app, config, options),
        ...(options.input ? { input: options.input } : {}),
      },
      replaceQuestion: true,
    });
    options.onStart?.({ threadId, dbPath: persistence.location, root: rootName(app) });
    try {
      await prepareRun(session, options);
    } catch (err) {
      await preparationFailed(session, threadId, err, options);
      throw err;
    }
    await prepareLessons(session, options, text);
    return await execute(
      session,
      options,
      threadId,
      { ...app.input(text), ...options.input },
      { started: true },
    );
  } finally {
    await session.close();
  }
}

/** Options of {@link runTurn}: those of a start (the thread id, when it is not a new one). */
export type TurnOptions = StartOptions;

/**
 * Runs one more input on a thread of a multi-turn app (a conversation), or starts the thread when
 * it has none. The registry keeps the thread's first input as its question and its latest reply
 * as its answer; a thread of another app, or one another live process is running, is refused.
 * Like {@link startRun}, it records the thread before anything slow happens and leaves a stopped
 * or failed round resumable.
 */
export async function runTurn(
  app: RunApp,
  text: string,
  input: Record<string, unknown> | Command,
  options: TurnOptions = {},
): Promise<AskResult> {
  if (!app.multiTurn) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `The ${app.name} app takes one input per thread; start it with startRun.`,
    );
  }
  const session = await openForInput(app, options);
  const { config } = session;
  try {
    const { persistence } = session;
    const threadId = options.threadId ?? randomUUID();
    const existing = await persistence.threads.get(threadId);
    if (existing) {
      await requireThread(persistence, threadId, true);
      // Threads without a registry row (made through the graph API) name no app.
      const owner = existing.status === "unknown" ? app.name : (existing.options.app ?? "qa");
      if (owner !== app.name) {
        throw new CodehopError(
          ErrorCodes.CONFIG_INVALID,
          `Thread "${threadId}" belongs to the ${String(owner)} app, not ${app.name}; choose another thread.`,
        );
      }
    }
    await persistence.threads.start(threadId, {
      ...(text.trim() ? { question: text } : {}),
      options: runRecord(app, config, options),
    });
    options.onStart?.({ threadId, dbPath: persistence.location, root: rootName(app) });
    try {
      await prepareRun(session, options, existing?.options);
    } catch (err) {
      await preparationFailed(session, threadId, err, options);
      throw err;
    }
    if (text.trim()) await prepareLessons(session, options, text);
    return await execute(session, options, threadId, input, { started: true });
  } finally {
    await session.close();
  }
}

/**
 * The registry record of a thread, or CODEHOP_THREAD_NOT_FOUND. With `toRun`, a thread another
 * live process is running is refused (two processes advancing one thread would interleave).
 */
export async function requireThread(
  persistence: Persistence,
  threadId: string,
  toRun = false,
  context: CommandContext = {},
): Promise<ThreadRecord> {
  const record = await persistence.threads.get(threadId);
  if (!record) {
    throw new CodehopError(
      ErrorCodes.THREAD_NOT_FOUND,
      `No thread "${threadId}" in ${persistence.location}. List threads with \`${cliCommand(["threads"], { home: context.home })}\`${context.home ? "" : " (and check CODEHOP_HOME)"}.`,
    );
  }
  if (toRun && record.status === "running" && record.pid !== null && record.pid !== process.pid) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Thread "${threadId}" is being run by process ${record.pid}. Wait for it to finish (or stop it) before resuming or replaying.`,
    );
  }
  return record;
}

/** Options of {@link resumeRun}. */
export interface ResumeOptions extends RunOptions {
  /**
   * The decision on the approval the thread waits for (`result.approval` of the run that paused):
   * `{ decision: "approve" }`, `{ decision: "reject", reason }` or `{ decision: "edit", args }`;
   * `approvalId` defaults to the pending approval's. Without it, a thread waiting for an approval
   * returns its result (status "awaiting_approval") and nothing runs.
   */
  approval?: ApprovalDecision;
}

/**
 * Continues a thread from its last checkpoint — after a crash, a kill -9, an endpoint failure or
 * Ctrl-C, or with the decision on the approval it waits for. Sub-agent and tool calls that had
 * finished are served from the call journal, not re-run. A thread that already finished returns its
 * stored result without calling the model.
 */
export async function resumeRun(
  app: RunApp,
  threadId: string,
  options: ResumeOptions = {},
): Promise<AskResult> {
  const session = await openSession(app, options);
  try {
    const record = await requireThread(
      session.persistence,
      threadId,
      true,
      commandContext(options),
    );
    let input: Record<string, unknown> | Command | null = null;
    let state: Record<string, unknown> | undefined;
    if (options.approval && record.checkpoints === 0)
      approvalResume(options.approval, [], threadId);
    if (record.checkpoints === 0) {
      // The run died before its first checkpoint: start it again from the recorded input.
      if (!record.question)
        throw new CodehopError(
          ErrorCodes.THREAD_NOT_FOUND,
          `Thread "${threadId}" has no checkpoints.`,
        );
      const recorded = record.options.input;
      input = {
        ...app.input(record.question),
        ...(recorded && typeof recorded === "object" ? (recorded as Record<string, unknown>) : {}),
      };
    } else {
      const found = await latest(session, options, record);
      if ("stored" in found) {
        if (options.approval) approvalResume(options.approval, [], threadId);
        return found.stored;
      }
      state = found.state;
      const pending = pendingApprovals(found.snapshot);
      if (options.approval) {
        input = new Command({ resume: approvalResume(options.approval, pending, threadId) });
      } else if (pending.length) {
        // Waiting for a decision: running now would only ask again.
        options.onStart?.({
          threadId,
          dbPath: session.persistence.location,
          state,
          root: rootName(session.app),
        });
        const result = shapeResult(session.app, session.persistence, threadId, found.snapshot, 0);
        await markAwaitingApproval(session.persistence, threadId, result);
        return result;
      }
    }
    await prepareRun(session, options, record.options);
    return await execute(session, options, threadId, input, { state });
  } finally {
    await session.close();
  }
}

/** Options of {@link replayRun}. */
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
export async function replayRun(
  app: RunApp,
  threadId: string,
  checkpointId: string,
  options: ReplayOptions = {},
): Promise<AskResult> {
  const session = await openSession(app, options);
  try {
    const record = await requireThread(
      session.persistence,
      threadId,
      true,
      commandContext(options),
    );
    const tuple = await session.persistence.checkpointer.getTuple({
      configurable: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: checkpointId },
    });
    if (!tuple) {
      throw new CodehopError(
        ErrorCodes.CHECKPOINT_NOT_FOUND,
        `Thread "${threadId}" has no checkpoint "${checkpointId}". List them with \`${cliCommand(["history", threadId], { home: options.config?.home })}\`.`,
      );
    }
    await prepareRun(session, options, record.options);
    const from = options.update
      ? await forkWithUpdate(
          session.graph,
          threadId,
          checkpointId,
          options.update,
          options.asNode,
          {
            home: options.config?.home,
          },
        )
      : checkpointId;
    return await execute(session, options, threadId, null, {
      checkpointId: from,
      replayOf: checkpointId,
    });
  } finally {
    await session.close();
  }
}

/** Writes `update` as a new checkpoint forked off `checkpointId`; returns the fork's id. */
async function forkWithUpdate(
  graph: AppGraph,
  threadId: string,
  checkpointId: string,
  update: Record<string, unknown>,
  asNode: string | undefined,
  context: CommandContext,
): Promise<string> {
  // LangGraph drops unknown keys silently: name them instead.
  const known = Object.keys(
    (graph as unknown as { channels: Record<string, unknown> }).channels,
  ).filter((k) => !k.startsWith("__") && !k.includes(":"));
  const unknown = Object.keys(update).filter((k) => !known.includes(k));
  if (unknown.length) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Unknown state key(s) ${unknown.join(", ")}. The state has: ${known.sort().join(", ")}.`,
    );
  }
  // A value of the wrong type would only fail inside the forked run, and every resume of the fork
  // the same way: check it against its channel first, so nothing is written.
  const schemas = stateValueSchemas(graph);
  const problems = Object.entries(update).flatMap(([key, value]) => {
    const schema = schemas?.[key];
    const problem = schema && stateValueProblem(schema, value);
    return problem
      ? [`"${key}" = ${short(JSON.stringify(value) ?? String(value), 80)}: ${problem}`]
      : [];
  });
  if (problems.length) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Cannot edit the state at checkpoint ${checkpointId}: ${problems.join("; ")}. ` +
        `Nothing was written. Values are JSON: a string in quotes ('"text"'), numbers and true/false without. ` +
        `See the current values with \`${cliCommand(["history", threadId, "--checkpoint", checkpointId], context)}\`.`,
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

function short(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
