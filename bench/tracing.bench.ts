import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ask } from "../src/apps/qa/app.ts";
import { ensureDemoCorpus, startDemoModelServer } from "../src/apps/qa/demo.ts";
import { DEMO_QUESTIONS } from "../src/apps/qa/demo-trajectories.ts";
import { traceToolRun } from "../src/core/tool-run.ts";
import { openPersistence } from "../src/persistence/index.ts";
import { LangSmithRecorder, OtlpReceiver } from "../src/testing/trace-receivers.ts";
import { type BenchSection, fmt, percentile } from "./lib.ts";

const REPEATS = 7;

/** The variables of each variant (set in process.env for its runs, as a user would). */
function variants(langsmith: string, otlp: string): Record<string, Record<string, string>> {
  return {
    off: {},
    langsmith: { LANGSMITH_TRACING: "true", LANGSMITH_ENDPOINT: langsmith, LANGSMITH_API_KEY: "b" },
    otel: { CODEHOP_OTEL: "1", OTEL_EXPORTER_OTLP_ENDPOINT: otlp },
  };
}

const VARIABLES = [
  "LANGSMITH_TRACING",
  "LANGSMITH_ENDPOINT",
  "LANGSMITH_API_KEY",
  "CODEHOP_OTEL",
  "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/**
 * What tracing costs a whole run: the towers demo question (9 model calls, 6 tool calls, 3
 * agents) with tracing off, with LangSmith (to a local recorder) and with OpenTelemetry (to a
 * local OTLP receiver), interleaved, medians of 7; the flush before the run returns included.
 * And the off path of a tool call (the only code tracing adds to a run that has it off).
 */
export default async function tracingBench(): Promise<BenchSection[]> {
  const home = mkdtempSync(join(tmpdir(), "codehop-bench-tracing-"));
  const corpus = await ensureDemoCorpus(home);
  const server = await startDemoModelServer();
  const [langsmith, otlp] = await Promise.all([LangSmithRecorder.start(), OtlpReceiver.start()]);
  const persistence = openPersistence(home);
  const saved = Object.fromEntries(VARIABLES.map((k) => [k, process.env[k]]));
  const times: Record<string, number[]> = {};
  const all = variants(langsmith.url, otlp.url);
  try {
    let n = 0;
    for (let i = 0; i < REPEATS + 1; i++) {
      for (const [name, vars] of Object.entries(all)) {
        for (const k of VARIABLES) delete process.env[k];
        Object.assign(process.env, vars);
        const t0 = performance.now();
        await ask(DEMO_QUESTIONS.towers, {
          threadId: `tracing-${n++}`,
          persistence,
          config: {
            home,
            corpus,
            baseURL: server.baseURL,
            apiKey: "b",
            model: "scripted",
            models: {},
          },
        });
        // The first round warms caches (imports, sandbox child): not counted.
        if (i > 0) (times[name] ??= []).push(performance.now() - t0);
      }
    }
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    persistence.close();
    await Promise.all([server.close(), langsmith.close(), otlp.close()]);
  }
  const off = percentile(times.off, 50);
  const runRows = Object.entries(times).map(([name, t]) => [
    name,
    fmt(percentile(t, 50), 0),
    fmt(Math.min(...t), 0),
    fmt(percentile(t, 50) / off, 2),
  ]);

  // The off path of one tool call: a config with LangGraph's (empty) callback manager.
  const { CallbackManager } = await import("@langchain/core/callbacks/manager");
  const config = { callbacks: new CallbackManager() };
  const fn = async () => 1;
  const CALLS = 20_000;
  const perCall = async (traced: boolean) => {
    const t0 = performance.now();
    for (let i = 0; i < CALLS; i++) await (traced ? traceToolRun("t", {}, config, fn) : fn());
    return ((performance.now() - t0) * 1000) / CALLS;
  };
  const direct: number[] = [];
  const traced: number[] = [];
  for (let i = 0; i < 5; i++) {
    direct.push(await perCall(false));
    traced.push(await perCall(true));
  }
  const offUs = percentile(traced, 50) - percentile(direct, 50);
  const ratio = (name: string) => percentile(times[name], 50) / off;
  return [
    {
      title: "Tracing: a whole run with tracing off, LangSmith, OpenTelemetry",
      description: `The towers demo question (3 agents, 9 model calls, 6 tool calls; scripted model answering instantly, so the figures are the framework's own cost at its most visible) answered ${REPEATS} times per variant, variants interleaved, after one warm-up round; the LangSmith and OTLP endpoints are local recorders, and the run's flush of its traces before it returns is inside the time. Off is the default (no variable set): the run gets no callback handler and loads neither package.`,
      columns: ["tracing", "wall p50 (ms)", "wall min (ms)", "ratio to off"],
      rows: runRows,
      verdicts: [
        `off costs nothing measurable: a tool call's off path adds ${fmt(offUs, 2)} µs (p50 of 5 × ${CALLS} calls: ${fmt(percentile(traced, 50), 2)} vs ${fmt(percentile(direct, 50), 2)} µs direct), i.e. ${fmt(((offUs * 6) / 1000 / off) * 100, 4)}% of the run's ${fmt(off, 0)} ms for its 6 tool calls`,
        `LangSmith on: ${fmt(ratio("langsmith"), 2)}x; OpenTelemetry on: ${fmt(ratio("otel"), 2)}x the off run (zero-latency model: with a real model's seconds per call the share is far smaller)`,
      ],
    },
  ];
}
