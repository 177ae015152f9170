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
