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
import type { RunContext } from "../core/run-context.ts";
import { cliCommand, placeholder } from "../config/cli-command.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { Persistence, ThreadRecord } from "../persistence/index.ts";
import { rootName, type RunApp, type RunOptions } from "./app.ts";
import { assertModelConfigured, loadAppConfig } from "./config.ts";
import type { StreamEvent } from "./progress.ts";
import type { AskResult } from "./result.ts";
import { shapeResult } from "./shape-result.ts";
import { runRecord } from "./thread-record.ts";
import { forkWithUpdate } from "./fork.ts";
import { requireThread } from "./require-thread.ts";
import { prepareLessons, reflect } from "./reflection.ts";
export { reflectOnScore } from "./reflection.ts";
export { requireThread };
import {
  commandContext,
  modelUsersOf,
  openSession,
  prepareRun,
  preparationFailed,
  runContextFor,
  type Session,
} from "./session.ts";

/**
 * The run lifecycle every app shares: start a thread, resume it, replay it from a checkpoint, read
 * its result. What is app-specific (graph, input, services) comes from a {@link RunApp}; what a run
 * opens and the context it gets, from its session (./session.ts); a state edit's fork, ./fork.ts.
 */

export { commandContext, openSession, type Session } from "./session.ts";

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
  // A conversation goes on with its next message (`chat --thread`), not with `resume`: the
  // round that failed on the configuration has nothing to continue.
  const next =
    configError && session.app.name === "chat"
      ? cliCommand(["chat", "--thread", threadId], context)
      : cliCommand(["resume", threadId], context);
  let hint = `The thread is saved: ${configError ? "once the configuration is fixed, " : ""}continue it with \`${next}\``;
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
  // Create the sandbox now (a warm one starts its first child), so neither delays the first action.
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
