import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureDemoCorpus, startDemoModelServer } from "../src/apps/qa/demo.ts";
import { DEMO_QUESTIONS } from "../src/apps/qa/demo-trajectories.ts";
import { ask, history, replay, resume } from "../src/apps/qa/app.ts";
import { openPersistence, type SqlitePersistence } from "../src/persistence/index.ts";
import { type BenchSection, fmt, percentile } from "./lib.ts";

const RUNS = 3;

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

      const slow = await startDemoModelServer({ delayMs: 200 });
      const t0 = performance.now();
      await ask(question, {
        threadId: `${name}-slow`,
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
      const slowMs = performance.now() - t0;
      await slow.close();
      overheadRows.push([
        name,
        fmt(percentile(times, 50), 0),
        fmt(slowMs, 0),
        `${fmt((100 * percentile(times, 50)) / slowMs, 1)}%`,
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
        description:
          "Wall time with the zero-latency model (everything but the model) next to the same question with 200 ms per model reply; the ratio is the share of a run spent outside the model.",
        columns: [
          "question",
          "zero-latency wall (ms)",
          "200 ms/reply wall (ms)",
          "framework share",
        ],
        rows: overheadRows,
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
