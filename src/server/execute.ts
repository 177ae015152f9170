import { Command } from "@langchain/langgraph";
import { readEnv } from "../config/env.ts";
import { runTracing } from "../tracing/index.ts";
import type { BaseStore } from "@langchain/langgraph";
import type { RunContext } from "../core/run-context.ts";
import { memoryContext, memorySettingsOf } from "../runs/memory.ts";
import { isDatabaseUnavailable } from "../persistence/postgres-database.ts";
import type { PostgresPersistence } from "../persistence/postgres.ts";
import { answerText } from "../runs/result.ts";
import type { ThreadRecord } from "../persistence/port.ts";
import { ErrorCodes } from "../errors.ts";
import type { ServedGraph } from "./graphs.ts";
import { serializeError, toJson, stateToThreadState } from "./serialize.ts";
import type { RunRecord, ServerStore, ThreadStatus } from "./store.ts";

/**
 * Executes one run of the LangGraph API on a worker: the graph streams against the shared Postgres
 * checkpointer with the call journal in its run context, its chunks become the run's stream
 * events (`values`, `updates|<namespace>` ...) in Postgres, and the thread's outcome (status,
 * values, pending interrupts) is recorded at the end.
 *
 * A run taken over from a lost worker (attempt > 1) whose thread has checkpoints past the one it
 * started from continues from the latest checkpoint (input null) instead of starting again; the
 * call journal serves every sub-agent call the lost worker finished.
 */

/** LangGraph stream modes a client may ask for ("messages-tuple" is LangGraph's "messages"). */
export const STREAM_MODES = [
  "values",
  "updates",
  "custom",
  "debug",
  "tasks",
  "checkpoints",
  "messages-tuple",
] as const;

/** How a run ended on this worker. */
export type RunEnd =
  | { status: "success" }
  | { status: "error"; error: { error: string; message: string; code?: string } }
  /** Stopped by a cancel (interrupt) or because this worker lost the run: see the abort reason. */
  | { status: "aborted"; reason: unknown };

/** Stream events waiting to be written, flushed in order (batched while a write is in flight). */
class EventWriter {
  private buffer: Array<{ event: string; data: string }> = [];
  private flushing: Promise<void> = Promise.resolve();
  private failed: unknown;

  constructor(
    private readonly store: ServerStore,
    private readonly runId: string,
  ) {}

  push(event: string, data: unknown): void {
    this.buffer.push({ event, data: toJson(data) });
    if (this.buffer.length === 1) this.flushing = this.flushing.then(() => this.flush());
  }

  private async flush(): Promise<void> {
    const batch = this.buffer;
    this.buffer = [];
    try {
      await this.store.appendEvents(this.runId, batch);
    } catch (err) {
      this.failed ??= err;
    }
  }

  /** Waits for every event pushed so far; throws if a write failed. */
  async drain(): Promise<void> {
    while (this.buffer.length) await (this.flushing = this.flushing.then(() => this.flush()));
    await this.flushing;
    if (this.failed) throw this.failed;
  }
}

/** The input a run streams: its input or command, or null to continue from the latest checkpoint. */
function runInput(run: RunRecord, continuing: boolean): unknown {
  if (continuing) return null;
  const { command, input } = run.kwargs;
  if (command && (command.resume !== undefined || command.update || command.goto)) {
    return new Command({
      resume: command.resume,
      update: command.update as Record<string, unknown> | undefined,
      goto: command.goto as string | undefined,
    });
  }
  return input ?? null;
}

/**
 * The text a thread's registry row shows for a run's input (the question, task ...): for a
 * conversation's `{ messages }`, the text of its last user message, not the input as JSON.
 */
function inputText(input: unknown): string | undefined {
  if (!input || typeof input !== "object") return undefined;
  const o = input as Record<string, unknown>;
  for (const key of ["question", "task", "topic", "input"])
    if (typeof o[key] === "string") return o[key] as string;
  const said = Array.isArray(o.messages) ? lastUserText(o.messages) : undefined;
  return said ?? JSON.stringify(input).slice(0, 500);
}

/** The text of the last user message of a `messages` input (strings, dicts, content parts). */
function lastUserText(messages: unknown[]): string | undefined {
  for (const m of [...messages].reverse()) {
    if (typeof m === "string") return m.trim() ? m.slice(0, 500) : undefined;
    if (!m || typeof m !== "object") continue;
    const { type, role, content } = m as Record<string, unknown>;
    const kind = type ?? role;
    if (kind !== undefined && kind !== "human" && kind !== "user") continue;
    const parts = Array.isArray(content) ? content : [content];
    const text = parts
      .map((p) =>
        typeof p === "string"
          ? p
          : (p as { type?: unknown; text?: unknown })?.type === "text"
            ? (p as { text?: unknown }).text
            : undefined,
      )
      .filter((t): t is string => typeof t === "string")
      .join(" ")
      .trim();
    if (text) return text.slice(0, 500);
  }
  return undefined;
}

/** An input the graph refused before running anything (a malformed message, a bad attach list). */
function refusedInput(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === ErrorCodes.INPUT_INVALID;
}

/**
 * Puts back the registry row of a thread whose run was refused its input: the conversation's
 * status and answer stay what its earlier rounds made them (the run's error is the run's).
 */
async function restoreThread(persistence: PostgresPersistence, before: ThreadRecord) {
  const { threadId } = before;
  if (before.status === "done")
    await persistence.threads.finish(threadId, before.answer ?? "", before.durationMs ?? undefined);
  else if (before.status === "failed" || before.status === "interrupted")
    await persistence.threads.fail(threadId, before.error ?? "", {
      interrupted: before.status === "interrupted",
    });
}

/** Latest root checkpoint id of a thread ("" when it has none). */
async function latestCheckpoint(persistence: PostgresPersistence, threadId: string) {
  const tuple = await persistence.checkpointer.getTuple({
    configurable: { thread_id: threadId, checkpoint_ns: "" },
  });
  return (tuple?.config.configurable?.checkpoint_id as string | undefined) ?? "";
}

/**
 * Runs `run` on `graph` and records its events and outcome. Returns how it ended; never throws
 * for the graph's own errors (they are the run's "error" status), only when the database is
 * unavailable (the caller fails the job, which is retried).
 */
export async function executeRun(options: {
  run: RunRecord;
  graph: ServedGraph;
  persistence: PostgresPersistence;
  store: ServerStore;
  /** The long-term memory store runs get as LangGraph's `config.store`. */
  memory?: BaseStore;
  signal: AbortSignal;
  workerId: string;
}): Promise<RunEnd> {
  const { run, graph, persistence, store, signal } = options;
  const threadId = run.thread_id;
  const latest = await latestCheckpoint(persistence, threadId);
  if (run.base_checkpoint_id === null) await store.setBaseCheckpoint(run.run_id, latest);
  const base = run.base_checkpoint_id ?? latest;
  // Another worker already advanced the thread on this run: continue from where it stopped.
  const continuing = run.attempt > 1 && latest !== base;
  const input = runInput(run, continuing);
  const configurable: Record<string, unknown> = {
    ...run.kwargs.config?.configurable,
    thread_id: threadId,
    run_id: run.run_id,
    assistant_id: run.assistant_id,
    graph_id: run.graph_id,
  };
  if (continuing) delete configurable.checkpoint_id;
  const forking = typeof configurable.checkpoint_id === "string";
  const userModes = run.kwargs.stream_mode;
  const modes = new Set(userModes.map((m) => (m === "messages-tuple" ? "messages" : m)));
  const events = new EventWriter(store, run.run_id);
  events.push("metadata", { run_id: run.run_id, attempt: run.attempt });
  // What the registry says before this run (a refused input puts it back).
  const before = await persistence.threads.get(threadId);
  if (!continuing && input !== null && !(input instanceof Command)) {
    await persistence.threads.start(threadId, {
      question: inputText(input),
      options: { graph: run.graph_id, server: true },
      // A conversation keeps its first message as its title; a thread without a checkpoint (a
      // first run that was refused) takes the new input's.
      replaceQuestion: !before || before.checkpoints === 0,
    });
  } else {
    await persistence.threads.start(threadId);
  }
  let end: RunEnd = { status: "success" };
  let refused = false;
  // LangSmith / OpenTelemetry when the worker's environment turns them on (src/tracing).
  const env = readEnv();
  const tracing = await runTracing(env);
  // Memory settings from the worker's environment; the agent named like the graph (its root)
  // gets the memory tools. The user of the memories is the run's authenticated user.
  const memory = memoryContext(
    memorySettingsOf(env),
    run.graph_id,
    (run.kwargs.context as RunContext | undefined)?.agentTools,
  );
  try {
    const stream = await graph.stream(input, {
      ...(tracing.handlers.length ? { callbacks: tracing.handlers } : {}),
      ...(options.memory ? { store: options.memory } : {}),
      configurable,
      // The journal makes a resumed action skip the sub-agent calls it already finished; a fork
      // (a run from an older checkpoint) gets new task ids, so calls are matched by position too.
      context: {
        ...run.kwargs.context,
        ...memory,
        journal: forking ? persistence.journal.forReplay() : persistence.journal,
        // What the input's uploaded files are read from (the server stored them at run creation).
        uploads: { get: (sha256: string) => store.getUpload(threadId, sha256) },
      },
      metadata: { run_id: run.run_id, run_attempt: run.attempt, graph_id: run.graph_id },
      streamMode: [...modes],
      subgraphs: true,
      signal,
      ...(run.kwargs.config?.recursion_limit
        ? { recursionLimit: run.kwargs.config.recursion_limit }
        : {}),
      ...(run.kwargs.interrupt_before ? { interruptBefore: run.kwargs.interrupt_before } : {}),
      ...(run.kwargs.interrupt_after ? { interruptAfter: run.kwargs.interrupt_after } : {}),
    });
    for await (const chunk of stream as AsyncIterable<[string[], string, unknown]>) {
      const [namespace, mode, data] = chunk;
      if (namespace.length && !run.kwargs.subgraphs) continue;
      const name = mode === "messages" ? "messages" : mode;
      events.push(namespace.length ? `${name}|${namespace.join("|")}` : name, data);
    }
  } catch (err) {
    if (signal.aborted) end = { status: "aborted", reason: signal.reason };
    // The database, not the run, failed (a connection that timed out, a restarting server): the
    // job is retried and the run continues from its last checkpoint instead of ending in error.
    else if (isDatabaseUnavailable(err)) throw err;
    else {
      end = { status: "error", error: serializeError(err) };
      refused = refusedInput(err);
      events.push("error", end.error);
    }
  }
  await events.drain();
  await tracing.flush();
  if (end.status === "aborted") {
    if (signal.reason === "cancel")
      await persistence.threads.fail(threadId, "cancelled", { interrupted: true });
    return end;
  }
  const state = await graph.getState({ configurable: { thread_id: threadId } });
  const thread = stateToThreadState(state);
  const interrupts: Record<string, unknown[]> = {};
  for (const task of thread.tasks)
    if (task.interrupts?.length) interrupts[task.id] = task.interrupts;
  const status: ThreadStatus =
    end.status === "error" ? "error" : state.next?.length ? "interrupted" : "idle";
  await store.setThreadOutcome(threadId, {
    status,
    values: JSON.parse(toJson(state.values ?? {})),
    interrupts,
  });
  if (end.status === "error") {
    // A refused input changed nothing of a conversation that has rounds: it keeps its status.
    if (refused && before && before.checkpoints > 0) await restoreThread(persistence, before);
    else await persistence.threads.fail(threadId, end.error.message);
  } else if (status === "interrupted")
    await persistence.threads.fail(threadId, "waiting for a resume command (interrupt)", {
      interrupted: true,
    });
  else await persistence.threads.finish(threadId, answerText((state.values as any)?.answer));
  return end;
}
