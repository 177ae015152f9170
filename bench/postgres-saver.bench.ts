import { loadavg } from "node:os";
import { Annotation, type BaseCheckpointSaver, StateGraph } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import pg from "pg";
import { LinearPostgresSaver } from "@codehop/checkpoint-postgres";
import { startTestCluster } from "../src/testing/postgres-cluster.ts";
import { type BenchSection, fmt, percentile } from "./lib.ts";

/**
 * LinearPostgresSaver (codehop serve's checkpointer, packages/checkpoint-postgres)
 * next to the official PostgresSaver (the layout codehop serve used before) on the same LangGraph
 * loop of 50 and 200 steps (bench/checkpoint.bench.ts's: a 2 KB record appended per step): the tables' bytes, and the reads a user pays after it — the latest
 * checkpoint, an early checkpoint by id and list() of the whole thread — each by a fresh saver
 * instance (no cache: a worker or server process that did not run the thread), repeats
 * interleaved between the two savers, p50. Issue 23's targets: bytes <= 0.25x, each read <= 0.5x.
 */

const STEPS = [50, 200];
const RECORD = (i: number) =>
  `record ${i}: ${"lorem ipsum dolor sit amet ".repeat(80)}`.slice(0, 2048);

const State = Annotation.Root({
  log: Annotation<string[], string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  count: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
  status: Annotation<string>({ reducer: (_a, b) => b, default: () => "running" }),
});

/** Threads written after the first to measure the bytes a further thread costs. */
const MORE_THREADS = (steps: number) => (steps >= 200 ? 2 : 4);

/** The loop of bench/checkpoint.bench.ts for `steps` steps on `thread`; its wall time (ms). */
async function loopRun(saver: BaseCheckpointSaver, steps: number, thread = "t"): Promise<number> {
  const graph = new StateGraph(State)
    .addNode("step", (s: typeof State.State) => ({
      log: [RECORD(s.count)],
      count: s.count + 1,
      status: s.count + 1 >= steps ? "done" : "running",
    }))
    .addEdge("__start__", "step")
    .addConditionalEdges("step", (s: typeof State.State) => (s.count >= steps ? "__end__" : "step"))
    .compile({ checkpointer: saver });
  const t0 = performance.now();
  const out = await graph.invoke(
    {},
    { configurable: { thread_id: thread }, recursionLimit: steps + 10 },
  );
  if (out.log.length !== steps) throw new Error(`the loop stored ${out.log.length} records`);
  return performance.now() - t0;
}

/** Bytes of a schema's tables whose names start with `prefix` (heap + TOAST + indexes). */
async function tableBytes(pool: pg.Pool, schema: string, prefix: string): Promise<number> {
  await pool.query("CHECKPOINT");
  const { rows } = await pool.query<{ bytes: string }>(
    `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) AS bytes
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname LIKE $2`,
    [schema, `${prefix}%`],
  );
  return Number(rows[0].bytes);
}

/** The time of one read, and a check that it read the whole thread. */
async function timeRead(read: () => Promise<number>, expected: number, what: string) {
  const t0 = performance.now();
  const n = await read();
  const ms = performance.now() - t0;
  if (n !== expected) throw new Error(`${what}: read ${n}, expected ${expected}`);
  return ms;
}

export default async function postgresSaverBench(): Promise<BenchSection> {
  const cluster = await startTestCluster();
  const pool = new pg.Pool({ connectionString: cluster.url, max: 4 });
  const loadStart = loadavg()[0];
  const rows: (string | number)[][] = [];
  const verdicts: string[] = [];
  try {
    for (const steps of STEPS) {
      const savers = {
        official: (schema: string) => new PostgresSaver(pool, undefined, { schema }),
        linear: (schema: string) => new LinearPostgresSaver(pool, schema),
      };
      const schema = { official: `official_${steps}`, linear: `linear_${steps}` };
      const runMs: Record<string, number> = {};
      for (const kind of ["official", "linear"] as const) {
        const saver = savers[kind](schema[kind]);
        await saver.setup();
        runMs[kind] = await loopRun(saver, steps);
        console.error(
          `postgres-saver: ${kind} ${steps} steps written (${Math.round(runMs[kind])} ms)`,
        );
      }
      const bytes = {
        official: await tableBytes(pool, schema.official, "checkpoint"),
        linear: await tableBytes(pool, schema.linear, "linear_"),
      };
      // The bytes a further thread adds (the tables' fixed pages, maps and index roots paid
      // once): the same loop on more threads, the growth divided by their number.
      const more = MORE_THREADS(steps);
      for (let i = 1; i <= more; i++)
        for (const kind of ["official", "linear"] as const)
          await loopRun(savers[kind](schema[kind]), steps, `more-${i}`);
      const perThread = {
        official: ((await tableBytes(pool, schema.official, "checkpoint")) - bytes.official) / more,
        linear: ((await tableBytes(pool, schema.linear, "linear_")) - bytes.linear) / more,
      };
      console.error(`postgres-saver: ${steps} steps, ${more} more threads written`);
      // The thread's checkpoints (root and nested), newest first, and the root's latest step.
      const ids: string[] = [];
      for await (const t of savers.linear(schema.linear).list({ configurable: { thread_id: "t" } }))
        ids.push(t.config.configurable!.checkpoint_id as string);
      const rootIds: string[] = [];
      for await (const t of savers
        .linear(schema.linear)
        .list({ configurable: { thread_id: "t", checkpoint_ns: "" } }))
        rootIds.push(t.config.configurable!.checkpoint_id as string);
      const officialRootIds: string[] = [];
      for await (const t of savers
        .official(schema.official)
        .list({ configurable: { thread_id: "t", checkpoint_ns: "" } }))
        officialRootIds.push(t.config.configurable!.checkpoint_id as string);
      const times = {
        official: { latest: [] as number[], byId: [] as number[], list: [] as number[] },
        linear: { latest: [] as number[], byId: [] as number[], list: [] as number[] },
      };
      // Reads interleaved (official, linear, official, ...), each by a fresh saver.
      const repeats = steps >= 200 ? 3 : 7;
      for (let r = 0; r < repeats; r++)
        for (const kind of ["official", "linear"] as const) {
          const root = kind === "official" ? officialRootIds : rootIds;
          const early = root[Math.floor(root.length * 0.9)];
          const latest = root[0];
          let saver: BaseCheckpointSaver = savers[kind](schema[kind]);
          times[kind].latest.push(
            await timeRead(
              async () => {
                const t = await saver.getTuple({
                  configurable: { thread_id: "t", checkpoint_ns: "" },
                });
                return t?.checkpoint.id === latest ? 1 : 0;
              },
              1,
              `${kind} latest`,
            ),
          );
          saver = savers[kind](schema[kind]);
          times[kind].byId.push(
            await timeRead(
              async () => {
                const t = await saver.getTuple({
                  configurable: { thread_id: "t", checkpoint_ns: "", checkpoint_id: early },
                });
                return t?.checkpoint.id === early ? 1 : 0;
              },
              1,
              `${kind} by id`,
            ),
          );
          saver = savers[kind](schema[kind]);
          times[kind].list.push(
            await timeRead(
              async () => {
                let n = 0;
                for await (const _ of saver.list({ configurable: { thread_id: "t" } })) n++;
                return n;
              },
              ids.length,
              `${kind} list`,
            ),
          );
        }
      const load = loadavg()[0].toFixed(1);
      const line = (what: string, o: number, l: number, digits = 1, unit = "ms") => {
        rows.push([
          `${steps} steps: ${what}`,
          `${fmt(o, digits)} ${unit}`,
          `${fmt(l, digits)} ${unit}`,
          `${fmt(l / o, 2)}x`,
          load,
        ]);
        return l / o;
      };
      const bytesRatio = line(
        "tables' bytes, schema of one thread",
        bytes.official / 1024,
        bytes.linear / 1024,
        0,
        "KiB",
      );
      const perThreadRatio = line(
        `bytes per further thread (${more} more)`,
        perThread.official / 1024,
        perThread.linear / 1024,
        0,
        "KiB",
      );
      verdicts.push(
        `${steps} steps, bytes <= 0.25x the official PostgresSaver: per further thread ${perThreadRatio <= 0.25 ? "MET" : "NOT MET"} (${fmt(perThreadRatio, 2)}x); a schema of one thread ${bytesRatio <= 0.25 ? "MET" : "NOT MET"} (${fmt(bytesRatio, 2)}x)`,
      );
      line("run of the loop", runMs.official, runMs.linear, 0);
      for (const [what, key] of [
        ["latest, fresh saver p50", "latest"],
        ["early checkpoint by id, fresh saver p50", "byId"],
        [`list() of ${ids.length} checkpoints, fresh saver p50`, "list"],
      ] as const) {
        const ratio = line(
          what,
          percentile(times.official[key], 50),
          percentile(times.linear[key], 50),
          key === "list" ? 0 : 2,
        );
        verdicts.push(
          `${steps} steps, ${what.replace(/ p50$/, "")} <= 0.5x the official PostgresSaver: ${ratio <= 0.5 ? "MET" : "NOT MET"} (${fmt(ratio, 2)}x)`,
        );
      }
    }
  } finally {
    await pool.end();
    await cluster.stop();
  }
  return {
    title: "Postgres checkpointer: LinearPostgresSaver vs the official PostgresSaver",
    description: `One LangGraph loop of N steps (bench/checkpoint.bench.ts's: each step appends a 2 KB record to a list channel and updates two small channels) checkpointed by the official @langchain/langgraph-checkpoint-postgres PostgresSaver (the layout codehop serve used before) and by codehop's LinearPostgresSaver (what codehop serve uses), each in its own schema of one throwaway PostgreSQL 15 cluster (fsync on) on this machine. Bytes, the same for both savers: the total size of each saver's tables (pg_total_relation_size: heap, TOAST, indexes, free-space and visibility maps) after a CHECKPOINT, for a schema holding the one thread, and per further thread: the growth of that size when the loop runs on more threads (4 at 50 steps, 2 at 200), divided by their number — a table's fixed pages (its free-space map, index meta and root pages, TOAST index) are paid once per schema, not per thread. Reads after the run, each by a fresh saver instance on the same connection pool (no cache, as a server or worker that did not run the thread): the latest root checkpoint, an early checkpoint by id (90% of the way back), and list() of every checkpoint of the thread; repeats interleaved between the two savers (7 at 50 steps, 3 at 200), p50. Load: the 1-minute load average when that block of rows ended (2 shared cores; ${loadStart.toFixed(1)} at the start).`,
    columns: ["measure", "official PostgresSaver", "LinearPostgresSaver", "ratio", "load"],
    rows,
    verdicts,
  };
}
