/**
 * Sandbox benchmark (issue 4): warm action latency of the SES child-process sandbox next to the
 * same snippets through node:vm (no isolation: the unsafe baseline), and the time to replace a
 * child process killed at its deadline.
 */
import vm from "node:vm";
import { createSandbox, type HostToolFn } from "../src/sandbox/index.ts";
import { SandboxChild } from "../src/sandbox/pool.ts";
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

async function timeIt(fn: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < WARMUP; i++) await fn();
  const out: number[] = [];
  for (let i = 0; i < ITERATIONS; i++) {
    const t0 = performance.now();
    await fn();
    out.push(performance.now() - t0);
  }
  return out;
}

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
        const r = await sandbox.run({ code: s.code, tools: { echo } });
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
        code: "while (true) {}",
        tools: {},
        limits: { timeoutMs: 100 },
      });
      if (r.error?.name !== "TimeoutError")
        throw new Error(`expected a timeout, got ${JSON.stringify(r.error)}`);
      const t0 = performance.now();
      await sandbox.run({ code: "const x = 1;", tools: {} });
      afterKill.push(performance.now() - t0);
    }
    const spawnReady: number[] = [];
    for (let i = 0; i < REPLACEMENTS; i++) {
      const child = new SandboxChild({
        heapMb: DEFAULT_LIMITS.maxHeapMb,
        addressSpaceMb: DEFAULT_MAX_ADDRESS_SPACE_MB,
      });
      child.setRef(true);
      await child.ready;
      spawnReady.push(child.readyAt! - child.spawnedAt);
      child.kill("bench");
      await child.exited;
    }
    const replacementP50 = percentile(afterKill, 50);

    return [
      {
        title: "Sandbox: warm action latency (ms)",
        description:
          `${ITERATIONS} runs per snippet after ${WARMUP} warm-up runs, one sandbox with a warm pool of 1 child ` +
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
          "(it runs on the replacement child, started as soon as the old one died). Also the bare spawn -> locked-down -> ready time of one child.",
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
        ],
        verdicts: [
          `replacement < 300 ms: ${replacementP50 < 300 ? "MET" : "NOT MET"} (p50 ${fmt(replacementP50)} ms)`,
        ],
      },
    ];
  } finally {
    await sandbox.close();
  }
}
