import pg from "pg";
import {
  EVENTS_CHANNEL,
  RUN_ENDED_CHANNEL,
  type RunEvent,
  type ServerStore,
  TERMINAL_RUN_STATUSES,
} from "./store.ts";

/**
 * A run's stream as a server process reads it: the events workers wrote to Postgres, from any
 * point (`Last-Event-ID`), woken by NOTIFY (one LISTEN connection per server process) with a poll
 * as a safety net, until the run has ended and every event has been read. `runs.join` / `wait`
 * read no events until the run has ended: they wait on the run-ended channel, then read the last
 * result event.
 */
export class RunEventReader {
  /** Readers waiting for a run's next events, by run id. */
  private readonly waiting = new Map<string, Set<() => void>>();
  /** Readers waiting for a run's end, by run id. */
  private readonly ending = new Map<string, Set<() => void>>();
  private listener?: pg.Client;

  constructor(
    private readonly store: ServerStore,
    private readonly url: string,
  ) {}

  /** Connects the LISTEN client (reconnecting if it drops). */
  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    client.on("error", () => {
      // Readers fall back to polling until the listener is back (woken now: a notification may
      // have been lost with the connection).
      this.listener = undefined;
      this.wakeAll();
      setTimeout(() => void this.start().catch(() => {}), 1000).unref();
    });
    await client.connect();
    await client.query(`LISTEN ${EVENTS_CHANNEL}; LISTEN ${RUN_ENDED_CHANNEL}`);
    client.on("notification", (n) => {
      if (!n.payload) return;
      wake(n.channel === RUN_ENDED_CHANNEL ? this.ending : this.waiting, n.payload);
    });
    this.listener = client;
  }

  async stop(): Promise<void> {
    const client = this.listener;
    this.listener = undefined;
    await client?.end().catch(() => {});
    this.wakeAll();
  }

  private wakeAll(): void {
    for (const waiters of [this.waiting, this.ending])
      for (const id of [...waiters.keys()]) wake(waiters, id);
  }

  /**
   * A wait for the run's next notification in `waiters`, armed now (before the query that decides
   * to wait, so a notification sent meanwhile is not missed): `wait(ms)` resolves on it (at once
   * if it came already), after `ms`, or when `signal` aborts; `cancel()` drops it (always called).
   */
  private arm(waiters: Map<string, Set<() => void>>, runId: string, signal?: AbortSignal) {
    let set = waiters.get(runId);
    if (!set) waiters.set(runId, (set = new Set()));
    let notified = false;
    let wakeUp: (() => void) | undefined;
    const notify = () => {
      notified = true;
      wakeUp?.();
    };
    set.add(notify);
    return {
      get notified() {
        return notified;
      },
      wait: (ms: number) =>
        new Promise<void>((resolve) => {
          if (notified || signal?.aborted) return resolve();
          const done = () => {
            clearTimeout(timer);
            signal?.removeEventListener("abort", done);
            wakeUp = undefined;
            resolve();
          };
          wakeUp = done;
          const timer = setTimeout(done, ms);
          signal?.addEventListener("abort", done, { once: true });
        }),
      cancel: () => {
        set.delete(notify);
        if (!set.size && waiters.get(runId) === set) waiters.delete(runId);
      },
    };
  }

  /**
   * The run's events after event id `after` ("0": from the start), as they come, ending once the
   * run has ended and its last event was read (or when `signal` aborts). `onIdle` is called while
   * nothing happens (every `idleMs`), for keep-alives.
   */
  async *events(
    runId: string,
    options: { after?: string; signal?: AbortSignal; idleMs?: number; onIdle?: () => void } = {},
  ): AsyncGenerator<RunEvent> {
    let last = options.after ?? "0";
    const idleMs = options.idleMs ?? 5000;
    let idleSince = Date.now();
    while (!options.signal?.aborted) {
      const next = this.arm(this.waiting, runId, options.signal);
      try {
        const batch = await this.store.eventsAfter(runId, last);
        for (const e of batch) {
          last = e.id;
          yield e;
        }
        if (batch.length) {
          idleSince = Date.now();
          continue;
        }
        const run = await this.store.getRun(runId);
        if (!run || TERMINAL_RUN_STATUSES.includes(run.status)) {
          // Events written just before the run ended.
          for (const e of await this.store.eventsAfter(runId, last)) yield e;
          return;
        }
        if (Date.now() - idleSince >= idleMs) {
          options.onIdle?.();
          idleSince = Date.now();
        }
        // NOTIFY wakes the reader; the timeout is only a safety net (every waiting client polls
        // at it: 500 clients joined on runs made 500 queries/s at 2 s).
        await next.wait(this.listener ? idleMs : 250);
      } finally {
        next.cancel();
      }
    }
  }

  /**
   * What `runs.wait` / `runs.join` return: the run's last root `values` event, or
   * `{ __error__ }` when it failed, or null (the caller then answers with the thread's values).
   */
  async result(runId: string, signal?: AbortSignal, onIdle?: () => void): Promise<unknown | null> {
    const idleMs = 5000;
    while (!signal?.aborted) {
      const ended = this.arm(this.ending, runId, signal);
      try {
        const run = await this.store.getRun(runId);
        if (!run || TERMINAL_RUN_STATUSES.includes(run.status)) {
          // The worker wrote every event before it ended the run.
          const last = await this.store.lastEvent(runId, ["values", "error"]);
          if (!last) return null;
          const data = JSON.parse(last.data);
          return last.event === "error" ? { __error__: data } : data;
        }
        // The run-ended NOTIFY wakes the reader. Meanwhile a keep-alive every `idleMs`, and the
        // run is read again only every RESULT_RECHECK_MS (a notification lost some other way
        // than with the listener's connection, which wakes every reader when it drops): 500
        // joined runs re-read every 5 s were most of a served run's queries.
        const since = Date.now();
        const recheck = this.listener ? RESULT_RECHECK_MS : 250;
        while (!ended.notified && !signal?.aborted && Date.now() - since < recheck) {
          await ended.wait(Math.min(idleMs, recheck - (Date.now() - since)));
          if (!ended.notified && Date.now() - since >= idleMs) onIdle?.();
        }
      } finally {
        ended.cancel();
      }
    }
    return null;
  }
}

/** How often a joined run is read again while no run-ended notification came (ms). */
const RESULT_RECHECK_MS = 30_000;

/** Wakes every reader of `runId` waiting in `waiters`. */
function wake(waiters: Map<string, Set<() => void>>, runId: string): void {
  const set = waiters.get(runId);
  if (!set) return;
  waiters.delete(runId);
  for (const resolve of set) resolve();
}
