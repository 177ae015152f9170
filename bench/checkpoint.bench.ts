import { mkdtempSync, rmSync, statSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
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
 * checkpoint by id, and a full list() of the thread are timed after the run. Then the reads of a
 * fresh saver instance (what `codehop history`, a resume, Studio or a new process pay) on the
 * files of 50- and 200-step runs: the latest checkpoint, an early checkpoint by id, list() (issue
 * 23: <= 1.0x the official saver at 50 steps, keep the lead at 200), interleaved between the
 * savers, medians, with each read's CPU time and the load average.
 */

const STEPS = 200;
/** Thread lengths of the fresh-saver reads, and how many interleaved repeats each gets. */
const FRESH = [
  { steps: 50, repeats: 41 },
  { steps: 200, repeats: 9 },
];

/** Rounds of fresh reads run before the recorded ones (see freshReads). */
const WARMUP_ROUNDS = 5;

/** V8's gc(), so that every timed fresh read starts on a collected heap (not the last one's garbage). */
const gc = (() => {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
})();
const RECORD = (i: number) =>
  `record ${i}: ${"lorem ipsum dolor sit amet ".repeat(80)}`.slice(0, 2048);

const State = Annotation.Root({
  log: Annotation<string[], string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  count: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
  status: Annotation<string>({ reducer: (_a, b) => b, default: () => "running" }),
});

function loopGraph(saver: BaseCheckpointSaver, steps = STEPS) {
  return new StateGraph(State)
    .addNode("step", (s: typeof State.State) => ({
      log: [RECORD(s.count)],
      count: s.count + 1,
      status: s.count + 1 >= steps ? "done" : "running",
    }))
    .addEdge("__start__", "step")
    .addConditionalEdges("step", (s: typeof State.State) => (s.count >= steps ? "__end__" : "step"))
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

type Kind = "official" | "incremental";
const KINDS: Kind[] = ["official", "incremental"];

/** A saver of `kind` on a file (the official one as its docs open it; WAL either way). */
function openSaver(kind: Kind, file: string): BaseCheckpointSaver & { db: Database.Database } {
  return kind === "official"
    ? SqliteSaver.fromConnString(file)
    : IncrementalSqliteSaver.fromConnString(file);
}

async function measure(kind: Kind, dir: string) {
  const file = join(dir, `${kind}.db`);
  const saver = openSaver(kind, file);
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
  return {
    runMs,
    bytes: statSync(file).size,
    latest: percentile(latest, 50),
    byId: percentile(byId, 50),
    list: percentile(list, 50),
  };
}

/** Per-call p50 of the saver methods LangGraph calls while running (a separate timed run). */
async function perCall(kind: Kind, dir: string) {
  const file = join(dir, `${kind}-calls.db`);
  const saver = openSaver(kind, file);
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

const READS = ["latest", "by id", "list"] as const;
type Read = (typeof READS)[number];

/**
 * One read by a fresh saver instance on `file` (opened before the clock starts, closed after it
 * stops): wall and CPU time (ms). `early`: the id of an early checkpoint; `count`: how many
 * checkpoints list() must return.
 */
async function freshRead(kind: Kind, file: string, read: Read, early: string, count: number) {
  gc();
  const saver = openSaver(kind, file);
  const thread = { configurable: { thread_id: "t", checkpoint_ns: "" } };
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let got: number;
  if (read === "latest") got = (await saver.getTuple(thread)) ? 1 : 0;
  else if (read === "by id")
    got = (await saver.getTuple({
      configurable: { ...thread.configurable, checkpoint_id: early },
    }))
      ? 1
      : 0;
  else {
    got = 0;
    for await (const _ of saver.list({ configurable: { thread_id: "t" } })) got++;
  }
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  saver.db.close();
  const want = read === "list" ? count : 1;
  if (got !== want) throw new Error(`${kind} ${read}: read ${got} checkpoint(s), not ${want}`);
  return { wall, cpu: (cpu.user + cpu.system) / 1000 };
}

/**
 * Fresh-saver reads on the file of a `steps`-step run of each saver: `repeats` rounds, each
 * running every read on both savers (the order of the savers alternating between rounds), p50.
 */
async function freshReads(dir: string, steps: number, repeats: number) {
  const files = {} as Record<Kind, string>;
  const early = {} as Record<Kind, string>;
  let count = 0;
  for (const kind of KINDS) {
    files[kind] = join(dir, `${kind}-fresh-${steps}.db`);
    const saver = openSaver(kind, files[kind]);
    await loopGraph(saver, steps).invoke(
      {},
      { configurable: { thread_id: "t" }, recursionLimit: steps + 10 },
    );
    const ids: string[] = [];
    for await (const t of saver.list({ configurable: { thread_id: "t" } }))
      ids.push(t.config.configurable!.checkpoint_id as string);
    early[kind] = ids[Math.floor(ids.length * 0.9)]!; // 90% of the way back
    count = ids.length;
    saver.db.pragma("wal_checkpoint(TRUNCATE)");
    saver.db.close();
  }
  const loadStart = loadavg()[0];
  const times = new Map<string, { wall: number[]; cpu: number[] }>();
  // (Unrecorded rounds first: both savers' code compiled and optimized, as in a process that has
  // read before; the first rounds otherwise time V8 compiling the longer code path.)
  for (let r = -WARMUP_ROUNDS; r < repeats; r++)
    for (const read of READS)
      for (const kind of r % 2 ? [...KINDS].reverse() : KINDS) {
        const t = await freshRead(kind, files[kind], read, early[kind], count);
        if (r < 0) continue;
        const key = `${kind}\u0000${read}`;
        const entry = times.get(key) ?? { wall: [], cpu: [] };
        entry.wall.push(t.wall);
        entry.cpu.push(t.cpu);
        times.set(key, entry);
      }
  const p50 = (kind: Kind, read: Read) => {
    const t = times.get(`${kind}\u0000${read}`)!;
    return { wall: percentile(t.wall, 50), cpu: percentile(t.cpu, 50) };
  };
  return {
    steps,
    count,
    load: `${fmt(loadStart, 1)}-${fmt(loadavg()[0], 1)}`,
    reads: READS.map((read) => ({
      read,
      official: p50("official", read),
      incremental: p50("incremental", read),
    })),
  };
}

export default async function checkpointBench(): Promise<BenchSection[]> {
  const dir = mkdtempSync(join(tmpdir(), "codehop-bench-checkpoint-"));
  try {
    // Warm both code paths once.
    await measure("official", mkdtempSync(join(dir, "warm-o-")));
    await measure("incremental", mkdtempSync(join(dir, "warm-i-")));
    const official = await measure("official", dir);
    const incremental = await measure("incremental", dir);
    const officialCalls = await perCall("official", dir);
    const incrementalCalls = await perCall("incremental", dir);
    const fresh = [];
    for (const { steps, repeats } of FRESH) fresh.push(await freshReads(dir, steps, repeats));
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
    const what = (read: Read, count: number) =>
      read === "latest"
        ? "latest"
        : read === "by id"
          ? "early checkpoint by id"
          : `list() of ${count} checkpoints`;
    const freshRows = fresh.flatMap((f) =>
      f.reads.map(({ read, official: o, incremental: i }) => [
        `${f.steps} steps: ${what(read, f.count)}, fresh saver p50`,
        `${fmt(o.wall, 3)} ms`,
        `${fmt(i.wall, 3)} ms`,
        `${fmt(i.wall / o.wall, 2)}x`,
        `${fmt(i.cpu / o.cpu, 2)}x`,
        f.load,
      ]),
    );
    const freshVerdicts = fresh.flatMap((f) =>
      f.reads.map(({ read, official: o, incremental: i }) => {
        const ratio = i.wall / o.wall;
        const target =
          f.steps === 50
            ? "<= 1.0x the official saver"
            : "faster than the official saver (the lead kept)";
        return `${f.steps} steps, ${what(read, f.count)}, fresh saver ${target}: ${ratio <= 1 ? "MET" : "NOT MET"} (${fmt(ratio, 2)}x)`;
      }),
    );
    const freshSection: BenchSection = {
      title:
        "Checkpointer: reads of a fresh saver (IncrementalSqliteSaver vs the official SqliteSaver)",
      description: `What \`codehop history\`, a resume, Studio or a new process pay: a saver instance that has read nothing yet (a new connection to the file, no cache) reads the latest checkpoint, an early checkpoint by id (90% of the way back) or list() of the whole thread, on the file of a run of the loop above of N steps by each saver (after a WAL checkpoint). Each read gets its own fresh saver, opened before the clock starts; the heap is collected before each (gc()), so no read pays for the garbage of the one before. After 5 unrecorded rounds (both savers' code compiled and optimized, as in a process that has read before), repeats are interleaved (every read on both savers in turn, the order of the savers alternating between rounds: ${FRESH.map((f) => `${f.repeats} rounds at ${f.steps} steps`).join(", ")}); wall time p50, and the ratio of the CPU-time p50 (process.cpuUsage, user + system) beside it. Load: the 1-minute load average when the block started and ended (2 shared cores: on a loaded machine a longer read is descheduled more often, so wall-time ratios there are worse than CPU-time ratios).`,
      columns: [
        "read",
        "official SqliteSaver",
        "IncrementalSqliteSaver",
        "ratio",
        "CPU ratio",
        "load",
      ],
      rows: freshRows,
      verdicts: freshVerdicts,
    };
    const main: BenchSection = {
      title: "Checkpointer: IncrementalSqliteSaver vs the official SqliteSaver",
      description: `The same LangGraph loop on each saver (WAL, synchronous=NORMAL): ${STEPS} steps, each appending a 2 KB record to a list channel and updating two small channels. p50 of every put / putWrites / getTuple call LangGraph made in a run, then of 20 reads after it by the saver that ran it (latest checkpoint, an early checkpoint by id, list() of the whole thread; a fresh saver's reads are the next table). Both pass @langchain/langgraph-checkpoint-validation except the official saver's one known failure (packages/checkpoint-sqlite/test/validation.test.ts). A put or putWrites promise resolves once its rows are committed: the IncrementalSqliteSaver commits queued rows together (on the next turn of the event loop, or at once when 32 wait), so in this loop, whose nodes never wait on I/O, its putWrites p50 is mostly the wait for the batch's commit, which the run does not wait for (LangGraph awaits them at the end); the run's wall time is what the writing costs.`,
      columns: ["operation", "official SqliteSaver", "IncrementalSqliteSaver", "ratio"],
      rows,
      verdicts: [
        verdict("put", officialCalls.put, incrementalCalls.put),
        verdict("getTuple latest", official.latest, incremental.latest),
        verdict("list", official.list, incremental.list),
      ],
    };
    return [main, freshSection];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
