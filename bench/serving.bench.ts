import { loadavg } from "node:os";
import pg from "pg";
import { startTestCluster } from "../src/testing/postgres-cluster.ts";
import { type BenchSection, BenchSkipped, fmt, percentile } from "./lib.ts";
import { createHosts, type SimulatedHosts, unavailable } from "./netns.ts";
import { startServingModel } from "./serving-model.ts";
import {
  codehopSetup,
  langgraphDevSetup,
  postmasterPid,
  type Round,
  roundFigures,
  type Setup,
  submitRound,
} from "./serving-rounds.ts";

/**
 * Serving benchmark (issue 23): runs submitted at once through the official LangGraph SDK to
 * `codehop serve` + `codehop worker` processes on PostgreSQL, side by side with LangGraph's own
 * `langgraph dev` server (@langchain/langgraph-cli, in-memory queue and checkpointer) serving the
 * same langgraph.json with the same model. The model is a scripted OpenAI-compatible server on a
 * thread of its own answering after 200 ms; each run is the code_agent graph: 2 model calls and 2
 * sandbox actions. Queue latency = runs.create called -> the run's first model request arrived at
 * the model server (both on this process's clock).
 *
 * `npm run bench -- serving` (records docs/benchmarks.md). Arguments after the filter:
 * `--reps N` interleaved repeats of the 50-run rounds (default 3), `--large N` runs of the large
 * round (default 500, 0 skips it).
 */

/** Runs submitted at once in the main rounds (the issue's figure). */
const RUNS = 50;
/** The model's reply delay (ms). */
const MODEL_DELAY_MS = 200;
/** Simulated hosts (network namespaces) for the separate-host workers. */
const HOSTS = 2;

function argValue(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  const v = i >= 0 ? Number(process.argv[i + 1]) : NaN;
  return Number.isFinite(v) && v >= 0 ? v : fallback;
}

/** This bench can take a while on a loaded machine (500-run rounds). */
export const timeoutMs = 45 * 60_000;

const median = (values: number[]) => percentile(values, 50);
const ratio = (a: number, b: number) => (b > 0 ? `${fmt(a / b)}x` : "n/a");

/** Per-run phases of a codehop round from its runs table: create -> row, row -> taken, taken -> model. */
async function phases(setup: Setup, round: Round): Promise<[number, number, number]> {
  if (!setup.databaseUrl) return [NaN, NaN, NaN];
  const db = new pg.Client({ connectionString: setup.databaseUrl });
  await db.connect();
  try {
    const { rows } = await db.query<{ task: string; c: string; s: string | null }>(
      `SELECT kwargs->'input'->>'task' AS task, extract(epoch FROM created_at) * 1000 AS c,
         extract(epoch FROM started_at) * 1000 AS s FROM codehop_runs`,
    );
    const byRun = new Map(rows.map((r) => [Number(/Bench run (\d+)/.exec(r.task)?.[1]), r]));
    const parts = round.runs
      .map((x) => ({ x, row: byRun.get(x.i) }))
      .filter(({ x, row }) => row?.s && x.firstModelAt !== undefined);
    return [
      median(parts.map(({ x, row }) => Number(row!.c) - x.createdAt)),
      median(parts.map(({ row }) => Number(row!.s) - Number(row!.c))),
      median(parts.map(({ x, row }) => x.firstModelAt! - Number(row!.s))),
    ];
  } finally {
    await db.end();
  }
}

export default async function servingBench(): Promise<BenchSection[]> {
  const reps = Math.max(1, argValue("--reps", 3));
  const large = argValue("--large", 500);
  const loadBefore = loadavg()[0];
  const netnsWhyNot = unavailable();
  let hosts: SimulatedHosts | undefined;
  if (!netnsWhyNot) hosts = createHosts(HOSTS);
  let cluster: Awaited<ReturnType<typeof startTestCluster>>;
  try {
    cluster = await startTestCluster({ fsync: true, extraListenAddresses: hosts?.hostAddresses });
  } catch (err) {
    hosts?.remove();
    throw new BenchSkipped(`no PostgreSQL: ${(err as Error).message}`);
  }
  const model = await startServingModel(MODEL_DELAY_MS);
  const setups: Setup[] = [];
  let next = 0;
  const indices = (k: number) => Array.from({ length: k }, () => next++);
  const rounds = new Map<string, Round[]>();
  const breakdown = new Map<string, [number, number, number][]>();
  const record = async (s: Setup, r: Round) => {
    rounds.set(s.name, [...(rounds.get(s.name) ?? []), r]);
    if (s.databaseUrl)
      breakdown.set(s.name, [...(breakdown.get(s.name) ?? []), await phases(s, r)]);
    const f = roundFigures(r);
    process.stdout.write(
      `  ${s.name}: ${r.runs.length} runs, queue p50 ${fmt(f.queueP50)} s, ${fmt(f.throughput)} runs/s, failed ${f.failed}, refused ${f.refused}, load ${fmt(r.load, 1)}${f.reasons.length ? ` (${f.reasons.join("; ")})` : ""}\n`,
    );
  };
  try {
    const dev = await langgraphDevSetup(model, { name: "langgraph dev (in-memory)" });
    setups.push(dev);
    const one = await codehopSetup(cluster, model, {
      name: "codehop serve + 1 worker",
      workers: 1,
    });
    setups.push(one);
    const separate = hosts
      ? await codehopSetup(cluster, model, {
          name: `codehop serve + ${HOSTS} workers on ${HOSTS} netns hosts`,
          workers: HOSTS,
          workerHosts: { netns: hosts.netns, address: (k) => hosts!.hostAddress(k) },
        })
      : undefined;
    if (separate) setups.push(separate);
    // Warm-up: graphs compiled, sandbox pools started, connections opened.
    for (const s of setups) await submitRound(s, model, indices(8));
    for (let rep = 0; rep < reps; rep++) {
      const order = rep % 2 ? [...setups].reverse() : setups;
      for (const s of order)
        await record(
          s,
          await submitRound(s, model, indices(RUNS), { postgresPid: postmasterPid(cluster) }),
        );
    }
    // The large round: the deepest queue, one round each (dev first, then codehop).
    const largeRounds = new Map<string, Round>();
    if (large > 0) {
      for (const s of [dev, one]) {
        const r = await submitRound(s, model, indices(large), { timeoutMs: 30 * 60_000 });
        largeRounds.set(s.name, r);
        const f = roundFigures(r);
        process.stdout.write(
          `  ${s.name}: ${large} runs, queue p50 ${fmt(f.queueP50)} s, failed ${f.failed}, refused ${f.refused}, load ${fmt(r.load, 1)}\n`,
        );
      }
    }
    return sections({
      reps,
      large,
      loadBefore,
      dev: dev.name,
      one: one.name,
      separate: separate?.name,
      netnsWhyNot,
      rounds,
      breakdown,
      largeRounds,
    });
  } finally {
    for (const s of setups) await s.stop().catch(() => {});
    await model.close();
    await cluster.stop();
    hosts?.remove();
  }
}

function sections(m: {
  reps: number;
  large: number;
  loadBefore: number;
  dev: string;
  one: string;
  separate?: string;
  netnsWhyNot?: string;
  rounds: Map<string, Round[]>;
  breakdown: Map<string, [number, number, number][]>;
  largeRounds: Map<string, Round>;
}): BenchSection[] {
  // Medians over the interleaved rounds of each figure of each setup.
  const figures = (name: string) => {
    const rs = (m.rounds.get(name) ?? []).map(roundFigures);
    const loads = (m.rounds.get(name) ?? []).map((r) => r.load);
    return {
      queueP50: median(rs.map((f) => f.queueP50)),
      queueP95: median(rs.map((f) => f.queueP95)),
      e2eP50: median(rs.map((f) => f.e2eP50)),
      throughput: median(rs.map((f) => f.throughput)),
      failed: rs.reduce((n, f) => n + f.failed, 0),
      refused: rs.reduce((n, f) => n + f.refused, 0),
      runs: (m.rounds.get(name) ?? []).reduce((n, r) => n + r.runs.length, 0),
      load: median(loads),
      cpu: median((m.rounds.get(name) ?? []).map((r) => cpuPerRun(r))),
    };
  };
  const dev = figures(m.dev);
  const names = [m.dev, m.one, ...(m.separate ? [m.separate] : [])];
  const rows = names.map((name) => {
    const f = figures(name);
    const ph = m.breakdown.get(name);
    const phase = (k: 0 | 1 | 2) => (ph ? fmt(median(ph.map((p) => p[k])), 0) : "");
    return [
      name,
      fmt(f.queueP50),
      name === m.dev ? "1.00x" : ratio(f.queueP50, dev.queueP50),
      fmt(f.queueP95),
      fmt(f.e2eP50),
      fmt(f.throughput),
      name === m.dev ? "1.00x" : ratio(f.throughput, dev.throughput),
      `${f.failed} / ${f.refused} of ${f.runs}`,
      fmt(f.cpu, 0),
      `${phase(0)} / ${phase(1)} / ${phase(2)}`,
      fmt(f.load, 1),
    ];
  });
  const one = figures(m.one);
  const allFailed = names.reduce((n, name) => n + figures(name).failed, 0);
  const largeFailed = [...m.largeRounds.values()].reduce((n, r) => n + roundFigures(r).failed, 0);
  const verdict = (ok: boolean) => (ok ? "MET" : "NOT MET");
  const main: BenchSection = {
    title: `Serving: ${RUNS} runs at once, codehop serve + workers on PostgreSQL vs langgraph dev`,
    description: `${RUNS} runs submitted at once through the official LangGraph SDK (threads created first, then every runs.create at the same moment, each joined; no client retries) to \`langgraph dev\` (LangGraph's own API server, in-memory queue, its default 10 jobs at once), to \`codehop serve\` + 1 \`codehop worker\` (default concurrency) on a throwaway PostgreSQL 15 (fsync on), and to \`codehop serve\` + ${HOSTS} workers each in its own Linux network namespace (simulated hosts: own network stack, reaching the database and the model over a veth link${m.separate ? "" : `; not run here: ${m.netnsWhyNot}`}). Same langgraph.json, same scripted model (a thread of its own, replies after ${MODEL_DELAY_MS} ms); each run is code_agent: 2 model calls + 2 sandbox actions. Queue latency = runs.create called -> the run's first request at the model server. Medians over ${m.reps} interleaved rounds per setup (order alternating), after an 8-run warm-up each. CPU ms/run = CPU of the server's and workers' process trees (sandbox children included) and of PostgreSQL during the round / runs. Phases (codehop, p50 ms): create -> run row committed / row -> taken by a worker / taken -> first model request. 2 shared cores: load = 1-minute load average as the rounds ended (${fmt(m.loadBefore, 1)} before).`,
    columns: [
      "setup",
      "queue p50 (s)",
      "vs dev",
      "queue p95 (s)",
      "end-to-end p50 (s)",
      "runs/s",
      "vs dev",
      "failed / refused",
      "CPU ms/run",
      "phases p50 (ms)",
      "load",
    ],
    rows,
    verdicts: [
      `queue latency p50 <= 2x langgraph dev's (1 worker): ${verdict(one.queueP50 <= 2 * dev.queueP50)} (${ratio(one.queueP50, dev.queueP50)})`,
      `throughput >= langgraph dev's with one worker: ${verdict(one.throughput >= dev.throughput)} (${ratio(one.throughput, dev.throughput)})`,
      ...(m.separate
        ? [
            `queue latency p50 with workers on ${HOSTS} simulated hosts (netns): ${ratio(figures(m.separate).queueP50, dev.queueP50)} langgraph dev's`,
          ]
        : [`workers on separate hosts (netns): not measured: ${m.netnsWhyNot}`]),
      `0 failed runs (every ${RUNS}-run round): ${verdict(allFailed === 0)} (${allFailed} failed)`,
    ],
  };
  const out = [main];
  if (m.largeRounds.size) {
    const largeDev = m.largeRounds.get(m.dev);
    const lf = largeDev ? roundFigures(largeDev) : undefined;
    out.push({
      title: `Serving: ${m.large} runs at once (overload)`,
      description: `${m.large} runs submitted at once, as above, one round per setup (langgraph dev, then codehop serve + 1 worker): the queue is ${m.large / 10}x deeper than langgraph dev's jobs at once. A run counts as failed when it was accepted and then did not answer correctly (lost, errored, or not ended within 30 min); refused = HTTP 429/503 at creation (none expected: runs wait).`,
      columns: [
        "setup",
        "queue p50 (s)",
        "vs dev",
        "queue p95 (s)",
        "end-to-end p50 (s)",
        "runs/s",
        "vs dev",
        "failed / refused",
        "load",
      ],
      rows: [...m.largeRounds.entries()].map(([name, r]) => {
        const f = roundFigures(r);
        return [
          name,
          fmt(f.queueP50),
          lf ? ratio(f.queueP50, lf.queueP50) : "",
          fmt(f.queueP95),
          fmt(f.e2eP50),
          fmt(f.throughput),
          lf ? ratio(f.throughput, lf.throughput) : "",
          `${f.failed} / ${f.refused} of ${r.runs.length}`,
          fmt(r.load, 1),
        ];
      }),
      verdicts: [
        `0 failed runs at ${m.large} runs: ${verdict(largeFailed === 0)} (${largeFailed} failed)`,
      ],
    });
  }
  return out;
}

/** CPU ms per run of a round: the server's and workers' trees and PostgreSQL. */
function cpuPerRun(r: Round): number {
  const total = ["server", "workers", "postgres"].reduce(
    (sum, role) => sum + (Number.isFinite(r.cpuMs[role]) ? r.cpuMs[role] : 0),
    0,
  );
  return total / r.runs.length;
}
