/**
 * Conformance: denial-of-service attempts under tight limits (1.5 s per action, 96 MB heap, small
 * output / tool-call caps). Every attack must end within its limit with a clear error, the host must
 * be unaffected, and the next action must run normally. Attacks that a cap other than the deadline
 * must stop run in a twin sandbox with a roomy deadline: on a loaded machine a starved child can hit
 * 1.5 s of wall time before its heap or call cap, which would test the deadline instead.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CodeSandbox, HostToolFn } from "../../../src/sandbox/contract.ts";
import type { SandboxFactory } from "../conformance.ts";

const TIMEOUT = 1_500;
/** The twin sandbox's deadline, for attacks the heap, output or call caps must stop. */
const ROOMY_TIMEOUT = 30_000;
/** Kill + restart slack on top of a deadline; only a hang (the test's own timeout) exceeds it. */
const SLACK = 10_000;

/** Registers the denial-of-service part of the suite. */
export function describeDenialOfService(factory: SandboxFactory): void {
  let sandbox: CodeSandbox;
  let roomy: CodeSandbox;
  beforeAll(() => {
    const limits = {
      timeoutMs: TIMEOUT,
      maxHeapMb: 96,
      maxOutputChars: 2_000,
      maxToolCalls: 50,
      maxConcurrentToolCalls: 3,
    };
    sandbox = factory.create({ limits });
    roomy = factory.create({ limits: { ...limits, timeoutMs: ROOMY_TIMEOUT } });
  });
  afterAll(async () => {
    await sandbox.close();
    await roomy.close();
  });

  let hostCalls = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  const ping: HostToolFn = async () => {
    hostCalls++;
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    await new Promise((r) => setTimeout(r, 5));
    inFlight--;
    return "pong";
  };
  const tools = { ping };

  /** Runs an attack the 1.5 s deadline may end; `byCap` runs it where only another cap can. */
  async function attack(code: string, { byCap = false } = {}) {
    const target = byCap ? roomy : sandbox;
    const t0 = performance.now();
    const r = await target.run({ code, tools });
    const elapsed = performance.now() - t0;
    // The limit holds (plus process kill + startup slack), and the sandbox still works afterwards.
    expect(elapsed).toBeLessThan((byCap ? ROOMY_TIMEOUT : TIMEOUT) + SLACK);
    if (byCap) expect(r.error?.name).not.toBe("TimeoutError");
    const after = await target.run({ code: "final_answer(6 * 7)", tools });
    expect(after.finalAnswer).toBe(42);
    return r;
  }

  describe("denial of service", () => {
    it("a synchronous infinite loop is killed at the deadline", async () => {
      const r = await attack("let i = 0;\nwhile (true) { i++ }");
      expect(r.error?.name).toBe("TimeoutError");
    });

    it("an asynchronous (microtask) infinite loop is killed at the deadline", async () => {
      const r = await attack("while (true) await null;");
      expect(r.error?.name).toBe("TimeoutError");
    });

    it("catastrophic regex backtracking is killed at the deadline", async () => {
      const r = await attack("/(a+)+$/.test('a'.repeat(40) + 'b')");
      expect(r.error?.name).toBe("TimeoutError");
    });

    it("join() on a huge sparse array ends with an error, not a hang", async () => {
      const r = await attack("new Array(2 ** 32 - 1).join('x')");
      expect(r.ok).toBe(false);
      expect(["RangeError", "TimeoutError", "MemoryError"]).toContain(r.error?.name);
    });

    it("a heap allocation bomb is stopped by the heap limit", async () => {
      const r = await attack("const a = [];\nwhile (true) a.push(new Array(1e5).fill(1));", {
        byCap: true,
      });
      expect(r.error?.name).toBe("MemoryError");
    });

    it("an ArrayBuffer bomb is stopped by the OS memory limit (or the deadline)", async () => {
      const r = await attack(
        "const bufs = [];\nfor (;;) bufs.push(new Uint8Array(64 * 1024 * 1024).fill(1));",
      );
      expect(r.ok).toBe(false);
      expect(["RangeError", "MemoryError", "TimeoutError"]).toContain(r.error?.name);
    });

    it("string doubling ends with RangeError", async () => {
      const r = await attack("let s = 'x';\nfor (;;) s += s;", { byCap: true });
      expect(r.error?.name).toBe("RangeError");
      expect(r.snapshot.unserializable.s).toMatch(/too large/);
    });

    it("a V8 fatal size error in the child is reported as MemoryError", async () => {
      const r = await attack("'x'.repeat(2 ** 28).split('')");
      expect(r.ok).toBe(false);
      expect(["MemoryError", "RangeError", "TimeoutError"]).toContain(r.error?.name);
    });

    it("deep recursion is a catchable RangeError", async () => {
      const r = await attack(
        "function f(n) { return f(n + 1) }\ntry { f(0) } catch (e) { final_answer(e.name) }",
        { byCap: true },
      );
      expect(r.finalAnswer).toBe("RangeError");
    });

    it("an output flood is capped, keeps head and tail, and ends at the deadline", async () => {
      const r = await attack("for (let i = 0; ; i++) print('line ' + i + ' ' + 'x'.repeat(100))");
      expect(r.error?.name).toBe("TimeoutError");
      expect(r.logs.startsWith("line 0 ")).toBe(true);
      expect(r.logs.length).toBeLessThan(2_200);
      expect(r.logs).toMatch(/output after this point was lost/);
    });

    it("one huge log line is cut to the output limit", async () => {
      const r = await attack("print('y'.repeat(5e6));\nprint('end')", { byCap: true });
      expect(r.ok).toBe(true);
      expect(r.logs.length).toBeLessThan(2_200);
      expect(r.logs.endsWith("end\n")).toBe(true);
    });

    it("a tool-call flood is cut at maxToolCalls and runs at most maxConcurrentToolCalls at once", async () => {
      hostCalls = 0;
      maxInFlight = 0;
      const r = await attack(
        "const ps = [];\nfor (let i = 0; i < 100000; i++) ps.push(ping(i).catch((e) => e.message));\nconst out = await Promise.all(ps);\nfinal_answer([out.filter((x) => x === 'pong').length, out[out.length - 1]]);",
        { byCap: true },
      );
      expect(r.finalAnswer).toEqual([
        50,
        "Tool call limit reached: at most 50 tool calls per action",
      ]);
      expect(r.toolCalls).toBe(50);
      expect(hostCalls).toBe(50);
      expect(maxInFlight).toBeLessThanOrEqual(3);
    });

    it("tool arguments of one action are capped in total, not just per call", async () => {
      hostCalls = 0;
      const r = await attack(
        "const chunk = 'x'.repeat(900000);\nconst out = [];\nfor (let i = 0; i < 12; i++) { try { await ping(chunk); out.push('ok') } catch (e) { out.push(e.message) } }\nfinal_answer(out)",
        { byCap: true },
      );
      const out = r.finalAnswer as string[];
      expect(out.filter((x) => x === "ok")).toHaveLength(8);
      expect(out[11]).toMatch(/exceed 8000000 bytes in total/);
      expect(hostCalls).toBe(8);
    });

    it("code that keeps spinning after final_answer still returns the answer promptly", async () => {
      const r = await attack("final_answer('early');\nfor (;;) {}");
      expect(r.isFinalAnswer).toBe(true);
      expect(r.finalAnswer).toBe("early");
    });

    it("a background microtask loop left behind after the action ends does not hold the process", async () => {
      const r = await attack(
        "(async () => { for (;;) { try { await ping() } catch {} } })();\nconst done = 1;",
        { byCap: true },
      );
      expect(r.ok).toBe(true);
      expect(r.variables).toEqual({ done: 1 });
    });

    it("a promise that can never settle ends the action at once instead of waiting for the deadline", async () => {
      // The deadline would end it with a TimeoutError: this error says it ended by itself (no
      // wall-time bound: on a loaded machine the process start alone can take a second).
      const r = await sandbox.run({ code: "await new Promise(() => {});", tools });
      expect(r.error?.name).not.toBe("TimeoutError");
      expect(r.error?.message).toMatch(/can never settle/);
    });

    it("oversized final answers, tool arguments and variables are refused with a reason", async () => {
      const r = await attack(
        "const big = 'x'.repeat(2e6);\nconst out = [];\ntry { await ping(big) } catch (e) { out.push(e.message) }\ntry { final_answer(big) } catch (e) { out.push(e.message) }\nfinal_answer(out)",
        { byCap: true },
      );
      expect(r.finalAnswer).toEqual([
        "argument 1 of ping() is too large (over 1000000 bytes as JSON)",
        "final_answer value is too large (over 1000000 bytes as JSON)",
      ]);
      expect(r.snapshot.unserializable.big).toMatch(/too large/);
    });
  });
}
