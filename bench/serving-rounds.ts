/**
 * What the serving benchmarks share: a server setup under test (`codehop serve` + N `codehop
 * worker` processes on a PostgreSQL database, or `langgraph dev`), and one round of runs
 * submitted at once through the official SDK, timed per run.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { Agent, fetch as undiciFetch } from "undici";
import type { TestCluster } from "../src/testing/postgres-cluster.ts";
import { percentile } from "./lib.ts";
import { ownCpuMs, treeCpuMs } from "./proc-cpu.ts";
import {
  type CliProcess,
  spawnCodehop,
  startLanggraphDev,
  stopProcesses,
  waitForLine,
} from "./serve-processes.ts";
import { benchTask, type ServingModel } from "./serving-model.ts";

/** A server under test, reachable through the SDK. */
export interface Setup {
  name: string;
  url: string;
  /** Its database (codehop only), for the per-run breakdown. */
  databaseUrl?: string;
  /** Its processes (codehop only): stderr for failure reports. */
  procs?: CliProcess[];
  /** Roots of its process trees by role ("server", "workers"), for CPU accounting. */
  pids: Record<string, number[]>;
  stop(): Promise<void>;
}

/** Options of a codehop setup. */
export interface CodehopSetupOptions {
  name: string;
  workers: number;
  /** `--concurrency` of each worker (default: the CLI's). */
  concurrency?: number;
  /** `--lease` seconds (default 30, the CLI's). */
  lease?: number;
  /** Extra arguments of each worker. */
  workerArgs?: string[];
  /**
   * Simulated hosts: worker k runs in namespace `netns[k % n]` and reaches the database and the
   * model at `address(k % n)` (this host's end of its link).
   */
  workerHosts?: { netns: string[]; address(k: number): string };
  /** Arguments of node for each worker (e.g. `--cpu-prof`). */
  workerNodeArgs?: string[];
  /** Extra environment of every process. */
  env?: Record<string, string>;
  /** max connections of the database (for the overload reproduction). */
  database?: string;
}

let databases = 0;

/** `codehop serve` + `workers` workers on a fresh database of `cluster`, all started and ready. */
export async function codehopSetup(
  cluster: TestCluster,
  model: ServingModel,
  options: CodehopSetupOptions,
): Promise<Setup> {
  const databaseUrl = await cluster.createDatabase(options.database ?? `serving_${++databases}`);
  const home = mkdtempSync(join(tmpdir(), "codehop-bench-serving-"));
  const env = (databaseHost?: string, modelHost?: string): NodeJS.ProcessEnv => ({
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    OPENAI_BASE_URL: modelHost
      ? `http://${modelHost}:${model.port}/v1`
      : `http://127.0.0.1:${model.port}/v1`,
    OPENAI_API_KEY: "bench",
    CODEHOP_MODEL: "scripted",
    CODEHOP_MAX_RETRIES: "0",
    CODEHOP_HOME: home,
    CODEHOP_ENV_FILE: "none",
    CODEHOP_DATABASE_URL: databaseHost
      ? databaseUrl.replace("127.0.0.1", databaseHost)
      : databaseUrl,
    ...options.env,
  });
  const lease = String(options.lease ?? 30);
  const procs: CliProcess[] = [];
  const stop = async () => {
    await stopProcesses(procs);
    rmSync(home, { recursive: true, force: true });
  };
  try {
    const server = spawnCodehop(["serve", "--port", "0", "--lease", lease], env());
    procs.push(server);
    const url = await waitForLine(server, /listening on (http:\/\/\S+)/, "codehop serve");
    await Promise.all(
      Array.from({ length: options.workers }, async (_, w) => {
        const hosts = options.workerHosts;
        const host = hosts ? hosts.address(w % hosts.netns.length) : undefined;
        const p = spawnCodehop(
          [
            "worker",
            "--worker-id",
            `w${w}`,
            ...(options.concurrency ? ["--concurrency", String(options.concurrency)] : []),
            "--lease",
            lease,
            "-q",
            ...(options.workerArgs ?? []),
          ],
          env(host, host),
          { netns: hosts?.netns[w % hosts.netns.length], nodeArgs: options.workerNodeArgs },
        );
        procs.push(p);
        await waitForLine(p, /ready/, `worker w${w}`);
      }),
    );
    return {
      name: options.name,
      url,
      databaseUrl,
      procs,
      pids: { server: [server.child.pid!], workers: procs.slice(1).map((p) => p.child.pid!) },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** `langgraph dev` serving the same langgraph.json with the same model. */
export async function langgraphDevSetup(
  model: ServingModel,
  options: { name: string; jobsPerWorker?: number },
): Promise<Setup> {
  const home = mkdtempSync(join(tmpdir(), "codehop-bench-dev-"));
  const dev = await startLanggraphDev(
    {
      OPENAI_BASE_URL: model.baseURL,
      OPENAI_API_KEY: "bench",
      CODEHOP_MODEL: "scripted",
      CODEHOP_MAX_RETRIES: "0",
      CODEHOP_HOME: home,
      CODEHOP_ENV_FILE: "none",
    },
    { jobsPerWorker: options.jobsPerWorker },
  );
  return {
    name: options.name,
    url: dev.url,
    pids: { server: dev.pid ? [dev.pid] : [] },
    stop: async () => {
      await dev.stop();
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/** One run of a round, timed on the epoch clock (the model thread's clock too). */
export interface RunTiming {
  i: number;
  /** When the SDK's runs.create was called. */
  createdAt: number;
  /** When the model received the run's first request (undefined: it never did). */
  firstModelAt?: number;
  /** When runs.join returned (or the run failed). */
  endedAt: number;
  /**
   * "ok", "refused" (HTTP 429/503 at creation), "failed" (accepted, then lost or wrong), or
   * "unfinished" (still queued or running when the round's time was up: not lost, not measured).
   */
  outcome: "ok" | "refused" | "failed" | "unfinished";
  reason?: string;
}

/** A round's runs and what they add up to. */
export interface Round {
  setup: string;
  runs: RunTiming[];
  wallMs: number;
  /** 1-minute load average as the round ended. */
  load: number;
  /** CPU ms each role's process trees spent during the round (PostgreSQL's under "postgres"). */
  cpuMs: Record<string, number>;
  /** Joins refused with 429 / 503 and asked again after their Retry-After (requests, not runs). */
  refusedJoins: number;
  /** Connections that could not be opened and were opened again, by error code. */
  reconnects: Record<string, number>;
}

/** The postmaster's pid of a test cluster. */
export function postmasterPid(cluster: TestCluster): number | undefined {
  try {
    return Number(readFileSync(join(cluster.dir, "data", "postmaster.pid"), "utf8").split("\n")[0]);
  } catch {
    return undefined;
  }
}

function cpuByRole(pids: Record<string, number[]>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [role, list] of Object.entries(pids)) {
    out[role] = list.reduce((sum, pid) => sum + treeCpuMs(pid), 0);
    // What the processes themselves spent, without their children (sandbox processes, backends).
    out[`${role} (own)`] = list.reduce((sum, pid) => sum + ownCpuMs(pid), 0);
  }
  return out;
}

const now = () => performance.timeOrigin + performance.now();

/** A run's result in a few words: its error, or its status and answer. */
function describeOutcome(values: Record<string, unknown> | null): string {
  const error = values?.__error__ as { message?: string } | undefined;
  if (error) return `error: ${String(error.message).slice(0, 160)}`;
  return `answer ${JSON.stringify(values?.answer)?.slice(0, 80)}`;
}

/** HTTP status of an SDK error, if it has one. */
function statusOf(err: unknown): number | undefined {
  const e = err as { status?: number; response?: { status?: number } };
  return e?.status ?? e?.response?.status;
}

/** Seconds a 429 / 503 asks the client to wait: its Retry-After header, else its message's "retry in N seconds". */
export function retryAfterSeconds(err: unknown): number {
  const header = (err as { response?: { headers?: Headers } })?.response?.headers?.get?.(
    "retry-after",
  );
  const seconds = Number(header ?? /retry in (\d+) seconds?/i.exec((err as Error).message)?.[1]);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : 5;
}

/** An error and its causes in a few words: "fetch failed <- UND_ERR_CONNECT_TIMEOUT: ...". */
export function causeChain(err: unknown): string {
  const parts: string[] = [];
  for (let e = err as { message?: string; code?: string; cause?: unknown } | undefined; e;) {
    parts.push([e.code, e.message].filter(Boolean).join(": "));
    if (parts.length >= 4) break;
    e = e.cause as typeof e;
  }
  return parts.join(" <- ");
}

/** Failures of a connection before any byte of the request was sent: retrying cannot repeat it. */
const CONNECT_FAILURES = new Set(["ECONNREFUSED", "UND_ERR_CONNECT_TIMEOUT", "EADDRNOTAVAIL"]);

/**
 * The bench client's fetch: undici's, with no headers / body timeout of its own (undici's
 * default 300 s would cut a join or a slow create that the round's own time still allows: the
 * SDK's timeoutMs bounds every request), a connection that could not be opened tried again (the
 * request never left: nothing on the server can be repeated; counted in `reconnects`), and every
 * other failure thrown with its cause chain in the message ("fetch failed" alone says nothing;
 * the SDK keeps only the message). `plain`: Node's own fetch with its defaults (what the bench
 * used before; 300-s timeouts, no second connection attempt), causes still named — to see what
 * a client with the defaults meets.
 */
export function benchFetch(plain = false): {
  fetch: typeof fetch;
  reconnects: Map<string, number>;
  close(): Promise<void>;
} {
  const dispatcher = plain ? undefined : new Agent({ headersTimeout: 0, bodyTimeout: 0 });
  const reconnects = new Map<string, number>();
  const f = async (input: unknown, init?: Record<string, unknown>) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return dispatcher
          ? await undiciFetch(input as string, { ...init, dispatcher } as never)
          : await fetch(input as string, init as RequestInit);
      } catch (err) {
        const code = (err as { cause?: { code?: string } }).cause?.code;
        const aborted = (init?.signal as AbortSignal | undefined)?.aborted;
        if (!plain && code && CONNECT_FAILURES.has(code) && !aborted && attempt < 20) {
          reconnects.set(code, (reconnects.get(code) ?? 0) + 1);
          await new Promise((r) => setTimeout(r, Math.min(500 * attempt, 5000)));
          continue;
        }
        // The SDK recognizes "fetch failed" as a connection error and keeps this message.
        throw new TypeError(`fetch failed (${causeChain((err as Error).cause ?? err)})`);
      }
    }
  };
  return {
    fetch: f as unknown as typeof fetch,
    reconnects,
    close: async () => dispatcher?.close(),
  };
}

/** `call`, asked again after the Retry-After of each 429 / 503 (a setup step: at most 10 times). */
async function afterRefusals<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      const status = statusOf(err);
      if ((status !== 429 && status !== 503) || attempt >= 10) throw err;
      await new Promise((r) => setTimeout(r, (retryAfterSeconds(err) + Math.random()) * 1000));
    }
  }
}

/**
 * runs.join, joined again when the connection fails (a client that lost its connection asks
 * again: the run goes on on the server; only its answer, or its absence, counts) and after the
 * delay a 429 / 503 names in its Retry-After (the server's per-user request limit refused the
 * join, not the run: what docs/deploy.md asks of a batch client). The round's time bounds the
 * retries; `retried` counts the refused joins.
 */
async function joinRun(
  client: Client,
  threadId: string,
  runId: string,
  retried: { refusedJoins: number },
): Promise<unknown> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await client.runs.join(threadId, runId);
    } catch (err) {
      const status = statusOf(err);
      if (status === 429 || status === 503) {
        retried.refusedJoins++;
        await new Promise((r) => setTimeout(r, (retryAfterSeconds(err) + Math.random()) * 1000));
        continue;
      }
      if (status !== undefined || attempt >= 5) throw err;
      await new Promise((r) => setTimeout(r, 1000 * attempt));
    }
  }
}

/** Why a run counts as unfinished: the round's time was up before it ended. */
const UNFINISHED = "run did not end in the round's time";

/**
 * Submits runs `indices` at once (threads created first, then every runs.create at the same
 * moment, each joined) and waits for all; a run not ended after `timeoutMs` counts as unfinished.
 */
export async function submitRound(
  setup: Setup,
  model: ServingModel,
  indices: number[],
  options: { timeoutMs?: number; postgresPid?: number; plainFetch?: boolean } = {},
): Promise<Round> {
  const timeoutMs = options.timeoutMs ?? 300_000;
  const pids = {
    ...setup.pids,
    ...(options.postgresPid && setup.databaseUrl ? { postgres: [options.postgresPid] } : {}),
  };
  // The SDK queues requests beyond 4 at a time by default: every run is waited on at once here.
  // No retries: a refused run is reported as refused, not hidden.
  const http = benchFetch(options.plainFetch);
  const retried = { refusedJoins: 0 };
  const client = new Client({
    apiUrl: setup.url,
    callerOptions: { maxConcurrency: indices.length + 10, maxRetries: 0, fetch: http.fetch },
    timeoutMs: timeoutMs + 10_000,
  });
  // Threads are made before the clock starts, a few at a time (a setup step, not the load).
  const threads: { thread_id: string }[] = [];
  for (let k = 0; k < indices.length; k += 25)
    threads.push(
      ...(await Promise.all(
        indices.slice(k, k + 25).map(() => afterRefusals(() => client.threads.create())),
      )),
    );
  const cpuBefore = cpuByRole(pids);
  const started = now();
  const runs = await Promise.all(
    indices.map(async (i, k): Promise<RunTiming> => {
      const threadId = threads[k].thread_id;
      const createdAt = now();
      let run: { run_id: string };
      try {
        run = await client.runs.create(threadId, "code_agent", { input: { task: benchTask(i) } });
      } catch (err) {
        const status = statusOf(err);
        const refused = status === 429 || status === 503;
        return {
          i,
          createdAt,
          endedAt: now(),
          outcome: refused ? "refused" : "failed",
          reason: `create: ${status ?? ""} ${(err as Error).message}`.slice(0, 200),
        };
      }
      try {
        let timer: NodeJS.Timeout | undefined;
        const values = (await Promise.race([
          joinRun(client, threadId, run.run_id, retried),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(UNFINISHED)), timeoutMs);
          }),
        ]).finally(() => clearTimeout(timer))) as Record<string, unknown>;
        const ok = values?.answer === String(i * i);
        return {
          i,
          createdAt,
          endedAt: now(),
          outcome: ok ? "ok" : "failed",
          ...(ok ? {} : { reason: describeOutcome(values) }),
        };
      } catch (err) {
        const message = (err as Error).message;
        return {
          i,
          createdAt,
          endedAt: now(),
          outcome: message === UNFINISHED ? "unfinished" : "failed",
          reason: message.slice(0, 200),
        };
      }
    }),
  );
  for (const r of runs) r.firstModelAt = model.firstRequest.get(r.i);
  const cpuAfter = cpuByRole(pids);
  await http.close().catch(() => {});
  return {
    setup: setup.name,
    runs,
    wallMs: Math.max(...runs.map((r) => r.endedAt)) - started,
    load: loadavg()[0],
    refusedJoins: retried.refusedJoins,
    reconnects: Object.fromEntries(http.reconnects),
    cpuMs: Object.fromEntries(Object.keys(cpuAfter).map((k) => [k, cpuAfter[k] - cpuBefore[k]])),
  };
}

/** Queue latencies (s) of a round's runs that reached the model. */
export const queueLatencies = (r: Round) =>
  r.runs
    .filter((x) => x.firstModelAt !== undefined)
    .map((x) => (x.firstModelAt! - x.createdAt) / 1000);

/** End-to-end latencies (s) of a round's runs that answered. */
export const endToEnd = (r: Round) =>
  r.runs.filter((x) => x.outcome === "ok").map((x) => (x.endedAt - x.createdAt) / 1000);

/** Figures of a round: queue p50/p95, end-to-end p50, runs/s, failed, refused. */
export function roundFigures(r: Round) {
  const q = queueLatencies(r);
  const e = endToEnd(r);
  return {
    queueP50: percentile(q, 50),
    queueP95: percentile(q, 95),
    e2eP50: percentile(e, 50),
    throughput: e.length / (r.wallMs / 1000),
    failed: r.runs.filter((x) => x.outcome === "failed").length,
    refused: r.runs.filter((x) => x.outcome === "refused").length,
    unfinished: r.runs.filter((x) => x.outcome === "unfinished").length,
    reasons: [
      ...new Set(
        r.runs.filter((x) => x.outcome === "failed").map((x) => x.reason ?? "wrong answer"),
      ),
    ].slice(0, 3),
  };
}
