import type { BaseCheckpointSaver } from "@langchain/langgraph";
import type { JournalRowStore, ReplayableJournal } from "../core/journal.ts";

/**
 * The persistence port: everything codehop stores about runs, behind one interface that each
 * adapter implements (SQLite in src/persistence/sqlite/, the default; Postgres for servers with
 * workers). Nothing outside an adapter knows which database it is. Every adapter passes the same
 * conformance suite (test/persistence/conformance.ts).
 */
export interface Persistence {
  /** Which adapter: "sqlite", "postgres" ... */
  readonly kind: string;
  /** Where the data lives, for messages: a file path, or a URL without its password. */
  readonly location: string;
  /** LangGraph checkpointer for the app's graphs. */
  readonly checkpointer: BaseCheckpointSaver;
  /** The call journal given to runs (its semantics are the core's, over {@link journalRows}). */
  readonly journal: ReplayableJournal;
  /** The adapter's journal rows. */
  readonly journalRows: JournalRowStore;
  /** Threads started by the apps. */
  readonly threads: ThreadStore;
  /** Deletes everything of a thread: checkpoints (all namespaces), journal rows, registry row. */
  deleteThread(threadId: string): Promise<void>;
  /** Closes the connection(s); idempotent. */
  close(): Promise<void> | void;
}

/**
 * Lifecycle of a thread as seen by the apps. "interrupted": the run was stopped (Ctrl-C), or it is
 * marked running but whoever ran it is gone (kill -9, crash, power loss; a dead worker's lease).
 */
export type ThreadStatus = "running" | "done" | "failed" | "interrupted";

/** What the apps remember about a thread besides its checkpoints. */
export interface ThreadRecord {
  threadId: string;
  /** The input text of the thread's run (the question, topic ...). */
  question: string | null;
  status: ThreadStatus | "unknown";
  answer: string | null;
  error: string | null;
  /** Run options needed to resume the thread the same way (app, corpus, model names ...). */
  options: Record<string, unknown>;
  /** Thread and checkpoint this one was forked from (replay into a new thread). */
  forkedFrom: { threadId: string; checkpointId: string } | null;
  createdAt: string | null;
  updatedAt: string | null;
  /** Root-graph checkpoints stored for the thread (0 if the run died before the first one). */
  checkpoints: number;
  /** Process on this host that last started a run on the thread (null elsewhere / graph-API threads). */
  pid: number | null;
  /** How long the run that finished the thread took (null until it finishes). */
  durationMs: number | null;
}

/** What a run records when it starts on a thread. */
export interface ThreadStart {
  question?: string;
  options?: Record<string, unknown>;
  forkedFrom?: { threadId: string; checkpointId: string };
  /** A new question on a thread that never checkpointed replaces the recorded one. */
  replaceQuestion?: boolean;
}

/**
 * Registry of threads. Threads created directly through the graph API (no registry row) are still
 * listed, from the checkpoints.
 */
export interface ThreadStore {
  /** Records that a run started (keeps the original question and created time on re-runs). */
  start(threadId: string, init?: ThreadStart): Promise<void>;
  /** Marks a run finished with its answer (and how long the finishing run took, when known). */
  finish(threadId: string, answer: string, durationMs?: number): Promise<void>;
  /** Marks a run failed, or interrupted by its user (it stays resumable from its last checkpoint). */
  fail(threadId: string, error: string, options?: { interrupted?: boolean }): Promise<void>;
  /** One thread, or undefined if neither a registry row nor a checkpoint exists. */
  get(threadId: string): Promise<ThreadRecord | undefined>;
  /** All threads, most recently updated first. */
  list(): Promise<ThreadRecord[]>;
}
