/**
 * Sandbox benchmark (issue 4): warm action latency of the SES child-process sandbox next to the
 * same snippets through node:vm (no isolation: the unsafe baseline), and the time to replace a
 * child process killed at its deadline.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { loadavg } from "node:os";
import vm from "node:vm";
import { createSandbox, type CodeSandbox, type HostToolFn } from "../src/sandbox/index.ts";
import { SandboxChild } from "../src/sandbox/child-process.ts";
import { CHILD_MODULES_ENTRY, CHILD_PROGRAM } from "../src/sandbox/child-launch.ts";
import { sesCodeCaches } from "../src/sandbox/code-cache.ts";
import { DEFAULT_LIMITS, DEFAULT_MAX_ADDRESS_SPACE_MB } from "../src/sandbox/limits.ts";
import { fmt, percentile, type BenchSection } from "./lib.ts";
import { ownCpuMs, treeCpuMs } from "./proc-cpu.ts";

const WARMUP = 30;
const ITERATIONS = 300;
const REPLACEMENTS = 10;

const SNIPPETS: { name: string; code: string }[] = [
  { name: "(a) trivial action", code: "const x = 1 + 1;" },
  { name: "(b) 10 sequential tool calls", code: "for (let i = 0; i < 10; i++) await echo(i);" },
  {
    name: "(c) 10 concurrent tool calls",
    code: "await Promise.all(Array.from({ length: 10 }, (_, i) => echo(i)));",
  },
];

const echo: HostToolFn = async (args) => args[0];

/** Times `runs` calls of `fn` after `warmup` untimed ones (ms each). */
async function timeRuns(
  fn: () => Promise<unknown>,
  warmup: number,
  runs: number,
): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await fn();
  const out: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await fn();
    out.push(performance.now() - t0);
  }
  return out;
}

const timeIt = (fn: () => Promise<unknown>) => timeRuns(fn, WARMUP, ITERATIONS);

/** node:vm baseline: the same async wrapper, host tool functions passed straight in. */
function vmRunner(freshContext: boolean): (code: string) => Promise<unknown> {
  const shared = vm.createContext({ echo: (x: unknown) => Promise.resolve(x) });
  return (code: string) => {
    const context = freshContext
      ? vm.createContext({ echo: (x: unknown) => Promise.resolve(x) })
      : shared;
    const fn = vm.runInContext(
      `(async function () {\n${code}\n})`,
      context,
    ) as () => Promise<unknown>;
    return fn();
  };
}

/**
 * The sandbox as it was before the isolation and variables work (issues 11 and 12), measured in the
 * same run: `git archive` of that commit's src/sandbox (and src/errors.ts) into bench/.baseline/,
 * imported from there. Null when git or the commit is not available (e.g. an installed package).
 */
export const BASELINE_COMMIT = "a2f6175";

export async function loadBaseline(): Promise<{ createSandbox: typeof createSandbox } | null> {
  const root = join(dirname(fileURLToPath(import.meta.url)), "..");
  const dir = join(root, "bench", ".baseline", BASELINE_COMMIT);
  const entry = join(dir, "src", "sandbox", "index.ts");
  try {
    if (!existsSync(entry)) {
      mkdirSync(dir, { recursive: true });
      const tar = execFileSync(
        "git",
        ["archive", BASELINE_COMMIT, "src/sandbox", "src/errors.ts"],
        {
          cwd: root,
          maxBuffer: 64 * 1024 * 1024,
        },
      );
      execFileSync("tar", ["-x", "-C", dir], { input: tar });
    }
    return (await import(pathToFileURL(entry).href)) as { createSandbox: typeof createSandbox };
  } catch {
    return null;
  }
}

/**
 * Guest code leaving ~0.94 MB of plain records (as JSON) in each of `names`: 13,000 records of 72
 * bytes, just under the 1 MB value limit (one value; two make the "2 MB" snapshot).
 */
function plainDataCode(...names: string[]): string {
  return names
    .map(
      (name) =>
        `const ${name} = Array.from({ length: 13000 }, (_, i) => ({ id: i, name: "item " + i, score: i * 0.5, tags: ["x", "y"], ok: i % 2 === 0 }));`,
    )
    .join("\n");
}

const VAR_WARMUP = 5;
const VAR_ITERATIONS = 40;

const timeN = (fn: () => Promise<unknown>) => timeRuns(fn, VAR_WARMUP, VAR_ITERATIONS);

/**
 * Variables (issue 12): a 1 MB value left at top level, and trivial actions carrying a 2 MB
 * snapshot, per action, next to node:vm and to the sandbox before the change.
 */
export async function variablesSection(baseline: { createSandbox: typeof createSandbox } | null) {
  const oneMb = plainDataCode("big");
  const twoMb = plainDataCode("data", "more");
  const measure = async (sb: CodeSandbox, session: string) => {
    // Each action of one run builds the value anew and leaves it at top level.
    const top = await timeN(async () => {
      const r = await sb.run({ code: oneMb, tools: {}, session: `${session}-top` } as never);
      if (!r.ok || !("big" in r.snapshot.values))
        throw new Error(`1 MB action failed: ${r.error?.message}`);
    });
    const first = await sb.run({ code: twoMb, tools: {}, session } as never);
    if (!first.ok || !("data" in first.snapshot.values) || !("more" in first.snapshot.values))
      throw new Error(`2 MB action failed: ${first.error?.message}`);
    let snapshot = first.snapshot;
    const carried = await timeN(async () => {
      const r = await sb.run({ code: "const x = 1 + 1;", tools: {}, snapshot, session } as never);
      if (!r.ok) throw new Error(`carried action failed: ${r.error?.message}`);
      snapshot = r.snapshot;
    });
    const touched = await timeN(async () => {
      const r = await sb.run({
        code: "const n = data.length;",
        tools: {},
        snapshot,
        session,
      } as never);
      if (!r.ok) throw new Error(`touching action failed: ${r.error?.message}`);
      snapshot = r.snapshot;
    });
    return { top, carried, touched };
  };
  const now = createSandbox({ poolSize: 1 });
  const before = baseline ? baseline.createSandbox({ poolSize: 1 }) : null;
  try {
    const after = await measure(now, "bench-now");
    const old = before ? await measure(before, "bench-before") : null;
    // node:vm: the same code in one reused context (values simply stay there), and in a fresh
    // context per action that carries the snapshot as JSON (the same REPL semantics, in-process).
    const shared = vm.createContext({});
    const vmTop = await timeN(async () =>
      vm.runInContext(`(() => { ${oneMb} return big.length })()`, shared),
    );
    // The same, carrying the value to the next step as JSON text (stringify, and parse it back).
    const vmTopJson = await timeN(async () => {
      const ctx = vm.createContext({});
      JSON.parse(vm.runInContext(`(() => { ${oneMb} return JSON.stringify(big) })()`, ctx));
    });
    vm.runInContext(
      `(() => { ${twoMb} globalThis.data = data; globalThis.more = more })()`,
      shared,
    );
    const vmCarriedShared = await timeN(async () =>
      vm.runInContext("(() => { const x = 1 + 1; return data.length })()", shared),
    );
    const json = vm.runInContext("JSON.stringify({ data, more })", shared) as string;
    let carriedJson = json;
    const vmCarriedFresh = await timeN(async () => {
      const ctx = vm.createContext({ saved: carriedJson });
      carriedJson = vm.runInContext(
        "const { data, more } = JSON.parse(saved); const x = 1 + 1; JSON.stringify({ data, more })",
        ctx,
      ) as string;
    });
    const p50 = (xs: number[] | undefined) => (xs ? percentile(xs, 50) : NaN);
    const row = (
      name: string,
      mine: number[],
      old: number[] | undefined,
      vmRef: number[],
      vmLabel: string,
    ) => [
      name,
      fmt(p50(mine)),
      fmt(percentile(mine, 95)),
      old ? fmt(p50(old)) : "n/a",
      fmt(p50(vmRef), 3),
      vmLabel,
      fmt(p50(mine) / p50(vmRef), 1),
      old ? fmt(p50(old) / p50(mine), 1) : "n/a",
    ];
    return {
      title: "Sandbox: variables per action (ms)",
      description:
        `${VAR_ITERATIONS} runs after ${VAR_WARMUP} warm-up runs. "1 MB top-level value": an action that builds ~1 MB of plain records ` +
        '(JSON) and leaves it in a top-level const (carried to the next step). "2 MB carried": trivial actions (`const x = 1 + 1;`) ' +
        "after a step that left ~2 MB of plain records in a variable, each passing the previous snapshot (one agent run); " +
        '"2 MB carried, read": the same but the action reads the value (`data.length`). "before" is the sandbox of commit ' +
        `${BASELINE_COMMIT} (before issues 11/12) measured in this same run. node:vm: the same code in-process with no isolation.`,
      columns: [
        "action",
        "p50",
        "p95",
        "before p50",
        "node:vm p50",
        "node:vm variant",
        "x node:vm",
        "speed-up vs before",
      ],
      rows: [
        row("1 MB top-level value", after.top, old?.top, vmTop, "reused context"),
        row(
          "1 MB top-level value (vs JSON carry)",
          after.top,
          old?.top,
          vmTopJson,
          "fresh context + JSON carry",
        ),
        row(
          "2 MB carried, trivial action",
          after.carried,
          old?.carried,
          vmCarriedShared,
          "reused context",
        ),
        row(
          "2 MB carried, trivial action (vs JSON carry)",
          after.carried,
          old?.carried,
          vmCarriedFresh,
          "fresh context + JSON carry",
        ),
        row(
          "2 MB carried, action reads it",
          after.touched,
          old?.touched,
          vmCarriedFresh,
          "fresh context + JSON carry",
        ),
      ],
    };
  } finally {
    await now.close();
    await before?.close();
  }
}

const ISO_ACTIONS = 30;

/**
 * Isolation (issue 11): per-action latency when actions belong to one agent run (a session: its
 * process is reused), to a new run each time (a process no run used before), or to no run at all
 * (a process per action), back to back and with a 200 ms model call between actions; next to the
 * sandbox before the change, where every action reused any idle process.
 */
export async function isolationSection(baseline: { createSandbox: typeof createSandbox } | null) {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  /** Creates a sandbox, lets its warm pool settle, times the actions, closes it. */
  const measure = async (
    make: typeof createSandbox,
    session: (i: number) => string | undefined,
    gapMs: number,
  ) => {
    const sb = make({ poolSize: 1 });
    try {
      for (let i = 0; i < 3; i++)
        await sb.run({ code: "const w = 1;", tools: {}, session: session(-1 - i) } as never);
      await sleep(1_000); // replacement processes started by the warm-up are up
      const out: number[] = [];
      for (let i = 0; i < ISO_ACTIONS; i++) {
        if (gapMs) await sleep(gapMs);
        const t0 = performance.now();
        const r = await sb.run({
          code: "const x = 1 + 1;",
          tools: {},
          session: session(i),
        } as never);
        out.push(performance.now() - t0);
        if (!r.ok) throw new Error(`isolation bench action failed: ${r.error?.message}`);
      }
      return out;
    } finally {
      await sb.close();
    }
  };
  const cases: { name: string; session: (i: number) => string | undefined; gap: number }[] = [
    { name: "one agent run (same session), back to back", session: () => "run", gap: 0 },
    { name: "a new agent run each action, back to back", session: (i) => `run-${i}`, gap: 0 },
    {
      name: "a new agent run each action, 200 ms model call between",
      session: (i) => `r200-${i}`,
      gap: 200,
    },
    { name: "no session (a process per action), back to back", session: () => undefined, gap: 0 },
  ];
  const rows: (string | number)[][] = [];
  for (const c of cases) {
    const after = await measure(createSandbox, c.session, c.gap);
    const old = baseline ? await measure(baseline.createSandbox, c.session, c.gap) : null;
    rows.push([
      c.name,
      fmt(percentile(after, 50)),
      fmt(percentile(after, 95)),
      old ? fmt(percentile(old, 50)) : "n/a",
      old ? fmt(percentile(old, 95)) : "n/a",
      old ? fmt(percentile(after, 50) / percentile(old, 50), 1) : "n/a",
    ]);
  }
  return {
    title: "Sandbox: per-action latency with per-run processes (ms)",
    description:
      `${ISO_ACTIONS} trivial actions per row, one sandbox with a warm pool of 1. A process serves one agent run ` +
      '(session) and is never lent to another; actions without a session get a process of their own. "before" is the ' +
      `sandbox of commit ${BASELINE_COMMIT}, which lent any idle process to any action, measured in this same run.`,
    columns: ["actions", "p50", "p95", "before p50", "before p95", "x before"],
    rows,
  };
}

/**
 * The child's copy of a guest value (src/sandbox/child/copy.mjs: a check that calls no guest code,
 * then JSON.stringify) next to JSON.stringify alone, on two kinds of plain data. Run in this
 * process (the copy module needs no lockdown); the child does the same work on the same data.
 */
export async function serializationSection(): Promise<BenchSection> {
  const { toJson } = await import("../src/sandbox/child/copy.mjs");
  const records = Array.from({ length: 13_000 }, (_, i) => ({
    id: i,
    name: "item " + i,
    score: i * 0.5,
    tags: ["x", "y"],
    ok: i % 2 === 0,
  }));
  const pages = Array.from({ length: 2_500 }, (_, i) => ({
    title: "Page " + i,
    url: "https://en.wikipedia.org/wiki/Page_" + i,
    snippet: ("Some text about page " + i + ". ").repeat(12),
  }));
  // Interleaved, so both see the same machine; the minimum is each one's cost without
  // interference from other processes (this machine is shared), the p50 what a run sees.
  const measure = (data: unknown) => {
    const plain: number[] = [];
    const copy: number[] = [];
    for (let i = 0; i < 100; i++) {
      let t0 = performance.now();
      JSON.stringify(data);
      if (i >= 10) plain.push(performance.now() - t0);
      t0 = performance.now();
      toJson(data, 1e7, 64, "x", true);
      if (i >= 10) copy.push(performance.now() - t0);
    }
    return { plain, copy };
  };
  const rows: (string | number)[][] = [];
  const ratios: number[] = [];
  for (const [name, data] of [
    ["13,000 small records (5 fields, 940 KB)", records],
    ["2,500 search results (title, url, 300-char snippet; 990 KB)", pages],
  ] as const) {
    if (toJson(data, 1e7, 64, "x", true) !== JSON.stringify(data)) throw new Error("copy differs");
    const { plain, copy } = measure(data);
    const ratio = Math.min(...copy) / Math.min(...plain);
    ratios.push(ratio);
    rows.push([
      name,
      fmt(Math.min(...plain)),
      fmt(Math.min(...copy)),
      fmt(ratio),
      fmt(percentile(plain, 50)),
      fmt(percentile(copy, 50)),
      fmt(percentile(copy, 50) / percentile(plain, 50)),
    ]);
  }
  return {
    title: "Sandbox: copying a guest value vs JSON.stringify (ms)",
    description:
      "90 interleaved runs each (min and p50). The copy first checks the value without calling guest code (an own property " +
      "descriptor per object property, a getter lookup per array element, proxies detected, prototypes compared with the intrinsics), then lets " +
      "JSON.stringify write it. Before issues 11/12 the copy was a JavaScript walker writing the text " +
      "itself: 13.5x JSON.stringify (issue 12), 23x on the records here.",
    columns: [
      "data",
      "JSON.stringify min",
      "copy min",
      "x (min)",
      "JSON.stringify p50",
      "copy p50",
      "x (p50)",
    ],
    rows,
    verdicts: ratios.map(
      (r, i) =>
        `${i === 0 ? "small records" : "search results"}: copy within 1.5x of JSON.stringify (min): ${r <= 1.5 ? "MET" : "NOT MET"} (${fmt(r)}x)`,
    ),
  };
}

const TARGET_REPEATS = 25;

/** "load 12.3" — the 1-minute load average now (figures on a shared machine mean little without it). */
export function loadNow(): string {
  return `load ${loadavg()[0].toFixed(1)}`;
}

/** Table rows of measures: name, p50, p95, max. */
function spreadRows(measures: [string, number[]][]): string[][] {
  return measures.map(([measure, v]) => [
    measure,
    fmt(percentile(v, 50)),
    fmt(percentile(v, 95)),
    fmt(Math.max(...v)),
  ]);
}

/**
 * What a new run's process costs: its CPU (all threads, from /proc: this process's children,
 * reaped ones included) until 200 ms after its first action, when that action is already waiting
 * for it (a one-shot CLI run starts nothing ahead) and when it was started 200 ms ahead (a model
 * call's time), both ways interleaved, each on a sandbox of its own that starts nothing ahead.
 * An idle process does nothing more than a waiting one: the child has no idle warm-up (a copy
 * warm-up of 3,000 records cost every run's process ~40 ms of CPU; docs/sandbox.md).
 */
async function runProcessSection(): Promise<BenchSection> {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const childrenCpu = () => treeCpuMs(process.pid) - ownCpuMs(process.pid);
  const waiting: number[] = [];
  const ahead: number[] = [];
  const firstWaiting: number[] = [];
  const loadBefore = loadNow();
  for (let i = 0; i < 2 * REPLACEMENTS; i++) {
    for (const mode of i % 2 ? (["ahead", "waiting"] as const) : (["waiting", "ahead"] as const)) {
      const sb = createSandbox({ poolSize: 0 });
      try {
        const before = childrenCpu();
        if (mode === "ahead") {
          sb.prepare?.("run");
          await sleep(200);
        }
        const t0 = performance.now();
        const r = await sb.run({ code: "const x = 1 + 1;", tools: {}, session: "run" });
        if (!r.ok) throw new Error(`run process bench action failed: ${r.error?.message}`);
        if (mode === "waiting") firstWaiting.push(performance.now() - t0);
        await sleep(200);
        (mode === "ahead" ? ahead : waiting).push(childrenCpu() - before);
      } finally {
        await sb.close();
      }
    }
  }
  return {
    title: "Sandbox: a new run's process, its first action waiting or started ahead",
    description: `${2 * REPLACEMENTS} times each, interleaved (${loadBefore} at the start): the CPU time of a new run's process (all threads, /proc ticks of 10 ms) until 200 ms after its first action, when that action waits for the process (nothing started ahead) and when the process was started 200 ms before it (a model call's time); and the waiting first action's own time, process start included. The child does no work while idle (no copy warm-up: docs/sandbox.md, "How a child starts"), so the two should cost the same.`,
    columns: ["measure", "p50", "p95", "max"],
    rows: spreadRows([
      ["process CPU ms, first action waiting for it", waiting],
      ["process CPU ms, started 200 ms ahead of its first action", ahead],
      ["first action waiting for its process, ms (start included)", firstWaiting],
    ]),
    verdicts: [
      `started ahead minus waiting (p50): ${fmt(percentile(ahead, 50) - percentile(waiting, 50))} ms of CPU`,
    ],
  };
}

/**
 * Issue 23's sandbox targets, in one run with interleaved repeats (each repeat measures every row
 * once, so all rows see the same machine): the first action of a new agent run (a process no run
 * used), with a model call's worth of time before it and back to back, and an action that leaves a
 * ~1 MB value, warm and as a run's first action, each next to node:vm doing the same in-process
 * with no isolation. Medians of the repeats; the load average at the start and end is recorded.
 */
export async function targetsSection(): Promise<BenchSection> {
  const oneMb = plainDataCode("big");
  // The default sandbox of agents (src/core/default-sandbox.ts): 3 started ahead (growing with the
  // rate of new runs), children through the launcher once a few have started.
  const sb = createSandbox({ poolSize: 3, launcher: "auto" });
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const loadBefore = loadNow();
  let session = 0;
  const runAs = async (code: string, name: string) => {
    const t0 = performance.now();
    const r = await sb.run({ code, tools: {}, session: name });
    const ms = performance.now() - t0;
    if (!r.ok) throw new Error(`targets bench action failed: ${r.error?.message}`);
    return ms;
  };
  const time = (fn: () => unknown) => {
    const t0 = performance.now();
    fn();
    return performance.now() - t0;
  };
  const rows = {
    vmFresh: [] as number[],
    vmOneMbJson: [] as number[],
    vmOneMbReused: [] as number[],
    firstAfterModel: [] as number[],
    firstBackToBack: [] as number[],
    oneMbWarm: [] as number[],
    oneMbFirst: [] as number[],
  };
  const shared = vm.createContext({});
  try {
    for (let i = -3; i < TARGET_REPEATS; i++) {
      const keep = i >= 0;
      const push = (xs: number[], v: number) => keep && xs.push(v);
      // node:vm: a fresh context per action; the 1 MB value carried as JSON text (as the sandbox
      // does), or simply left in one reused context.
      push(
        rows.vmFresh,
        time(() =>
          vm.runInContext("(() => { const x = 1 + 1; return x })()", vm.createContext({})),
        ),
      );
      push(
        rows.vmOneMbJson,
        time(() =>
          JSON.parse(
            vm.runInContext(
              `(() => { ${oneMb} return JSON.stringify(big) })()`,
              vm.createContext({}),
            ),
          ),
        ),
      );
      push(
        rows.vmOneMbReused,
        time(() => vm.runInContext(`(() => { ${oneMb} return big.length })()`, shared)),
      );
      // A new run's first action, after a 200 ms model call (the agent core binds the run's
      // process when the model call starts: prepare), then back to back with no time between.
      const a = `first-${session++}`;
      sb.prepare?.(a);
      await sleep(200);
      push(rows.firstAfterModel, await runAs("const x = 1 + 1;", a));
      sb.endSession?.(a);
      const b = `b2b-${session++}`;
      push(rows.firstBackToBack, await runAs("const x = 1 + 1;", b));
      sb.endSession?.(b);
      // The 1 MB action: warm (the same run's next action) and as a new run's first action.
      push(rows.oneMbWarm, await runAs(oneMb, "warm-1mb"));
      const c = `first-1mb-${session++}`;
      sb.prepare?.(c);
      await sleep(200);
      push(rows.oneMbFirst, await runAs(oneMb, c));
      sb.endSession?.(c);
    }
  } finally {
    await sb.close();
  }
  const p50 = (xs: number[]) => percentile(xs, 50);
  const ratio = (a: number[], b: number[]) => p50(a) / p50(b);
  const firstRatio = ratio(rows.firstBackToBack, rows.vmFresh);
  const warmRatio = ratio(rows.oneMbWarm, rows.vmOneMbJson);
  const firstMbRatio = ratio(rows.oneMbFirst, rows.vmOneMbJson);
  const loadAfter = loadNow();
  const row = (name: string, xs: number[], ref: number[] | null, refName: string) => [
    name,
    fmt(p50(xs)),
    fmt(percentile(xs, 95)),
    ref ? refName : "",
    ref ? `${fmt(ratio(xs, ref))}x` : "",
  ];
  return {
    title: "Sandbox: first actions and large values, as ratios (issue 23)",
    description:
      `${TARGET_REPEATS} interleaved repeats (each measures every row once, after 3 untimed ones), one sandbox set up as the default sandbox of agents (poolSize 3, launcher "auto"); ` +
      `median (p50) and p95 in ms. Load average ${loadBefore} at the start, ${loadAfter} at the end (2 shared cores). ` +
      'A "first action" is the first action of a new agent run: a process no run used (isolation: one fresh process per run). ' +
      '"after a 200 ms model call": the run\'s process is bound when its model call starts (`prepare`, as the agent core does) and the action comes 200 ms later; ' +
      '"back to back": a new run right after the previous one, no time between. The 1 MB action builds ~1 MB of plain records (13,000) ' +
      "and leaves them in a top-level const, carried to the next step. node:vm runs the same code in-process with no isolation: in a fresh context per action " +
      "(the 1 MB value carried to the next step as JSON text, as the sandbox carries it), or in one reused context (nothing carried).",
    columns: ["action", "p50", "p95", "compared with", "ratio (p50)"],
    rows: [
      row("node:vm, trivial action, fresh context", rows.vmFresh, null, ""),
      row(
        "first action of a new run, after a 200 ms model call",
        rows.firstAfterModel,
        rows.vmFresh,
        "node:vm fresh context",
      ),
      row(
        "first action of a new run, back to back",
        rows.firstBackToBack,
        rows.vmFresh,
        "node:vm fresh context",
      ),
      row("node:vm, 1 MB value, fresh context + JSON carry", rows.vmOneMbJson, null, ""),
      row("node:vm, 1 MB value, reused context", rows.vmOneMbReused, null, ""),
      row("1 MB value action, warm", rows.oneMbWarm, rows.vmOneMbJson, "node:vm fresh + JSON"),
      row(
        "1 MB value action, warm (vs reused context)",
        rows.oneMbWarm,
        rows.vmOneMbReused,
        "node:vm reused",
      ),
      row(
        "1 MB value action, a new run's first action",
        rows.oneMbFirst,
        rows.vmOneMbJson,
        "node:vm fresh + JSON",
      ),
    ],
    verdicts: [
      `first action of a new run p50 <= 10 ms (target at load 2-4; ${loadBefore}): ${p50(rows.firstAfterModel) <= 10 ? "MET" : "NOT MET"} (${fmt(p50(rows.firstAfterModel))} ms)`,
      `first action back to back <= 2x node:vm fresh context: ${firstRatio <= 2 ? "MET" : "NOT MET"} (${fmt(firstRatio)}x)`,
      `1 MB value action warm <= 3x node:vm: ${warmRatio <= 3 ? "MET" : "NOT MET"} (${fmt(warmRatio)}x node:vm fresh context + JSON carry; ${fmt(ratio(rows.oneMbWarm, rows.vmOneMbReused))}x a reused context)`,
      `1 MB value as a first action <= 5x node:vm: ${firstMbRatio <= 5 ? "MET" : "NOT MET"} (${fmt(firstMbRatio)}x node:vm fresh context + JSON carry)`,
    ],
  };
}

export default async function sandboxBench(): Promise<BenchSection[]> {
  const sandbox = createSandbox({ poolSize: 1 });
  const vmFresh = vmRunner(true);
  const vmShared = vmRunner(false);
  const rows: (string | number)[][] = [];
  let trivialRatio = NaN;
  let trivialVsShared = NaN;
  try {
    for (const s of SNIPPETS) {
      const ses = await timeIt(async () => {
        // The actions of one agent run (a session): its process is reused from action to action.
        const r = await sandbox.run({ code: s.code, tools: { echo }, session: "warm" });
        if (!r.ok) throw new Error(`bench snippet failed: ${r.error?.message}`);
      });
      const fresh = await timeIt(() => vmFresh(s.code));
      const shared = await timeIt(() => vmShared(s.code));
      const p50 = percentile(ses, 50);
      if (s.name.startsWith("(a)")) {
        trivialRatio = p50 / percentile(fresh, 50);
        trivialVsShared = p50 / percentile(shared, 50);
      }
      rows.push([
        s.name,
        fmt(p50),
        fmt(percentile(ses, 95)),
        fmt(percentile(fresh, 50)),
        fmt(percentile(fresh, 95)),
        fmt(percentile(shared, 50), 3),
        fmt(percentile(shared, 95), 3),
      ]);
    }

    // Replacement after a timeout kill: the next action's latency right after the kill (it waits
    // for the replacement process), and the bare spawn -> ready time of one child.
    const afterKill: number[] = [];
    for (let i = 0; i < REPLACEMENTS; i++) {
      const r = await sandbox.run({
        session: "killed",
        code: "while (true) {}",
        tools: {},
        limits: { timeoutMs: 100 },
      });
      if (r.error?.name !== "TimeoutError")
        throw new Error(`expected a timeout, got ${JSON.stringify(r.error)}`);
      const t0 = performance.now();
      await sandbox.run({ code: "const x = 1;", tools: {}, session: "killed" });
      afterKill.push(performance.now() - t0);
    }
    // Bare spawn -> ready, alternately with the SES code cache (the default heap size, whose cache
    // the pool made or found) and without it (a heap size 1 MB smaller, for which none is made):
    // side by side, on the same machine at the same moments.
    const spawnReady: number[] = [];
    const spawnReadyNoCache: number[] = [];
    const noCacheHeap = DEFAULT_LIMITS.maxHeapMb - 1;
    sesCodeCaches.failures.set(noCacheHeap, Infinity);
    const noCacheFile = sesCodeCaches.path({ heapMb: noCacheHeap, addressSpaceMb: null });
    if (noCacheFile) rmSync(noCacheFile, { force: true }); // one a sandbox of that heap size made
    // And the child loading its 12 ES modules instead of the bundle (child-bundle.ts), with the
    // code cache too: the start's CPU time (all threads) is read from /proc 200 ms after ready.
    const spawnReadyModules: number[] = [];
    const cpuBundle: number[] = [];
    const cpuModules: number[] = [];
    const startOne = async (
      heapMb: number,
      out: number[],
      cache: string,
      entry?: string,
      cpu?: number[],
    ) => {
      const child = new SandboxChild({
        heapMb,
        addressSpaceMb: DEFAULT_MAX_ADDRESS_SPACE_MB,
        entry,
      });
      child.setRef(true);
      await child.ready;
      out.push(child.readyAt! - child.spawnedAt);
      if (cpu) {
        // (V8's background threads finish the start's compiling and collecting after `ready`)
        await new Promise((r) => setTimeout(r, 200));
        cpu.push(treeCpuMs(child.proc.pid));
      }
      child.kill("bench");
      await child.exited;
      if (child.codeCache !== cache)
        throw new Error(`expected code cache ${cache}, got ${child.codeCache}`);
    };
    if (!CHILD_PROGRAM.bundled) throw new Error("no bundled sandbox child: run `npm run build`");
    for (let i = 0; i < REPLACEMENTS * 2; i++) {
      await startOne(DEFAULT_LIMITS.maxHeapMb, spawnReady, "used", undefined, cpuBundle);
      await startOne(
        DEFAULT_LIMITS.maxHeapMb,
        spawnReadyModules,
        "used",
        CHILD_MODULES_ENTRY,
        cpuModules,
      );
      await startOne(noCacheHeap, spawnReadyNoCache, "none");
    }
    sesCodeCaches.failures.delete(noCacheHeap);
    const replacementP50 = percentile(afterKill, 50);
    const baseline = await loadBaseline();
    const isolation = await isolationSection(baseline);
    const variables = await variablesSection(baseline);
    const serialization = await serializationSection();
    const targets = await targetsSection();
    const runProcess = await runProcessSection();

    return [
      {
        title: "Sandbox: warm action latency (ms)",
        description:
          `${ITERATIONS} runs per snippet after ${WARMUP} warm-up runs, the actions of one agent run (one session) on a sandbox with a warm pool of 1 child ` +
          "(SES Compartment per action in a locked-down child process, JSON over pipes). node:vm runs the same " +
          "async-wrapped snippet in-process with no isolation, either in a fresh context per action (the closest " +
          "analogue: fresh global per action) or in one reused context.",
        columns: [
          "snippet",
          "SES p50",
          "SES p95",
          "vm fresh ctx p50",
          "vm fresh ctx p95",
          "vm reused ctx p50",
          "vm reused ctx p95",
        ],
        rows,
        verdicts: [
          `warm trivial p50 <= 3x node:vm (fresh context): ${trivialRatio <= 3 ? "MET" : "NOT MET"} (${fmt(trivialRatio)}x)`,
          `against one reused node:vm context (no per-action isolation at all) the trivial p50 is ${fmt(trivialVsShared, 0)}x: an IPC round trip vs a function call`,
        ],
      },
      {
        title: "Sandbox: process replacement after a timeout kill (ms)",
        description:
          `${REPLACEMENTS} times: an infinite loop is SIGKILLed at a 100 ms deadline, then the next trivial action is timed ` +
          "(it runs on the replacement child, started as soon as the old one died). Also the bare spawn -> locked-down -> ready time of one child (ready: after its warm-up action), " +
          `${REPLACEMENTS * 2} times each, alternately with the SES code cache (docs/sandbox.md, "How a child starts"), without it, and from the child's ES modules instead of its bundle (with the cache; the CPU time of the start, all threads, read from /proc 200 ms after ready).`,
        columns: ["measure", "p50", "p95", "max"],
        rows: spreadRows([
          ["next action after a kill", afterKill],
          ["child spawn -> ready", spawnReady],
          ["child spawn -> ready without the SES code cache", spawnReadyNoCache],
          ["child spawn -> ready from its ES modules (not the bundle)", spawnReadyModules],
          ["child start CPU time (bundle)", cpuBundle],
          ["child start CPU time (ES modules)", cpuModules],
        ]),
        verdicts: [
          `replacement < 300 ms: ${replacementP50 < 300 ? "MET" : "NOT MET"} (p50 ${fmt(replacementP50)} ms)`,
          `child start CPU, bundle vs ES modules (p50, /proc ticks of 10 ms): ${fmt(percentile(cpuBundle, 50) / percentile(cpuModules, 50))}x`,
        ],
      },
      isolation,
      variables,
      serialization,
      targets,
      runProcess,
    ];
  } finally {
    await sandbox.close();
  }
}
