/**
 * The cap on child processes (`maxProcesses`): concurrent actions queue instead of spawning without
 * bound, queue time does not eat into an action's deadline, nested actions at the cap do not
 * deadlock, and closing or cancelling releases queued actions cleanly.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { CodehopError } from "../../src/errors.ts";
import {
  createSandbox,
  MAX_NESTING_EXTRA_PROCESSES,
  type HostToolFn,
} from "../../src/sandbox/index.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The deadline of the nested actions' tests: far above what they need even on a loaded machine
 * (process starts there take seconds), so none times out. A deadlock then fails the test by its
 * timeout, and a cycle broken by a timeout shows as a TimeoutError in the results.
 */
const NESTED_DEADLINE_MS = 120_000;
/** Those tests' own timeout: above the actions' deadline. */
const NESTED_TEST_TIMEOUT = { timeout: 180_000 };

/**
 * Live OS processes whose parent is this process (the sandbox children; prlimit execs node), less
 * those in `before`: a test worker shared with earlier files (vitest `isolate: false`) may still
 * hold their processes (the process-wide default sandbox's warm pool).
 */
function osChildren(before: ReadonlySet<number> = new Set()): number | null {
  if (!existsSync("/proc/self/stat")) return null;
  return osChildPids().filter((pid) => !before.has(pid)).length;
}

/** Pids of the live OS processes whose parent is this process. */
function osChildPids(): number[] {
  if (!existsSync("/proc/self/stat")) return [];
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // Fields after the ")" that ends the command name: state, ppid, ...
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(ppid) === process.pid && state !== "Z") pids.push(Number(entry));
    } catch {
      // the process exited while we looked
    }
  }
  return pids;
}

const sandboxes: ReturnType<typeof createSandbox>[] = [];
function make(options: Parameters<typeof createSandbox>[0]) {
  const s = createSandbox(options);
  sandboxes.push(s);
  return s;
}
afterEach(async () => {
  await Promise.all(sandboxes.splice(0).map((s) => s.close()));
});

describe("maxProcesses", () => {
  it("3N concurrent actions that all wait in a tool call never have more than N live processes, and all complete", async () => {
    const N = 3;
    const before = new Set(osChildPids());
    const sandbox = make({ poolSize: 1, maxProcesses: N, limits: { timeoutMs: 10_000 } });
    let liveSeen = 0;
    let osSeen = 0;
    let queuedSeen = 0;
    const wait: HostToolFn = async (args) => {
      liveSeen = Math.max(liveSeen, sandbox.processCount);
      osSeen = Math.max(osSeen, osChildren(before) ?? 0);
      queuedSeen = Math.max(queuedSeen, sandbox.queuedActions);
      await sleep(60);
      return `done ${String(args[0])}`;
    };
    const results = await Promise.all(
      Array.from({ length: 3 * N }, (_, i) =>
        sandbox.run({ code: `final_answer(await wait(${i}))`, tools: { wait } }),
      ),
    );
    expect(results.map((r) => r.finalAnswer)).toEqual(
      Array.from({ length: 3 * N }, (_, i) => `done ${i}`),
    );
    expect(sandbox.peakProcessCount).toBe(N);
    expect(liveSeen).toBeLessThanOrEqual(N);
    if (osChildren() !== null) {
      expect(osSeen).toBeGreaterThan(0);
      expect(osSeen).toBeLessThanOrEqual(N);
    }
    expect(queuedSeen).toBeGreaterThan(0); // the cap was reached: later actions waited
    expect(sandbox.queuedActions).toBe(0);
  });

  it(
    "time spent waiting for a process does not count against the action's deadline",
    { timeout: 180_000 },
    async () => {
      // 4 actions of 3 s each on 1 process, 8 s deadline each: the last one starts its work 9 s or
      // more after it was submitted (past its deadline), while each action's own 3 s leave 5 s for
      // a loaded machine's overhead. (The queue's wait includes each predecessor's process start.)
      const deadline = 8_000;
      const sandbox = make({ poolSize: 1, maxProcesses: 1, limits: { timeoutMs: deadline } });
      const began: number[] = [];
      const work: HostToolFn = async () => {
        began.push(performance.now());
        await sleep(3_000);
        return 1;
      };
      const t0 = performance.now();
      const results = await Promise.all(
        Array.from({ length: 4 }, () =>
          sandbox.run({ code: "final_answer(await work())", tools: { work } }),
        ),
      );
      expect(results.map((r) => r.error)).toEqual(Array(4).fill(null));
      // They ran one after another, the last one past the deadline counted from its submission.
      expect(Math.max(...began) - t0).toBeGreaterThan(deadline);
      expect(sandbox.peakProcessCount).toBe(1);
    },
  );

  it(
    "nested actions at the cap (each holder awaits a queued inner action) complete without deadlock",
    NESTED_TEST_TIMEOUT,
    async () => {
      // Two top-level actions take both processes, then each awaits a tool that runs an inner action,
      // which itself awaits a tool that runs an innermost action: a plain cap would wait forever.
      const N = 2;
      const sandbox = make({
        poolSize: 0,
        maxProcesses: N,
        limits: { timeoutMs: NESTED_DEADLINE_MS },
      });
      const leaf: HostToolFn = async (args) => `leaf(${String(args[0])})`;
      const inner: HostToolFn = async (args) => {
        const r = await sandbox.run({
          code: `final_answer(await leaf(${args[0]}))`,
          tools: { leaf },
        });
        return r.finalAnswer;
      };
      const outer: HostToolFn = async (args) => {
        const r = await sandbox.run({
          code: `final_answer(await inner(${args[0]}))`,
          tools: { inner },
        });
        return r.finalAnswer;
      };
      const results = await Promise.all(
        [1, 2].map((i) =>
          sandbox.run({
            code: `const [a, b] = await Promise.all([outer(${i}0), outer(${i}1)]);\nfinal_answer([a, b])`,
            tools: { outer },
          }),
        ),
      );
      // Every action answered: none waited for a timeout to break the cycle.
      expect(results.map((r) => r.error)).toEqual([null, null]);
      expect(results.map((r) => r.finalAnswer)).toEqual([
        ["leaf(10)", "leaf(11)"],
        ["leaf(20)", "leaf(21)"],
      ]);
      // Extra processes only along the nesting, never one per queued action (that would be 2+4+4).
      expect(sandbox.peakProcessCount).toBeGreaterThan(N);
      expect(sandbox.peakProcessCount).toBeLessThanOrEqual(N + 3);
    },
  );

  it("a holder waiting on something else (not a queued action) gets no extra process: the queue waits", async () => {
    const sandbox = make({ poolSize: 0, maxProcesses: 1 });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow: HostToolFn = async () => {
      await gate;
      return "slow";
    };
    const first = sandbox.run({ code: "final_answer(await slow())", tools: { slow } });
    while (sandbox.processCount === 0) await sleep(5);
    const second = sandbox.run({ code: "final_answer('second')", tools: {} });
    await sleep(300);
    expect(sandbox.queuedActions).toBe(1);
    expect(sandbox.processCount).toBe(1);
    release();
    expect((await first).finalAnswer).toBe("slow");
    expect((await second).finalAnswer).toBe("second");
    expect(sandbox.peakProcessCount).toBe(1);
  });

  it(
    `nesting deeper than the cap plus ${MAX_NESTING_EXTRA_PROCESSES} extras fails with SandboxBusyError instead of hanging`,
    NESTED_TEST_TIMEOUT,
    async () => {
      const sandbox = make({
        poolSize: 0,
        maxProcesses: 1,
        limits: { timeoutMs: NESTED_DEADLINE_MS },
      });
      const errors: string[] = [];
      const deeper: HostToolFn = async (args) => {
        const n = Number(args[0]);
        if (n === 0) return "bottom";
        const r = await sandbox.run({
          code: `final_answer(await deeper(${n - 1}))`,
          tools: { deeper },
        });
        if (r.error) errors.push(`${r.error.name}: ${r.error.message}`);
        return r.finalAnswer ?? `failed at ${n - 1}`;
      };
      const depth = 1 + MAX_NESTING_EXTRA_PROCESSES + 2;
      const r = await sandbox.run({
        code: `final_answer(await deeper(${depth}))`,
        tools: { deeper },
      });
      expect(r.ok).toBe(true);
      expect(r.finalAnswer).toBe(`failed at ${depth - 1 - MAX_NESTING_EXTRA_PROCESSES}`);
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatch(
        /^SandboxBusyError: No sandbox process can come free: all 9 \(the limit of 1 plus 8 for nesting\)/,
      );
      expect(sandbox.peakProcessCount).toBe(1 + MAX_NESTING_EXTRA_PROCESSES);
    },
  );

  it("at the cap, an action needing another heap limit makes room by retiring an idle process", async () => {
    const sandbox = make({ poolSize: 1, maxProcesses: 1 });
    const a = await sandbox.run({ code: "final_answer(1)", tools: {} });
    const b = await sandbox.run({
      code: "final_answer(2)",
      tools: {},
      limits: { maxHeapMb: 128 },
    });
    const c = await sandbox.run({ code: "final_answer(3)", tools: {} });
    expect([a, b, c].map((r) => r.finalAnswer)).toEqual([1, 2, 3]);
    expect(sandbox.peakProcessCount).toBe(1);
  });

  it("close() rejects queued actions with CODEHOP_SANDBOX_INTERNAL and ends the running one", async () => {
    const sandbox = make({ poolSize: 1, maxProcesses: 1 });
    let hanging = false;
    const hang: HostToolFn = () => {
      hanging = true;
      return new Promise(() => {});
    };
    const running = sandbox.run({ code: "await hang()", tools: { hang } });
    while (!hanging) await sleep(5);
    // Observed from the start: they reject while close() is still waiting for the children.
    const queued = [1, 2].map((i) =>
      sandbox.run({ code: `final_answer(${i})`, tools: {} }).then(
        () => null,
        (e: unknown) => e,
      ),
    );
    while (sandbox.queuedActions < 2) await sleep(5);
    await sandbox.close();
    for (const err of await Promise.all(queued)) {
      expect(CodehopError.isInstance(err)).toBe(true);
      expect((err as CodehopError).code).toBe("CODEHOP_SANDBOX_INTERNAL");
      expect((err as Error).message).toBe(
        "The sandbox was closed while the action waited for a process",
      );
    }
    const r = await running;
    expect(r.ok).toBe(false);
    expect(r.error?.name).toBe("SandboxError");
    expect(sandbox.processCount).toBe(0);
    expect(sandbox.queuedActions).toBe(0);
  });

  it("a queued action whose signal fires leaves the queue and reports AbortError", async () => {
    const sandbox = make({ poolSize: 1, maxProcesses: 1 });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const wait: HostToolFn = async () => {
      await gate;
      return 1;
    };
    const running = sandbox.run({ code: "final_answer(await wait())", tools: { wait } });
    const controller = new AbortController();
    const queued = sandbox.run({ code: "final_answer(2)", tools: {}, signal: controller.signal });
    while (sandbox.queuedActions < 1) await sleep(5);
    controller.abort();
    const q = await queued;
    expect(q.error?.name).toBe("AbortError");
    expect(sandbox.queuedActions).toBe(0);
    release();
    expect((await running).finalAnswer).toBe(1);
  });

  it("rejects a cap below 1 or below poolSize", () => {
    for (const options of [
      { maxProcesses: 0 },
      { poolSize: 3, maxProcesses: 2 },
      { maxProcesses: 1.5 },
    ]) {
      let err: unknown;
      try {
        createSandbox(options);
      } catch (e) {
        err = e;
      }
      expect((err as CodehopError).code).toBe("CODEHOP_CONFIG_INVALID");
    }
  });
});
