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
 * One command measures every figure of the issue's serving targets and prints them in one table:
 * `npm run bench -- serving` (records docs/benchmarks.md). Arguments after the filter, to shorten
 * a quick pass (the defaults cover the issue): `--reps N` interleaved rounds of `--runs` runs per
 * setup (default 3 of 50), `--large N` runs of the overload round on langgraph dev and on codehop
 * (default 500, 0 skips it), `--budget M` minutes for the whole bench (default 150): a round gets
 * at most what is left (its unfinished runs count as failed, with the reason), a round that cannot
 * start in time is reported as not run, and the table is printed with what was measured.
 * `--plain-client` runs every round with Node's own fetch and its defaults (see PLAIN_CLIENT).
 * Processes, namespaces and the database cluster are removed however the bench ends.
 */

function argValue(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  const v = i >= 0 ? Number(process.argv[i + 1]) : NaN;
  return Number.isFinite(v) && v >= 0 ? v : fallback;
}

/** Runs submitted at once in the main rounds (the issue's figure). */
const RUNS = Math.max(1, argValue("--runs", 50));
/** The model's reply delay (ms). */
const MODEL_DELAY_MS = 200;
/** Simulated hosts (network namespaces) for the separate-host workers. */
const HOSTS = 2;
/** Minutes the whole bench may take (rounds are cut to fit; see the file's comment). */
const BUDGET_MIN = argValue("--budget", 150);
/** Longest a main round / a large round may take before its unfinished runs count as failed. */
const ROUND_CAP_MS = 20 * 60_000;
const LARGE_CAP_MS = 45 * 60_000;

/**
 * `--plain-client`: the SDK on Node's own fetch with its defaults (300-s headers / body timeouts,
 * no second attempt at a connection), failures still named by cause — what the bench used
 * before, to see what a client with the defaults meets.
 */
const PLAIN_CLIENT = process.argv.includes("--plain-client");

/** The runner's backstop: the budget plus time to stop everything and print. */
export const timeoutMs = (BUDGET_MIN + 10) * 60_000;

const median = (values: number[]) => percentile(values, 50);
const ratio = (a: number, b: number) => (b > 0 && Number.isFinite(a) ? `${fmt(a / b)}x` : "n/a");

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

/** What one setup measured: its main rounds and its large round (when it has one). */
interface Measured {
  rounds: Round[];
  phases: [number, number, number][];
  large?: Round;
  largePhases?: [number, number, number];
  /** Why rounds were cut or not run. */
  notes: string[];
}

export default async function servingBench(): Promise<BenchSection[]> {
  const reps = Math.max(1, argValue("--reps", 3));
  const large = argValue("--large", 500);
  const deadline = Date.now() + BUDGET_MIN * 60_000;
  /** Time a round may take: its cap, or what is left of the budget. */
  // Whole milliseconds: the SDK's AbortSignal.timeout refuses a fraction.
  const allowance = (capMs: number) => Math.floor(Math.min(capMs, deadline - Date.now()));
  const loadBefore = loadavg()[0];
  const startedAt = new Date();
  const netnsWhyNot = unavailable();
  const notes: string[] = [];
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
  const measured = new Map<string, Measured>();
  let next = 0;
  const indices = (k: number) => Array.from({ length: k }, () => next++);
  const stopSetup = async (s: Setup) => {
    const i = setups.indexOf(s);
    if (i >= 0) setups.splice(i, 1);
    await s.stop().catch(() => {});
  };
  /**
   * One round of `runs` runs on `s` within `capMs` (or what is left of the budget), never
   * throwing: a round that cannot start in time or fails outright is noted and skipped.
   */
  const round = async (s: Setup, runs: number, capMs: number, what: string) => {
    const m = measured.get(s.name)!;
    const ms = allowance(capMs);
    if (ms < 60_000) {
      m.notes.push(`${what} not run: the ${BUDGET_MIN}-min budget was spent`);
      return undefined;
    }
    try {
      const r = await submitRound(s, model, indices(runs), {
        timeoutMs: ms,
        postgresPid: postmasterPid(cluster),
        plainFetch: PLAIN_CLIENT,
      });
      const f = roundFigures(r);
      const ph = await phases(s, r).catch((): [number, number, number] => [NaN, NaN, NaN]);
      process.stdout.write(
        `  ${s.name}: ${runs} runs, queue p50 ${fmt(f.queueP50)} s, ${fmt(f.throughput)} runs/s, failed ${f.failed}, refused ${f.refused}, ${r.refusedJoins} joins retried after 429/503, connections reopened ${JSON.stringify(r.reconnects)}, ${fmt(cpuPerRun(r).total, 0)} CPU ms/run, load ${fmt(r.load, 1)}${f.reasons.length ? ` (${f.reasons.join("; ")})` : ""}\n`,
      );
      if (f.unfinished)
        m.notes.push(
          `${what}: ${f.unfinished} runs had not ended when its ${fmt(ms / 60_000, 0)} min were up (unfinished: not lost, not measured)`,
        );
      if (f.failed) m.notes.push(`${what}: ${f.failed} failed (${f.reasons.join("; ")})`);
      if (Object.keys(r.reconnects).length)
        m.notes.push(
          `${what}: connections the client could not open and opened again: ${JSON.stringify(r.reconnects)}`,
        );
      return { r, ph };
    } catch (err) {
      m.notes.push(`${what} failed: ${(err as Error).message.slice(0, 200)}`);
      process.stdout.write(`  ${s.name}: ${what} failed: ${(err as Error).message}\n`);
      return undefined;
    }
  };
  try {
    const dev = await langgraphDevSetup(model, { name: "langgraph dev (in-memory)" });
    setups.push(dev);
    const one = await codehopSetup(cluster, model, {
      name: "codehop serve + 1 worker",
      workers: 1,
    });
    setups.push(one);
    let separate: Setup | undefined;
    if (hosts) {
      try {
        separate = await codehopSetup(cluster, model, {
          name: `codehop serve + ${HOSTS} workers on ${HOSTS} netns hosts`,
          workers: HOSTS,
          workerHosts: { netns: hosts.netns, address: (k) => hosts!.hostAddress(k) },
        });
        setups.push(separate);
      } catch (err) {
        notes.push(`workers on netns hosts did not start: ${(err as Error).message.slice(0, 200)}`);
      }
    }
    const names = setups.map((s) => s.name);
    for (const s of setups) measured.set(s.name, { rounds: [], phases: [], notes: [] });
    // Warm-up: graphs compiled, sandbox pools started, connections opened.
    for (const s of [...setups]) await round(s, 8, 5 * 60_000, "warm-up");
    for (let rep = 0; rep < reps; rep++) {
      const order = rep % 2 ? [...setups].reverse() : [...setups];
      for (const s of order) {
        const done = await round(s, RUNS, ROUND_CAP_MS, `${RUNS}-run round ${rep + 1}`);
        if (!done) continue;
        measured.get(s.name)!.rounds.push(done.r);
        measured.get(s.name)!.phases.push(done.ph);
      }
    }
    // Done with the separate-host workers: their processes and namespaces go before the deep queue.
    if (separate) await stopSetup(separate);
    // The large round: the deepest queue, one round each (langgraph dev first, then codehop),
    // each setup stopped after it (a cut round's runs go on no longer).
    if (large > 0) {
      const both = [dev, one];
      for (const [k, s] of both.entries()) {
        // Each large round gets an equal share of what is left (codehop's is not eaten by dev's).
        const share = (deadline - Date.now()) / (both.length - k);
        const done = await round(s, large, Math.min(LARGE_CAP_MS, share), `${large}-run round`);
        if (done) {
          measured.get(s.name)!.large = done.r;
          measured.get(s.name)!.largePhases = done.ph;
        }
        await stopSetup(s);
      }
    }
    return [
      table({
        reps,
        large,
        loadBefore,
        loadAfter: loadavg()[0],
        startedAt,
        endedAt: new Date(),
        names,
        dev: dev.name,
        one: one.name,
        separate: separate?.name,
        netnsWhyNot: netnsWhyNot ?? (separate ? undefined : notes.join("; ")),
        measured,
        notes,
      }),
    ];
  } finally {
    for (const s of [...setups]) await stopSetup(s);
    await model.close();
    await cluster.stop();
    hosts?.remove();
  }
}

/** CPU ms per run of a round: total, server tree, worker trees, their sandbox children, PostgreSQL. */
function cpuPerRun(r: Round) {
  const v = (role: string) => (Number.isFinite(r.cpuMs[role]) ? r.cpuMs[role] : 0);
  const n = r.runs.length;
  return {
    total: (v("server") + v("workers") + v("postgres")) / n,
    server: v("server") / n,
    workers: v("workers") / n,
    sandbox: (v("workers") - v("workers (own)")) / n,
    postgres: v("postgres") / n,
  };
}

/** The one table: every setup's main rounds (medians) and large round, with ratios to dev's. */
function table(m: {
  reps: number;
  large: number;
  loadBefore: number;
  loadAfter: number;
  startedAt: Date;
  endedAt: Date;
  names: string[];
  dev: string;
  one: string;
  separate?: string;
  netnsWhyNot?: string;
  measured: Map<string, Measured>;
  notes: string[];
}): BenchSection {
  const figuresOf = (rounds: Round[]) => {
    const rs = rounds.map(roundFigures);
    const cpu = rounds.map(cpuPerRun);
    const med = (k: keyof ReturnType<typeof cpuPerRun>) => median(cpu.map((c) => c[k]));
    return {
      queueP50: median(rs.map((f) => f.queueP50)),
      queueP95: median(rs.map((f) => f.queueP95)),
      e2eP50: median(rs.map((f) => f.e2eP50)),
      throughput: median(rs.map((f) => f.throughput)),
      failed: rs.reduce((n, f) => n + f.failed, 0),
      refused: rs.reduce((n, f) => n + f.refused, 0),
      refusedJoins: rounds.reduce((n, r) => n + r.refusedJoins, 0),
      unfinished: rs.reduce((n, f) => n + f.unfinished, 0),
      runs: rounds.reduce((n, r) => n + r.runs.length, 0),
      load: median(rounds.map((r) => r.load)),
      cpu: {
        total: med("total"),
        server: med("server"),
        workers: med("workers"),
        sandbox: med("sandbox"),
        postgres: med("postgres"),
      },
    };
  };
  type Figures = ReturnType<typeof figuresOf>;
  const main = new Map(m.names.map((n) => [n, figuresOf(m.measured.get(n)?.rounds ?? [])]));
  const largeOf = (n: string) => {
    const r = m.measured.get(n)?.large;
    return r ? figuresOf([r]) : undefined;
  };
  const dev = main.get(m.dev)!;
  const devLarge = largeOf(m.dev);
  const cpuCell = (f: Figures, codehop: boolean) =>
    codehop
      ? `${fmt(f.cpu.total, 0)} (${fmt(f.cpu.server, 0)} / ${fmt(f.cpu.workers, 0)}, ${fmt(f.cpu.sandbox, 0)} sandbox / ${fmt(f.cpu.postgres, 0)})`
      : `${fmt(f.cpu.total, 0)} (one process tree)`;
  const row = (name: string, what: string, f: Figures, base: Figures | undefined, ph?: string) => [
    name,
    what,
    fmt(f.queueP50),
    name === m.dev ? "1.00x" : base ? ratio(f.queueP50, base.queueP50) : "n/a",
    fmt(f.queueP95),
    fmt(f.e2eP50),
    name === m.dev ? "1.00x" : base ? ratio(f.e2eP50, base.e2eP50) : "n/a",
    fmt(f.throughput),
    name === m.dev ? "1.00x" : base ? ratio(f.throughput, base.throughput) : "n/a",
    `${f.failed} / ${f.refused}${f.unfinished ? ` (${f.unfinished} unfinished)` : ""} of ${f.runs}${f.refusedJoins ? `; ${f.refusedJoins} joins retried after 429/503` : ""}`,
    cpuCell(f, name !== m.dev),
    ph ?? "",
    fmt(f.load, 1),
  ];
  const phaseCell = (list: [number, number, number][]) =>
    list.length
      ? [0, 1, 2].map((k) => fmt(median(list.map((p) => p[k])), 0)).join(" / ")
      : undefined;
  const rows: (string | number)[][] = [];
  for (const name of m.names) {
    const ms = m.measured.get(name);
    rows.push(
      row(
        name,
        `${RUNS} runs × ${ms?.rounds.length ?? 0}`,
        main.get(name)!,
        dev,
        name === m.dev ? "" : phaseCell(ms?.phases ?? []),
      ),
    );
  }
  for (const name of [m.dev, m.one]) {
    const f = largeOf(name);
    const ms = m.measured.get(name);
    if (f)
      rows.push(
        row(
          name,
          `${m.large} runs × 1`,
          f,
          devLarge,
          name === m.dev || !ms?.largePhases ? "" : phaseCell([ms.largePhases]),
        ),
      );
  }
  const one = main.get(m.one)!;
  const oneLarge = largeOf(m.one);
  const failedMain = [...main.values()].reduce((n, f) => n + f.failed, 0);
  const failedLarge = [m.dev, m.one].reduce((n, name) => n + (largeOf(name)?.failed ?? 0), 0);
  const refusedAll =
    [...main.values()].reduce((n, f) => n + f.refused, 0) +
    [m.dev, m.one].reduce((n, name) => n + (largeOf(name)?.refused ?? 0), 0);
  const codehopFailed =
    m.names.filter((n) => n !== m.dev).reduce((n, name) => n + main.get(name)!.failed, 0) +
    (oneLarge?.failed ?? 0);
  const verdict = (ok: boolean) => (ok ? "MET" : "NOT MET");
  const when = (d: Date) => d.toISOString().slice(0, 16).replace("T", " ");
  const allNotes = [
    ...m.notes,
    ...[...m.measured].flatMap(([name, x]) => x.notes.map((n) => `${name}: ${n}`)),
  ];
  return {
    title: `Serving: ${RUNS} and ${m.large} runs at once${PLAIN_CLIENT ? " (--plain-client: Node's fetch, its defaults)" : ""}, codehop serve + workers on PostgreSQL vs langgraph dev`,
    description: `One command, one table: \`npm run bench -- serving\` (${when(m.startedAt)}–${when(m.endedAt)} UTC; 1-minute load average ${fmt(m.loadBefore, 1)} at the start, ${fmt(m.loadAfter, 1)} at the end, 2 cores shared with whatever else runs: the ratios are the figures). Runs submitted at once through the official LangGraph SDK (threads created first, then every runs.create at the same moment, each joined; no retry of a runs.create; a join refused with 429/503 is asked again after its Retry-After, a connection that could not be opened is opened again, no 300-s undici timeout cuts a request) to \`langgraph dev\` (LangGraph's own API server, in-memory queue, its default 10 jobs at once), to \`codehop serve\` + 1 \`codehop worker\` (default concurrency) on a throwaway PostgreSQL 15 (fsync on), and to \`codehop serve\` + ${HOSTS} workers each in its own Linux network namespace (simulated hosts: own network stack, reaching the database and the model over a veth link${m.separate ? "" : `; not run here: ${m.netnsWhyNot}`}). Same langgraph.json, same scripted model (a thread of its own, replies after ${MODEL_DELAY_MS} ms); each run is code_agent: 2 model calls + 2 sandbox actions. Rows "${RUNS} runs × N": medians over N interleaved rounds per setup (order alternating, after an 8-run warm-up each); rows "${m.large} runs × 1": one round per setup (langgraph dev, then codehop), ratios to langgraph dev's ${m.large}-run round. Queue latency = runs.create called -> the run's first request at the model server. Failed = accepted and then lost or errored; unfinished = not ended when the round's time was up (counted apart: still queued, not lost); refused = HTTP 429/503 at creation; joins retried = join requests refused with 429/503 (by the per-user request rate) and asked again, not runs. CPU ms/run = CPU of the server's and workers' process trees (sandbox children included) and of PostgreSQL during the round / runs; for codehop: total (server / workers, of which sandbox children / PostgreSQL). Phases (codehop, p50 ms): create -> run row committed / row -> taken by a worker / taken -> first model request. Load = 1-minute load average as the round(s) ended.`,
    columns: [
      "setup",
      "round",
      "queue p50 (s)",
      "vs dev",
      "queue p95 (s)",
      "end-to-end p50 (s)",
      "vs dev",
      "runs/s",
      "vs dev",
      "failed / refused",
      "CPU ms/run",
      "phases p50 (ms)",
      "load",
    ],
    rows,
    verdicts: [
      `queue latency p50 <= 2x langgraph dev's at ${RUNS} runs (1 worker): ${verdict(one.queueP50 <= 2 * dev.queueP50)} (${ratio(one.queueP50, dev.queueP50)})`,
      `throughput >= langgraph dev's with one worker at ${RUNS} runs: ${verdict(one.throughput >= dev.throughput)} (${ratio(one.throughput, dev.throughput)})`,
      ...(oneLarge && devLarge
        ? [
            `queue latency at ${m.large} runs (1 worker): ${ratio(oneLarge.queueP50, devLarge.queueP50)} langgraph dev's; throughput ${ratio(oneLarge.throughput, devLarge.throughput)}`,
          ]
        : [
            `${m.large}-run rounds on both: not measured (${m.large > 0 ? "see notes" : "--large 0"})`,
          ]),
      m.separate
        ? `queue latency p50 with workers on ${HOSTS} simulated hosts (netns) at ${RUNS} runs: ${ratio(main.get(m.separate)!.queueP50, dev.queueP50)} langgraph dev's`
        : `workers on separate hosts (netns): not measured: ${m.netnsWhyNot}`,
      `0 failed codehop runs under overload (every round, ${RUNS} and ${m.large} runs): ${verdict(codehopFailed === 0)} (${codehopFailed} failed; all setups: ${failedMain + failedLarge} failed, ${refusedAll} refused)`,
      ...allNotes.map((n) => `note: ${n}`),
    ],
  };
}
