import pg from "pg";
import { EVENTS_CHANNEL, type RunEvent, type ServerStore, TERMINAL_RUN_STATUSES } from "./store.ts";

/**
 * A run's stream as a server process reads it: the events workers wrote to Postgres, from any
 * point (`Last-Event-ID`), woken by NOTIFY (one LISTEN connection per server process) with a poll
 * as a safety net, until the run has ended and every event has been read.
 */
export class RunEventReader {
  private readonly waiting = new Map<string, Set<() => void>>();
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
      for (const id of [...this.waiting.keys()]) this.wake(id);
      setTimeout(() => void this.start().catch(() => {}), 1000).unref();
    });
    await client.connect();
    await client.query(`LISTEN ${EVENTS_CHANNEL}`);
    client.on("notification", (n) => {
      if (n.payload) this.wake(n.payload);
    });
    this.listener = client;
  }

  async stop(): Promise<void> {
    const client = this.listener;
    this.listener = undefined;
    await client?.end().catch(() => {});
    for (const id of [...this.waiting.keys()]) this.wake(id);
  }

  private wake(runId: string): void {
    const set = this.waiting.get(runId);
    if (!set) return;
    this.waiting.delete(runId);
    for (const resolve of set) resolve();
  }

  /** Resolves on the run's next notification, after `ms`, or when `signal` aborts. */
  private next(runId: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      let set = this.waiting.get(runId);
      if (!set) this.waiting.set(runId, (set = new Set()));
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        set!.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener("abort", done, { once: true });
      set.add(done);
    });
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
      // NOTIFY wakes the reader; the timeout is only a safety net (every waiting client polls at
      // it: 500 clients joined on runs made 500 queries/s at 2 s).
      await this.next(runId, this.listener ? idleMs : 250, options.signal);
    }
  }

  /**
   * What `runs.wait` / `runs.join` return: the run's last root `values` event, or
   * `{ __error__ }` when it failed, or null (the caller then answers with the thread's values).
   */
  async result(runId: string, signal?: AbortSignal, onIdle?: () => void): Promise<unknown | null> {
    let last: RunEvent | undefined;
    for await (const e of this.events(runId, { signal, onIdle })) {
      if (e.event === "values" || e.event === "error") last = e;
    }
    if (!last) return null;
    const data = JSON.parse(last.data);
    return last.event === "error" ? { __error__: data } : data;
  }
}
