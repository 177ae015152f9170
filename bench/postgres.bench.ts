import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import type { BaseMessage } from "@langchain/core/messages";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { Client } from "@langchain/langgraph-sdk";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import Database from "better-sqlite3";
import pg from "pg";
import { z } from "zod";
import { IncrementalSqliteSaver } from "@codehop/checkpoint-sqlite";
import { createCodeAgent } from "../src/framework/code-agent.ts";
import { CodehopPostgresSaver } from "../src/persistence/index.ts";
import { createSandbox } from "../src/sandbox/index.ts";
import { startTestCluster, type TestCluster } from "../src/testing/postgres-cluster.ts";
import { ScriptedChatModel } from "../src/testing/scripted-chat-model.ts";
import { observationCount, ScriptedOpenAIServer } from "../src/testing/scripted-openai-server.ts";
import { defineTool } from "../src/tools/define-tool.ts";
import { type BenchSection, fmt, percentile } from "./lib.ts";

/**
 * Postgres benchmarks (issue 16): what each checkpointer stores for the same agent run (the figures
 * behind choosing the official Postgres saver over a port of IncrementalSqliteSaver), and 200
 * concurrent runs through `codehop serve` with 1, 2 and 4 workers. Every figure comes from a throwaway
 * cluster started from the Debian package (src/testing/postgres-cluster.ts).
 */

const observations = (m: BaseMessage[]) =>
  m.filter((x) => String(x.content).startsWith("Observation:")).length;
const action = (thought: string, code: string) =>
  `Thought: ${thought}\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;
/** A 2 KB passage of text that compresses like prose (not a repeated phrase). */
const passage = (i: number) => {
  let seed = i * 7919 + 1;
  const words = ["tower", "iron", "built", "year", "city", "engineer", "height", "steel", "river"];
  const out: string[] = [`Passage ${i}:`];
  while (out.join(" ").length < 2048) {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    out.push(`${words[seed % words.length]}${seed % 97}`);
  }
  return out.join(" ").slice(0, 2048);
};

/** Runs an N-step code agent (each step reads a 2 KB passage through a tool) on `saver`. */
async function agentRun(
  saver: BaseCheckpointSaver,
  sandbox: ReturnType<typeof createSandbox>,
  steps: number,
  thread: string,
): Promise<number> {
  const lookup = defineTool({
    name: "lookup",
    description: "Returns passage i.",
    parameters: z.object({ i: z.number() }),
    returns: "string",
    invoke: async ({ i }) => passage(i),
  });
  const model = new ScriptedChatModel([
    (m) =>
      observations(m) >= steps
        ? action("done", "final_answer('done')")
        : action("read the next passage", `console.log(await lookup(${observations(m)}))`),
  ]);
  const agent = createCodeAgent({
    name: "bench",
    description: "reads passages",
    sandbox,
    model,
    tools: [lookup],
    maxSteps: steps + 1,
  });
  const graph = agent.builder.compile({ checkpointer: saver });
  const t0 = performance.now();
  const out = await graph.invoke(
    { task: "read" },
    { recursionLimit: agent.recursionLimit, configurable: { thread_id: thread } },
  );
  if (out.answer !== "done") throw new Error(`bench agent answered ${String(out.answer)}`);
  return performance.now() - t0;
}

/** Bytes the checkpoint tables of `schema` take (heap + TOAST + indexes). */
async function schemaBytes(pool: pg.Pool, schema: string): Promise<number> {
  await pool.query("CHECKPOINT");
  const { rows } = await pool.query<{ bytes: string }>(
    `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) AS bytes
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname LIKE 'checkpoint%'`,
    [schema],
  );
  return Number(rows[0].bytes);
}

/** Bytes of the stored values themselves (after Postgres's compression), without page overhead. */
async function payloadBytes(pool: pg.Pool, schema: string): Promise<number> {
  const { rows } = await pool.query<{ bytes: string }>(
    `SELECT (SELECT coalesce(sum(pg_column_size(blob)), 0) FROM "${schema}".checkpoint_blobs)
          + (SELECT coalesce(sum(pg_column_size(blob)), 0) FROM "${schema}".checkpoint_writes)
          + (SELECT coalesce(sum(pg_column_size(checkpoint) + pg_column_size(metadata)), 0)
             FROM "${schema}".checkpoints) AS bytes`,
  );
  return Number(rows[0].bytes);
}

function sqliteBytes(path: string): number {
  const db = new Database(path);
  try {
    db.pragma("wal_checkpoint(TRUNCATE)");
  } finally {
    db.close();
  }
  return statSync(path).size;
}

const kib = (b: number) => `${fmt(b / 1024, 0)} KiB`;

/** What each checkpointer stores for the same N-step run. */
async function storage(cluster: TestCluster): Promise<BenchSection> {
  const sandbox = createSandbox({ maxProcesses: 2 });
  const dir = mkdtempSync(join(tmpdir(), "codehop-bench-pgstore-"));
  const pool = new pg.Pool({ connectionString: cluster.url, max: 4 });
  const rows: (string | number)[][] = [];
  try {
    for (const steps of [10, 30, 60]) {
      const file = join(dir, `inc-${steps}.db`);
      const inc = IncrementalSqliteSaver.fromConnString(file);
      const incMs = await agentRun(inc, sandbox, steps, "t");
      inc.db.close();
      const official = `official_${steps}`;
      const saverA = new PostgresSaver(pool, undefined, { schema: official });
      await saverA.setup();
      const officialMs = await agentRun(saverA, sandbox, steps, "t");
      const ours = `codehop_${steps}`;
      const saverB = new CodehopPostgresSaver(pool, ours);
      await saverB.setup();
      const oursMs = await agentRun(saverB, sandbox, steps, "t");
      const incBytes = sqliteBytes(file);
      const pgBytes = await schemaBytes(pool, ours);
      const pgPayload = await payloadBytes(pool, ours);
      rows.push([
        steps,
        kib(incBytes),
        kib(await schemaBytes(pool, official)),
        kib(pgBytes),
        kib(pgPayload),
        `${fmt(pgPayload / incBytes, 1)}x`,
        fmt(incMs / steps, 1),
        fmt(oursMs / steps, 1),
        fmt(officialMs / steps, 1),
      ]);
    }
  } finally {
    await pool.end();
    await sandbox.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return {
    title: "Postgres: what the checkpointer stores per run",
    description:
      "One code agent run of N steps, each step reading a 2 KB passage of varied text through a tool (zero-latency in-process scripted model, real sandbox), checkpointed by codehop's IncrementalSqliteSaver (SQLite file after a WAL checkpoint) and by the official @langchain/langgraph-checkpoint-postgres saver (plain, and as CodehopPostgresSaver with fork-safe versions): the checkpoint tables' total size (heap + TOAST + indexes, 8 KiB pages) and the stored values alone (pg_column_size, after Postgres's own compression). ms per step includes the sandbox action and the model's (zero) latency.",
    columns: [
      "steps",
      "IncrementalSqliteSaver file",
      "official PostgresSaver tables",
      "CodehopPostgresSaver tables",
      "CodehopPostgresSaver values",
      "values vs SQLite file",
      "SQLite ms/step",
      "Postgres ms/step",
      "official ms/step",
    ],
    rows,
  };
}

/** A long-running `codehop` process (serve / worker) with its stderr collected. */
interface CliProcess {
  child: ChildProcess;
  stderr(): string;
  exited: Promise<void>;
}

function spawnCodehop(args: string[], env: NodeJS.ProcessEnv): CliProcess {
  const child = spawn(process.execPath, [join(ROOT, "bin/codehop.mjs"), ...args], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let err = "";
  child.stderr!.on("data", (d) => (err += d));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  return { child, stderr: () => err, exited };
}

async function waitForLine(p: CliProcess, pattern: RegExp, what: string): Promise<string> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const m = pattern.exec(p.stderr());
    if (m) return m[1] ?? m[0];
    if (p.child.exitCode !== null || Date.now() > deadline)
      throw new Error(`${what} did not start:\n${p.stderr()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const ROOT = join(import.meta.dirname, "..");
const RUNS = 200;
const MODEL_MS = 200;
const PER_WORKER = 50;
const LEASE = 10;

/** The scripted model of the server bench: code_agent squares the run's number in two steps. */
export function benchModel(): Promise<ScriptedOpenAIServer> {
  return ScriptedOpenAIServer.start({
    responder: (req) => {
      const task = req.messages.find((m) => m.role === "user")?.content ?? "";
      const i = Number(/Bench run (\d+)/.exec(task)?.[1]);
      if (!Number.isFinite(i)) return { status: 400, body: "not a bench request" };
      return {
        delayMs: MODEL_MS,
        content:
          observationCount(req) === 0
            ? action("I compute the square in code.", `console.log(${i} * ${i});`)
            : action("The square is printed above.", `final_answer(String(${i} * ${i}));`),
      };
    },
  });
}

/** One measured batch: every run's latency, the wall time, and which runs did not answer right. */
interface Batch {
  latencies: number[];
  wallMs: number;
  wrong: number;
  lost: number;
  retaken: number;
  /** Why the first runs that failed did (for the verdict lines). */
  reasons: string[];
}

/** A run's result in a few words: its error, or its status and answer. */
function describeOutcome(values: Record<string, unknown> | null): string {
  const error = values?.__error__ as { message?: string } | undefined;
  if (error) return `error: ${String(error.message).slice(0, 160)}`;
  return `status ${String(values?.status)}, answer ${JSON.stringify(values?.answer)?.slice(0, 80)}`;
}

/**
 * Submits `count` runs at once (each on its own thread: create, then join) and waits for all;
 * `onProgress` sees the number finished so far.
 */
async function submit(
  client: Client,
  count: number,
  offset: number,
  onProgress?: (done: number) => void,
): Promise<Batch> {
  const started = performance.now();
  let done = 0;
  let wrong = 0;
  let lost = 0;
  const reasons: string[] = [];
  const latencies = await Promise.all(
    Array.from({ length: count }, async (_, k) => {
      const i = offset + k;
      const t0 = performance.now();
      try {
        const thread = await client.threads.create();
        const run = await client.runs.create(thread.thread_id, "code_agent", {
          input: { task: `Bench run ${i}: print ${i} squared, then answer it.` },
        });
        // A run that never ends counts as lost (after 5 minutes) instead of hanging the bench.
        const values = (await Promise.race([
          client.runs.join(thread.thread_id, run.run_id),
          new Promise((_, reject) =>
            setTimeout(() => reject(new Error("run did not end")), 300_000).unref(),
          ),
        ])) as Record<string, unknown>;
        if (values?.answer !== String(i * i)) {
          wrong++;
          if (wrong <= 3) reasons.push(describeOutcome(values));
        }
      } catch (err) {
        lost++;
        if (lost <= 3) reasons.push((err as Error).message);
      }
      onProgress?.(++done);
      return performance.now() - t0;
    }),
  );
  return { latencies, wallMs: performance.now() - started, wrong, lost, retaken: 0, reasons };
}

/**
 * The server with `workers` worker processes (PER_WORKER runs each at once) on a fresh database:
 * a warm-up, then RUNS concurrent runs; with `killHalfway`, one worker is killed with SIGKILL once
 * half of them have finished.
 */
export async function serverRound(
  cluster: TestCluster,
  model: ScriptedOpenAIServer,
  workers: number,
  killHalfway = false,
): Promise<Batch> {
  const databaseUrl = await cluster.createDatabase(`bench_${workers}${killHalfway ? "_kill" : ""}`);
  const home = mkdtempSync(join(tmpdir(), "codehop-bench-serve-"));
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "bench",
    CODEHOP_MODEL: "scripted",
    CODEHOP_MAX_RETRIES: "0",
    CODEHOP_HOME: home,
    CODEHOP_DATABASE_URL: databaseUrl,
  };
  const procs: CliProcess[] = [];
  try {
    const server = spawnCodehop(["serve", "--port", "0", "--lease", String(LEASE)], env);
    procs.push(server);
    const url = await waitForLine(server, /listening on (http:\/\/\S+)/, "codehop serve");
    const started = await Promise.all(
      Array.from({ length: workers }, async (_, w) => {
        const p = spawnCodehop(
          [
            "worker",
            "--worker-id",
            `w${w}`,
            "--concurrency",
            String(PER_WORKER),
            "--lease",
            String(LEASE),
            "-q",
          ],
          env,
        );
        procs.push(p);
        await waitForLine(p, /ready/, `worker w${w}`);
        return p;
      }),
    );
    // The SDK queues requests beyond 4 at a time by default: every run is waited on at once here.
    const client = new Client({ apiUrl: url, callerOptions: { maxConcurrency: RUNS + 10 } });
    await submit(client, 4 * workers, 10_000); // warm-up: sandbox pools, graphs, connections
    let killed = false;
    const batch = await submit(client, RUNS, 0, (done) => {
      if (killHalfway && !killed && done >= RUNS / 2) {
        killed = true;
        started[0].child.kill("SIGKILL");
      }
    });
    if (killHalfway) {
      const db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
      const { rows } = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM codehop_runs WHERE attempt > 1 AND status = 'success'",
      );
      await db.end();
      batch.retaken = rows[0].n;
    }
    return batch;
  } finally {
    for (const p of procs) if (p.child.exitCode === null) p.child.kill("SIGTERM");
    await Promise.all(
      procs.map((p) => Promise.race([p.exited, new Promise((r) => setTimeout(r, 10_000))])),
    );
    for (const p of procs) if (p.child.exitCode === null) p.child.kill("SIGKILL");
    rmSync(home, { recursive: true, force: true });
  }
}

/** Throughput and latency of RUNS concurrent runs with 1, 2 and 4 workers, and with a worker killed. */
async function serverBench(cluster: TestCluster): Promise<BenchSection> {
  const loadBefore = loadavg()[0].toFixed(1);
  const model = await benchModel();
  const rows: (string | number)[][] = [];
  const verdicts: string[] = [];
  try {
    const line = (name: string, b: Batch) => [
      name,
      fmt(RUNS / (b.wallMs / 1000), 1),
      fmt(percentile(b.latencies, 50) / 1000, 2),
      fmt(percentile(b.latencies, 95) / 1000, 2),
      fmt(b.wallMs / 1000, 1),
      b.lost + b.wrong,
      // The machine is shared: the load next to each figure says how much of it this run had.
      loadavg()[0].toFixed(1),
    ];
    for (const workers of [1, 2, 4]) {
      const b = await serverRound(cluster, model, workers);
      rows.push(line(`${workers} worker${workers > 1 ? "s" : ""}`, b));
    }
    const killed = await serverRound(cluster, model, 2, true);
    rows.push([...line("2 workers, one killed (SIGKILL) halfway", killed)]);
    verdicts.push(
      `0 runs lost when a worker is killed halfway: ${killed.lost + killed.wrong === 0 ? "MET" : "NOT MET"} (${killed.lost} lost, ${killed.wrong} wrong answers; ${killed.retaken} runs finished by the other worker after the ${LEASE} s lease)`,
    );
  } finally {
    await model.close();
  }
  return {
    title: "Postgres: 200 concurrent runs through codehop serve",
    description: `${RUNS} runs submitted at once through the LangGraph SDK (threads.create, runs.create, runs.join; one thread each) to \`codehop serve\` with N \`codehop worker\` processes (each running up to ${PER_WORKER} runs at once with its own sandbox pool), all on one throwaway PostgreSQL 15 cluster (fsync on) on this machine. Each run is the code_agent graph with a scripted model answering after ${MODEL_MS} ms: 2 model calls and 2 sandbox actions (so at least ${(2 * MODEL_MS) / 1000} s). Latency = create to join per run; throughput = runs / wall time; a warm-up of 4 runs per worker first. The last row kills one of 2 workers with SIGKILL once ${RUNS / 2} runs have finished: its runs go to the other worker after the ${LEASE} s lease and resume from their checkpoints. Server, workers, model and database share the machine's cores; the 1-minute load average was ${loadBefore} when this section started${Number(loadBefore) > cpus().length ? " (above the core count: other jobs were running)" : ""}, and each row gives it as that row ended (${cpus().length} cores: a load above that means the figures are the share of the machine this run got, not its capacity).`,
    columns: [
      "setup",
      "runs/s",
      "p50 latency (s)",
      "p95 latency (s)",
      "wall (s)",
      "runs lost or wrong",
      "load avg (1 min) after",
    ],
    rows,
    verdicts,
  };
}

export default async function bench(): Promise<BenchSection[]> {
  const cluster = await startTestCluster({ fsync: true });
  try {
    return [await storage(cluster), await serverBench(cluster)];
  } finally {
    await cluster.stop();
  }
}
