/**
 * The demo's scripted model server on a thread of its own, for benchmarks that measure codehop's
 * share of a run's time: in production the model server is another process (usually another
 * machine), so its HTTP parsing, replies and SSE writing must not run on the event loop of the run
 * being measured. The thread posts the time each request arrived (ms since the epoch, with
 * sub-millisecond precision: performance.timeOrigin + performance.now()).
 */
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { startDemoModelServer } from "../src/apps/qa/demo.ts";
import { trajectoryResponder } from "../src/testing/scripted-openai-server.ts";
import { demoRules } from "../src/apps/qa/demo-trajectories.ts";

/** A model server running on its own thread. */
export interface ThreadedModelServer {
  baseURL: string;
  /** When each request arrived, on this thread's `performance.now()` clock. */
  arrivals: number[];
  close(): Promise<void>;
}

/**
 * Starts the demo model server (replies after `delayMs`) on this thread, calling `onArrival` as
 * each request arrives (the moment the model starts "thinking").
 */
export function startTimedDemoModelServer(delayMs: number, onArrival: () => void) {
  const replay = trajectoryResponder(demoRules());
  return startDemoModelServer({
    delayMs,
    responder: (req, ctx) => {
      onArrival();
      return replay(req, ctx);
    },
  });
}

/** Starts the demo model server (replies after `delayMs`) on a worker thread. */
export async function startThreadedDemoModelServer(delayMs: number): Promise<ThreadedModelServer> {
  // The thread runs this file through tsx's loader, registered on the thread first (a worker
  // does not inherit the loader hooks of the thread that starts it).
  const bootstrap = `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))}).then((tsx) => {
    tsx.register();
    return import(${JSON.stringify(import.meta.url)});
  });`;
  const worker = new Worker(bootstrap, { eval: true, workerData: { delayMs } });
  const arrivals: number[] = [];
  const baseURL = await new Promise<string>((resolve, reject) => {
    worker.once("error", reject);
    worker.on("message", (m: { baseURL?: string; arrivedAt?: number }) => {
      if (m.baseURL) resolve(m.baseURL);
      if (m.arrivedAt !== undefined) arrivals.push(m.arrivedAt - performance.timeOrigin);
    });
  });
  return {
    baseURL,
    arrivals,
    close: async () => {
      await worker.terminate();
    },
  };
}

if (!isMainThread && parentPort) {
  const port = parentPort;
  const server = await startTimedDemoModelServer((workerData as { delayMs: number }).delayMs, () =>
    port.postMessage({ arrivedAt: performance.timeOrigin + performance.now() }),
  );
  port.postMessage({ baseURL: server.baseURL });
}
