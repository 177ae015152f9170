/**
 * Sandbox benchmark (issue 4): warm action latency of the SES child-process sandbox next to the
 * same snippets through node:vm (no isolation: the unsafe baseline), and the time to replace a
 * child process killed at its deadline.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import vm from "node:vm";
import { createSandbox, type CodeSandbox, type HostToolFn } from "../src/sandbox/index.ts";
import { SandboxChild } from "../src/sandbox/child-process.ts";
import { sesCodeCaches } from "../src/sandbox/code-cache.ts";
import { DEFAULT_LIMITS, DEFAULT_MAX_ADDRESS_SPACE_MB } from "../src/sandbox/limits.ts";
import { fmt, percentile, type BenchSection } from "./lib.ts";

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
    const startOne = async (heapMb: number, out: number[], cache: string) => {
      const child = new SandboxChild({ heapMb, addressSpaceMb: DEFAULT_MAX_ADDRESS_SPACE_MB });
      child.setRef(true);
      await child.ready;
      out.push(child.readyAt! - child.spawnedAt);
      child.kill("bench");
      await child.exited;
      if (child.codeCache !== cache)
        throw new Error(`expected code cache ${cache}, got ${child.codeCache}`);
    };
    for (let i = 0; i < REPLACEMENTS * 2; i++) {
      await startOne(DEFAULT_LIMITS.maxHeapMb, spawnReady, "used");
      await startOne(noCacheHeap, spawnReadyNoCache, "none");
    }
    sesCodeCaches.failures.delete(noCacheHeap);
    const replacementP50 = percentile(afterKill, 50);
    const baseline = await loadBaseline();
    const isolation = await isolationSection(baseline);
    const variables = await variablesSection(baseline);
    const serialization = await serializationSection();

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
          `${REPLACEMENTS * 2} times each, alternately with the SES code cache (docs/sandbox.md, "How a child starts") and without it.`,
        columns: ["measure", "p50", "p95", "max"],
        rows: [
          [
            "next action after a kill",
            fmt(replacementP50),
            fmt(percentile(afterKill, 95)),
            fmt(Math.max(...afterKill)),
          ],
          [
            "child spawn -> ready",
            fmt(percentile(spawnReady, 50)),
            fmt(percentile(spawnReady, 95)),
            fmt(Math.max(...spawnReady)),
          ],
          [
            "child spawn -> ready without the SES code cache",
            fmt(percentile(spawnReadyNoCache, 50)),
            fmt(percentile(spawnReadyNoCache, 95)),
            fmt(Math.max(...spawnReadyNoCache)),
          ],
        ],
        verdicts: [
          `replacement < 300 ms: ${replacementP50 < 300 ? "MET" : "NOT MET"} (p50 ${fmt(replacementP50)} ms)`,
        ],
      },
      isolation,
      variables,
      serialization,
    ];
  } finally {
    await sandbox.close();
  }
}
