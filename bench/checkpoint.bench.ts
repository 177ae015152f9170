import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Annotation, type BaseCheckpointSaver, StateGraph } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import Database from "better-sqlite3";
import { IncrementalSqliteSaver } from "@codehop/checkpoint-sqlite";
import { type BenchSection, fmt, percentile } from "./lib.ts";

/**
 * IncrementalSqliteSaver (packages/checkpoint-sqlite, codehop's default) next to the official
 * SqliteSaver on the same graph: a LangGraph loop that appends one 2 KB record per step to a list
 * channel and updates a few small channels. Every saver call LangGraph makes while running is
 * timed (put, putWrites, getTuple), then getTuple of the latest checkpoint, getTuple of an early
 * checkpoint by id, and a full list() of the thread are timed after the run.
 */

const STEPS = 200;
const RECORD = (i: number) =>
  `record ${i}: ${"lorem ipsum dolor sit amet ".repeat(80)}`.slice(0, 2048);

const State = Annotation.Root({
  log: Annotation<string[], string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  count: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
  status: Annotation<string>({ reducer: (_a, b) => b, default: () => "running" }),
});

function loopGraph(saver: BaseCheckpointSaver) {
  return new StateGraph(State)
    .addNode("step", (s: typeof State.State) => ({
      log: [RECORD(s.count)],
      count: s.count + 1,
      status: s.count + 1 >= STEPS ? "done" : "running",
    }))
    .addEdge("__start__", "step")
    .addConditionalEdges("step", (s: typeof State.State) => (s.count >= STEPS ? "__end__" : "step"))
    .compile({ checkpointer: saver });
}

/** Wraps a saver's methods to record how long each call takes (ms). */
function timed(saver: BaseCheckpointSaver): Record<string, number[]> {
  const times: Record<string, number[]> = { put: [], putWrites: [], getTuple: [] };
  for (const name of Object.keys(times)) {
    const original = (saver as any)[name].bind(saver);
    (saver as any)[name] = async (...args: unknown[]) => {
      const t0 = performance.now();
      try {
        return await original(...args);
      } finally {
        times[name].push(performance.now() - t0);
      }
    };
  }
  return times;
}

async function measure(kind: "official" | "incremental", dir: string) {
  const file = join(dir, `${kind}.db`);
  const saver =
    kind === "official"
      ? SqliteSaver.fromConnString(file)
      : IncrementalSqliteSaver.fromConnString(file);
  const graph = loopGraph(saver);
  const config = { configurable: { thread_id: "t" }, recursionLimit: STEPS + 10 };
  const t0 = performance.now();
  await graph.invoke({}, config);
  const runMs = performance.now() - t0;
  // After the run: reads a caller makes (resume = latest; history = list; time travel = by id).
  const ids: string[] = [];
  const latest: number[] = [];
  const byId: number[] = [];
  const list: number[] = [];
  for await (const t of saver.list({ configurable: { thread_id: "t" } })) {
    ids.push(t.config.configurable!.checkpoint_id as string);
  }
  for (let i = 0; i < 20; i++) {
    let s = performance.now();
    await saver.getTuple({ configurable: { thread_id: "t", checkpoint_ns: "" } });
    latest.push(performance.now() - s);
    const id = ids[ids.length - 1 - (i % 10)]; // an early checkpoint
    s = performance.now();
    await saver.getTuple({
      configurable: { thread_id: "t", checkpoint_ns: "", checkpoint_id: id },
    });
    byId.push(performance.now() - s);
    s = performance.now();
    let n = 0;
    for await (const _ of saver.list({ configurable: { thread_id: "t" } })) n++;
    list.push(performance.now() - s);
    if (n !== ids.length) throw new Error(`${kind}: list returned ${n} of ${ids.length}`);
  }
  (saver.db as Database.Database).pragma("wal_checkpoint(TRUNCATE)");
  saver.db.close();
  // A fresh instance (no cache) reads the latest state, as a resumed process would (p50 of 5).
  const cold: number[] = [];
  for (let i = 0; i < 5; i++) {
    const reopened =
      kind === "official"
        ? SqliteSaver.fromConnString(file)
        : IncrementalSqliteSaver.fromConnString(file);
    const s = performance.now();
    const tuple = await reopened.getTuple({ configurable: { thread_id: "t", checkpoint_ns: "" } });
    cold.push(performance.now() - s);
    if ((tuple?.checkpoint.channel_values.log as string[]).length !== STEPS) {
      throw new Error(`${kind}: reopened state has the wrong log length`);
    }
    reopened.db.close();
  }
  return {
    runMs,
    bytes: statSync(file).size,
    latest: percentile(latest, 50),
    byId: percentile(byId, 50),
    list: percentile(list, 50),
    coldLatest: percentile(cold, 50),
  };
}

/** Per-call p50 of the saver methods LangGraph calls while running (a separate timed run). */
async function perCall(kind: "official" | "incremental", dir: string) {
  const file = join(dir, `${kind}-calls.db`);
  const saver =
    kind === "official"
      ? SqliteSaver.fromConnString(file)
      : IncrementalSqliteSaver.fromConnString(file);
  const times = timed(saver);
  await loopGraph(saver).invoke(
    {},
    { configurable: { thread_id: "t" }, recursionLimit: STEPS + 10 },
  );
  saver.db.close();
  return {
    put: percentile(times.put, 50),
    putWrites: percentile(times.putWrites, 50),
    getTuple: percentile(times.getTuple, 50),
  };
}

export default async function checkpointBench(): Promise<BenchSection> {
  const dir = mkdtempSync(join(tmpdir(), "codehop-bench-checkpoint-"));
  try {
    // Warm both code paths once.
    await measure("official", mkdtempSync(join(dir, "warm-o-")));
    await measure("incremental", mkdtempSync(join(dir, "warm-i-")));
    const official = await measure("official", dir);
    const incremental = await measure("incremental", dir);
    const officialCalls = await perCall("official", dir);
    const incrementalCalls = await perCall("incremental", dir);
    const row = (name: string, o: number, i: number, digits = 3) => [
      name,
      fmt(o, digits),
      fmt(i, digits),
      `${fmt(i / o, 2)}x`,
    ];
    const rows = [
      row(`run of ${STEPS} steps (ms)`, official.runMs, incremental.runMs, 0),
      row("put p50 (ms)", officialCalls.put, incrementalCalls.put),
      row("putWrites p50 (ms)", officialCalls.putWrites, incrementalCalls.putWrites),
      row("getTuple during the run p50 (ms)", officialCalls.getTuple, incrementalCalls.getTuple),
      row("getTuple latest p50 (ms)", official.latest, incremental.latest),
      row("getTuple latest, fresh saver p50 (ms)", official.coldLatest, incremental.coldLatest),
      row("getTuple early checkpoint by id p50 (ms)", official.byId, incremental.byId),
      row(`list() of ${STEPS + 2} checkpoints p50 (ms)`, official.list, incremental.list),
      row(
        "file size after WAL checkpoint (KiB)",
        official.bytes / 1024,
        incremental.bytes / 1024,
        0,
      ),
    ];
    const verdict = (what: string, o: number, i: number) =>
      `${what}: IncrementalSqliteSaver at least as fast as the official saver: ${i <= o ? "MET" : "NOT MET"} (${fmt(i / o, 2)}x)`;
    return {
      title: "Checkpointer: IncrementalSqliteSaver vs the official SqliteSaver",
      description: `The same LangGraph loop on each saver (WAL, synchronous=NORMAL): ${STEPS} steps, each appending a 2 KB record to a list channel and updating two small channels. p50 of every put / putWrites / getTuple call LangGraph made in a run, then of 20 reads after it (latest checkpoint, an early checkpoint by id, list() of the whole thread), and the latest state read by a fresh saver instance (no cache; p50 of 5). Both pass @langchain/langgraph-checkpoint-validation except the official saver's one known failure (packages/checkpoint-sqlite/test/validation.test.ts). A put or putWrites promise resolves once its rows are committed: the IncrementalSqliteSaver commits queued rows together (on the next turn of the event loop, or at once when 32 wait), so in this loop, whose nodes never wait on I/O, its putWrites p50 is mostly the wait for the batch's commit, which the run does not wait for (LangGraph awaits them at the end); the run's wall time is what the writing costs.`,
      columns: ["operation", "official SqliteSaver", "IncrementalSqliteSaver", "ratio"],
      rows,
      verdicts: [
        verdict("put", officialCalls.put, incrementalCalls.put),
        verdict("getTuple latest", official.latest, incremental.latest),
        verdict("getTuple latest, fresh process", official.coldLatest, incremental.coldLatest),
        verdict("list", official.list, incremental.list),
      ],
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
