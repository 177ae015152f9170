/**
 * The scripted model of the serving benchmarks, on a thread of its own (a model server is another
 * process, usually another machine: its HTTP work must not run on the event loop that submits and
 * times the runs). Each run's task names its number ("Bench run <i>"); the model answers after
 * `delayMs` with two actions: print i*i, then final_answer(i*i). The thread posts when each request
 * arrived (ms since the epoch, sub-millisecond: performance.timeOrigin + performance.now()), so
 * the bench can time "run created -> first model request" per run.
 */
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import {
  observationCount,
  type Responder,
  ScriptedOpenAIServer,
} from "../src/testing/scripted-openai-server.ts";

const action = (thought: string, code: string) =>
  `Thought: ${thought}\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;

/** The task of bench run `i` (what the model recognises). */
export const benchTask = (i: number) => `Bench run ${i}: print ${i} squared, then answer it.`;

/**
 * The bench model's replies: code_agent squares run i's number in two steps (2 model calls, 2
 * sandbox actions). `onArrival` sees each request's run number and step as it arrives.
 */
export function benchResponder(
  delayMs: number,
  onArrival?: (run: number, step: number) => void,
): Responder {
  return (req) => {
    const task = req.messages.find((m) => m.role === "user")?.content ?? "";
    const i = Number(/Bench run (\d+)/.exec(task)?.[1]);
    if (!Number.isFinite(i)) return { status: 400, body: "not a bench request" };
    const step = observationCount(req);
    onArrival?.(i, step);
    return {
      delayMs,
      content:
        step === 0
          ? action("I compute the square in code.", `console.log(${i} * ${i});`)
          : action("The square is printed above.", `final_answer(String(${i} * ${i}));`),
    };
  };
}

/** The bench model server running on a worker thread. */
export interface ServingModel {
  /** Base URL on loopback. */
  baseURL: string;
  /** Port it listens on (every interface, so network namespaces reach it too). */
  port: number;
  /** When run i's first request arrived (epoch ms). */
  firstRequest: Map<number, number>;
  /** Requests received so far. */
  requests(): number;
  close(): Promise<void>;
}

/** Starts the bench model (replies after `delayMs`) on a thread, listening on every interface. */
export async function startServingModel(delayMs: number): Promise<ServingModel> {
  const bootstrap = `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))}).then((tsx) => {
    tsx.register();
    return import(${JSON.stringify(import.meta.url)});
  });`;
  const worker = new Worker(bootstrap, { eval: true, workerData: { delayMs } });
  const firstRequest = new Map<number, number>();
  let requests = 0;
  const started = await new Promise<{ baseURL: string; port: number }>((resolve, reject) => {
    worker.once("error", reject);
    worker.on("message", (m: { baseURL?: string; port?: number; run?: number; at?: number }) => {
      if (m.baseURL) resolve({ baseURL: m.baseURL, port: m.port! });
      if (m.run !== undefined) {
        requests++;
        if (!firstRequest.has(m.run)) firstRequest.set(m.run, m.at!);
      }
    });
  });
  return {
    ...started,
    firstRequest,
    requests: () => requests,
    close: async () => {
      await worker.terminate();
    },
  };
}

if (!isMainThread && parentPort && (workerData as { delayMs?: number })?.delayMs !== undefined) {
  const port = parentPort;
  const server = await ScriptedOpenAIServer.start({
    host: "0.0.0.0",
    responder: benchResponder((workerData as { delayMs: number }).delayMs, (run) =>
      port.postMessage({ run, at: performance.timeOrigin + performance.now() }),
    ),
  });
  port.postMessage({ baseURL: server.baseURL, port: Number(new URL(server.baseURL).port) });
}
