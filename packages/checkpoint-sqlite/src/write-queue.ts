/**
 * The rows of puts and putWrites not written yet, in call order, and the promises waiting for
 * them: written together in one IMMEDIATE transaction on the next turn of the event loop (or
 * before any read), so a step's checkpoints and writes cost one commit, and the writing happens
 * while the graph waits for something else (a model, a tool) instead of before its next node.
 */
import type Database from "better-sqlite3";

/** Queued rows are written at once when this many wait (see `enqueue`). */
const MAX_QUEUED_ROWS = 32;
/** ... or when the oldest has waited this long (ms). */
const MAX_QUEUED_MS = 100;

export class WriteQueue {
  private pending: Array<() => void> = [];
  private waiting: Array<{ resolve: () => void; reject: (err: unknown) => void }> = [];
  private flushScheduled = false;
  /** When the oldest queued row was queued (performance.now()), for {@link MAX_QUEUED_MS}. */
  private queuedSince = 0;

  constructor(
    private readonly db: Database.Database,
    private readonly hooks: {
      /** After a failed commit (its rows rolled back), before the waiting promises reject. */
      rolledBack(): void;
      /** After every commit attempt: what was queued in memory is in the file, or gone. */
      settled(): void;
    },
  ) {}

  /** Queues rows to write; the promise resolves once they are committed. */
  enqueue(write: () => void): Promise<void> {
    if (!this.pending.length) this.queuedSince = performance.now();
    this.pending.push(write);
    const done = new Promise<void>((resolve, reject) => this.waiting.push({ resolve, reject }));
    // A graph whose nodes never wait on I/O runs in microtasks only, so the next turn may come
    // only when the run ends: bound what a crash can lose (and the queue) meanwhile.
    if (
      this.pending.length >= MAX_QUEUED_ROWS ||
      performance.now() - this.queuedSince >= MAX_QUEUED_MS
    ) {
      this.flush();
      return done;
    }
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
    return done;
  }

  /** Writes every queued row now, in one IMMEDIATE transaction. */
  flush(): void {
    this.flushScheduled = false;
    if (!this.pending.length) return;
    const writes = this.pending;
    const waiting = this.waiting;
    this.pending = [];
    this.waiting = [];
    try {
      // IMMEDIATE: the write lock is taken at BEGIN, where the busy timeout applies (a deferred
      // transaction that read first would fail at once when another process commits before it).
      this.db
        .transaction(() => {
          for (const write of writes) write();
        })
        .immediate();
    } catch (err) {
      this.hooks.rolledBack();
      for (const w of waiting) w.reject(err);
      return;
    } finally {
      this.hooks.settled();
    }
    for (const w of waiting) w.resolve();
  }
}
