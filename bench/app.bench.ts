import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureDemoCorpus, startDemoModelServer } from "../src/apps/qa/demo.ts";
import { DEMO_QUESTIONS } from "../src/apps/qa/demo-trajectories.ts";
import { getDefaultSandbox } from "../src/core/default-sandbox.ts";
import type { SandboxStats } from "../src/sandbox/index.ts";
import { ask, history, replay, resume } from "../src/apps/qa/app.ts";
import { openPersistence, type SqlitePersistence } from "../src/persistence/index.ts";
import { type BenchSection, fmt, percentile } from "./lib.ts";
import {
  startThreadedDemoModelServer,
  startTimedDemoModelServer,
  type ThreadedModelServer,
} from "./model-server-thread.ts";

const RUNS = 3;
/** Simulated model latency of the "framework share" runs. */
const MODEL_MS = 200;

/** Total length of the union of `[start, start + length]` intervals (ms). */
export function unionLength(starts: number[], length: number): number {
  let total = 0;
  let end = -Infinity;
  for (const start of [...starts].sort((a, b) => a - b)) {
    const stop = start + length;
    if (start >= end) total += length;
    else if (stop > end) total += stop - end;
    end = Math.max(end, stop);
  }
  return total;
}

/** Bytes of the database file once its WAL is folded into it (what the data costs on disk). */
function fileSize(persistence: SqlitePersistence): number {
  persistence.db.pragma("wal_checkpoint(TRUNCATE)");
  return statSync(persistence.dbPath).size;
}

/**
 * The reference application end to end over the demo corpus: real graphs, sandbox, corpus search
 * and SQLite checkpoints; the model is the scripted server (zero latency, then 200 ms per reply).
 */
export default async function appBench(): Promise<BenchSection[]> {
  const home = mkdtempSync(join(tmpdir(), "codehop-bench-app-"));
  const corpus = await ensureDemoCorpus(home);
  const rows: (string | number)[][] = [];
  const overheadRows: (string | number)[][] = [];
  const shares: number[] = [];
  let demoBytes = 0;
  const persistence = openPersistence(home);
  try {
    for (const [name, question] of Object.entries(DEMO_QUESTIONS)) {
      const fast = await startDemoModelServer();
      const times: number[] = [];
      let calls = 0;
      let checkpoints = 0;
      let bytes = 0;
      let journal = 0;
      for (let i = 0; i < RUNS; i++) {
        const before = fileSize(persistence);
        const threadId = `${name}-${i}`;
        const t0 = performance.now();
        const r = await ask(question, {
          threadId,
          persistence,
          config: {
            home,
            corpus,
            baseURL: fast.baseURL,
            apiKey: "bench",
            model: "scripted",
            models: {},
          },
        });
        times.push(performance.now() - t0);
        calls = r.usage.total.calls;
        checkpoints = (
          persistence.db
            .prepare(
              "SELECT count(*) AS n FROM lgi_checkpoints c JOIN lgi_namespaces n ON n.ns_id = c.ns_id WHERE n.thread_id = ?",
            )
            .get(threadId) as { n: number }
        ).n;
        journal = (await persistence.journal.entries(threadId)).length;
        bytes = fileSize(persistence) - before;
      }
      await fast.close();
      demoBytes += bytes;
      rows.push([
        name,
        calls,
        checkpoints,
        journal,
        fmt(bytes / 1024, 0),
        fmt(percentile(times, 50), 0),
        fmt(Math.min(...times), 0),
      ]);

      // The model "thinks" from the moment the server gets a request for MODEL_MS: the run's time
      // outside every such interval is the time nothing but codehop (and its HTTP client) ran.
      // The server runs on a thread of its own (as a model server is another process); one more
      // run with it on the run's own thread, as this bench measured before, for comparison.
      const startSlow = async (inProcess: boolean): Promise<ThreadedModelServer> => {
        if (!inProcess) return startThreadedDemoModelServer(MODEL_MS);
        const arrivals: number[] = [];
        const server = await startTimedDemoModelServer(MODEL_MS, () =>
          arrivals.push(performance.now()),
        );
        return { baseURL: server.baseURL, arrivals, close: () => server.close() };
      };
      const slowRun = async (threadId: string, inProcess: boolean) => {
        const slow = await startSlow(inProcess);
        const sandbox = (await getDefaultSandbox()) as unknown as SandboxStats;
        const waitedBefore = sandbox.processWaitMs;
        const t0 = performance.now();
        await ask(question, {
          threadId,
          persistence,
          config: {
            home,
            corpus,
            baseURL: slow.baseURL,
            apiKey: "bench",
            model: "scripted",
            models: {},
          },
        });
        const wall = performance.now() - t0;
        const waited = sandbox.processWaitMs - waitedBefore;
        await slow.close();
        const outside = wall - unionLength(slow.arrivals, MODEL_MS);
        return { wall, outside, waited, calls: slow.arrivals.length, share: outside / wall };
      };
      const threaded: Awaited<ReturnType<typeof slowRun>>[] = [];
      for (let i = 0; i < RUNS; i++) threaded.push(await slowRun(`${name}-slow-${i}`, false));
      const inProcess = await slowRun(`${name}-slow-in-process`, true);
      const mid = [...threaded].sort((a, b) => a.share - b.share)[Math.floor(RUNS / 2)];
      shares.push(mid.share);
      overheadRows.push([
        name,
        mid.calls,
        fmt(mid.wall, 0),
        fmt(mid.outside, 0),
        `${fmt(100 * mid.share, 1)}%`,
        threaded.map((r) => `${fmt(100 * r.share, 1)}%`).join(" / "),
        `${fmt(100 * inProcess.share, 1)}%`,
        fmt(mid.waited, 0),
        `${fmt((100 * percentile(times, 50)) / mid.wall, 1)}%`,
      ]);
    }

    // Resume of a finished thread (reads the last checkpoint) and a replay from the step before
    // the sub-agent calls (served from the journal).
    const server = await startDemoModelServer();
    const config = {
      home,
      corpus,
      baseURL: server.baseURL,
      apiKey: "bench",
      model: "scripted",
      models: {},
    };
    const resumeTimes: number[] = [];
    const replayTimes: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      let t0 = performance.now();
      await resume("towers-0", { persistence, config });
      resumeTimes.push(performance.now() - t0);
      const rowsH = await history("towers-0", { persistence });
      const from = rowsH.filter((r) => r.next.includes("act") && r.actions === 0).at(-1)!;
      t0 = performance.now();
      await replay("towers-0", from.checkpoint_id, { persistence, config });
      replayTimes.push(performance.now() - t0);
    }
    await server.close();
    return [
      {
        title: "App: demo questions end to end (scripted model, zero latency)",
        description: `Each demo question answered ${RUNS} times by the three agents over the demo corpus with the real sandbox, corpus search and SQLite checkpoints; the model is the local scripted OpenAI-compatible server answering instantly. Checkpoints count every namespace (manager and nested agents); DB growth is what one run adds to checkpoints.db (checkpoints, call journal, thread registry), measured after a WAL checkpoint (wal_checkpoint(TRUNCATE)).`,
        columns: [
          "question",
          "model calls",
          "checkpoints",
          "journal rows",
          "DB growth (KiB)",
          "wall p50 (ms)",
          "wall min (ms)",
        ],
        rows,
        verdicts: [
          `the demo's three questions write <= 150 KiB in all: ${demoBytes <= 150 * 1024 ? "MET" : "NOT MET"} (${fmt(demoBytes / 1024, 0)} KiB)`,
        ],
      },
      {
        title: "App: framework share of a run with a 200 ms model",
        description: `Each question ${RUNS} more times with the model taking ${MODEL_MS} ms per reply (after the zero-latency runs, so processes and caches are warm); the run with the median share is shown. The model thinks from the moment the server receives a request for ${MODEL_MS} ms; "outside the model" is the run's wall time outside every such interval (sub-agents called in one Promise.all think at the same time), i.e. the time the run waited on nothing but codehop, its HTTP client and the tools; framework share = outside / wall. The scripted model server runs on a worker thread of its own (bench/model-server-thread.ts), as a model server is another process: its HTTP parsing and SSE writing are not codehop's. "Server on the run's thread" is one more run with the server in the run's own event loop, as this bench measured until 2026-11-25: its work after each reply's ${MODEL_MS} ms then counts as outside the model. "Process waits" is the time actions waited for a sandbox process in that run (the default sandbox's processWaitMs). The last column is the estimate used before: the zero-latency run's wall time over this wall time, which counts work that overlaps a thinking model (process starts, checkpoint writes) as if it did not.`,
        columns: [
          "question",
          "model calls",
          `${MODEL_MS} ms/reply wall (ms)`,
          "outside the model (ms)",
          "framework share (median run)",
          `the ${RUNS} runs`,
          "server on the run's thread (1 run)",
          "process waits (ms)",
          "zero-latency wall / this wall",
        ],
        rows: overheadRows,
        verdicts: [
          `framework share of a demo run with a ${MODEL_MS} ms model <= 5%: ${Math.max(...shares) <= 0.05 ? "MET" : "NOT MET"} (${shares.map((x) => `${fmt(100 * x, 1)}%`).join(", ")})`,
        ],
      },
      {
        title: "App: resume and replay",
        description:
          "resume() of a finished thread (reads its last checkpoint, no model call) and replay() of the towers question from the checkpoint before the manager's first action (both sub-agent calls served from the call journal, one model call for the last step).",
        columns: ["operation", "p50 (ms)", "min (ms)"],
        rows: [
          [
            "resume finished thread",
            fmt(percentile(resumeTimes, 50), 1),
            fmt(Math.min(...resumeTimes), 1),
          ],
          [
            "replay from before step 1 (journal)",
            fmt(percentile(replayTimes, 50), 1),
            fmt(Math.min(...replayTimes), 1),
          ],
        ],
      },
    ];
  } finally {
    persistence.close();
    rmSync(home, { recursive: true, force: true });
  }
}
