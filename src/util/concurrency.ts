/**
 * Bounded concurrency helpers shared by the eval harness and the apps (fan-outs that must not start
 * more model calls or sub-agents than a limit allows).
 */

/**
 * Runs `worker` over `items` with at most `concurrency` in flight, in order of `items`. When
 * `signal` aborts, no new item is started; the promise resolves once the in-flight ones settle
 * (their own signal handling decides how fast). Worker errors are the worker's business: it must
 * not throw (a throw is re-raised after the in-flight items settle).
 */
export async function runPool<T>(
  items: readonly T[],
  concurrency: number,
  worker: (item: T) => Promise<void>,
  signal?: AbortSignal,
): Promise<void> {
  let next = 0;
  let failure: unknown;
  const lane = async () => {
    while (next < items.length && !signal?.aborted && failure === undefined) {
      const item = items[next++];
      try {
        await worker(item);
      } catch (err) {
        failure ??= err;
      }
    }
  };
  const lanes = Math.max(1, Math.min(Math.floor(concurrency) || 1, items.length));
  await Promise.all(Array.from({ length: lanes }, lane));
  if (failure !== undefined) throw failure;
}

/**
 * `items.map(fn)` with at most `concurrency` calls in flight; results in the order of `items`. The
 * first error is thrown once the calls in flight have settled (no new call starts after it).
 */
export async function mapPool<T, R>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T, index: number) => Promise<R>,
  signal?: AbortSignal,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  const indexed = items.map((item, index) => ({ item, index }));
  await runPool(
    indexed,
    concurrency,
    async ({ item, index }) => {
      out[index] = await fn(item, index);
    },
    signal,
  );
  signal?.throwIfAborted();
  return out;
}

/**
 * A limiter: `run(fn)` waits until fewer than `limit` runs are in flight, then runs `fn`. A waiting
 * run whose `signal` aborts leaves the queue with the signal's reason.
 */
export function createLimiter(limit: number): {
  run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T>;
  readonly active: number;
} {
  const max = Math.max(1, Math.floor(limit) || 1);
  let active = 0;
  const waiting: Array<() => void> = [];
  const acquire = (signal?: AbortSignal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      if (active < max) {
        active++;
        return resolve();
      }
      const wake = () => {
        signal?.removeEventListener("abort", onAbort);
        active++;
        resolve();
      };
      const onAbort = () => {
        const i = waiting.indexOf(wake);
        if (i !== -1) waiting.splice(i, 1);
        reject(signal!.reason);
      };
      waiting.push(wake);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  const release = () => {
    active--;
    waiting.shift()?.();
  };
  return {
    async run(fn, signal) {
      await acquire(signal);
      try {
        return await fn();
      } finally {
        release();
      }
    },
    get active() {
      return active;
    },
  };
}
