/**
 * Escape attempts against the default lockdown configuration (one configuration per file).
 * Each snippet tries to reach host capabilities; the test asserts it did not, and that the guest got
 * an ordinary, sanitized error or an inert value instead.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createSandbox, type HostToolFn } from "../../src/sandbox/index.ts";

// The deadline only ends an attack that hangs (then the test fails on the TimeoutError it gets):
// long enough that a loaded machine's slowness does not end an ordinary action.
const sandbox = createSandbox({ poolSize: 1, limits: { timeoutMs: 30_000 } });
const dir = mkdtempSync(join(tmpdir(), "codehop-escape-"));
const canary = join(dir, "pwned");
afterAll(async () => {
  await sandbox.close();
  rmSync(dir, { recursive: true, force: true });
});

const received: unknown[][] = [];
const record: HostToolFn = async (args) => {
  received.push(args);
  return "ok";
};
const tools = { record };

/** Runs code whose last act is final_answer(<what the guest could reach>). */
async function probe(code: string) {
  const r = await sandbox.run({ code, tools });
  expect(existsSync(canary)).toBe(false);
  return r;
}

// Each snippet, if it escaped, would write the canary file through the host's fs module.
const WRITE = `.mainModule.require("fs").writeFileSync(${JSON.stringify(canary)}, "x")`;

describe("lockdown: the guest cannot reach the host", () => {
  it("constructor climbing ({}).constructor.constructor('return process')() is inert", async () => {
    const r = await probe(`
      const out = [];
      try { ({}).constructor.constructor("return process")(); out.push("ran") } catch (e) { out.push(e.name) }
      try { (async () => {}).constructor("return process")(); out.push("ran") } catch (e) { out.push(e.name) }
      // The compartment's own Function evaluates in the compartment: no process there.
      out.push(Function("return typeof process")(), typeof Function("return this")());
      final_answer(out);
    `);
    expect(r.finalAnswer).toEqual(["TypeError", "TypeError", "undefined", "undefined"]);
  });

  it("the process object is unreachable through Function and endowments", async () => {
    const r = await probe(`({}).constructor.constructor("return process")()${WRITE}`);
    expect(r.ok).toBe(false);
    expect(r.error?.name).toBe("TypeError");
  });

  it("endowed functions do not show their host source, in String(f) or in error messages", async () => {
    const r = await probe(`
      const out = [];
      for (const f of [record, print, console.log, final_answer]) {
        try { f.call = () => 1; out.push("assigned") } catch (e) { out.push(e.message) }
        out.push(String(f), Function.prototype.toString.call(f), f.name);
      }
      final_answer(out);
    `);
    const out = r.finalAnswer as string[];
    expect(out).toEqual([
      "Cannot assign to read only property 'call' of function 'function () { [native code] }'",
      "function () { [native code] }",
      "function () { [native code] }",
      "record",
      ...["print", "log", "final_answer"].flatMap((name) => [
        expect.stringMatching(/read only/),
        "function () { [native code] }",
        "function () { [native code] }",
        name,
      ]),
    ]);
    expect(out.join("\n")).not.toMatch(/act\.|guestError|=>/);
  });

  it("endowed functions' constructors are inert", async () => {
    const r = await probe(`
      const out = [];
      for (const f of [print, console.log, final_answer, record]) {
        try { f.constructor("return process")(); out.push("ran") } catch (e) { out.push(e.name) }
      }
      final_answer(out);
    `);
    expect(r.finalAnswer).toEqual(["TypeError", "TypeError", "TypeError", "TypeError"]);
  });

  it("require, process, module and dynamic import() are not available", async () => {
    for (const [code, name] of [
      ["require('fs')", "ReferenceError"],
      ["process.exit(1)", "ReferenceError"],
      ["module.exports", "ReferenceError"],
      ["await import('fs')", "SyntaxError"],
      ["eval('import(\"fs\")')", "SyntaxError"],
      ["Function('return import(\"fs\")')()", "SyntaxError"],
      ["import fs from 'fs'", "SyntaxError"],
    ] as const) {
      const r = await probe(code);
      expect(r.ok, code).toBe(false);
      expect(r.error?.name, code).toBe(name);
    }
  });

  it("Error.prepareStackTrace and stack frames cannot be used to reach host objects (vm2 CVE-2022-36067 family)", async () => {
    received.length = 0;
    const r = await probe(`
      let called = false;
      Error.prepareStackTrace = (e, frames) => { called = true; return frames[0].getThis() };
      const e = new Error("x");
      const stack = e.stack;
      let toolStack = null;
      try { await record(1) } catch (err) { toolStack = err.stack }
      try { Error.captureStackTrace(e) } catch {}
      final_answer({ called, stack, toolStack, leaks: String(e.stack).includes("/") });
    `);
    expect(r.finalAnswer).toEqual({ called: false, stack: "", toolStack: null, leaks: false });
  });

  it("vm2 CVE-2023-30547 pattern (proxied exception + stack overflow in a trap) reaches nothing", async () => {
    const r = await probe(`
      const err = {};
      const handler = { getPrototypeOf(target) { (function stack() { new Error().stack; stack(); })(); } };
      const proxiedErr = new Proxy(err, handler);
      try { throw proxiedErr; } catch ({ constructor: c }) { c.constructor("return process")()${WRITE}; }
    `);
    expect(r.error).toMatchObject({ name: "TypeError", line: 5 });
  });

  it("vm2 CVE-2023-37466 pattern (Promise species with a throwing reject) is an ordinary action error", async () => {
    const r = await probe(`
      async function fn() { (function stack() { new Error().stack; stack(); })(); }
      const p = fn();
      p.constructor = { [Symbol.species]: class FakePromise { constructor(executor) {
        executor((x) => x, (err) => err.constructor.constructor("return process")()${WRITE});
      } } };
      p.then();
      await null;
    `);
    // The throw escapes every promise chain (V8 reports it as uncaught): it becomes this action's
    // error, the child process is replaced, and the next action runs normally.
    expect(r.ok).toBe(false);
    expect(r.error?.name).toBe("TypeError");
    const next = await probe("final_answer('fine')");
    expect(next.finalAnswer).toBe("fine");
  });

  it("vm2 CVE-2022-36067 pattern (replacing the global Error) fails: globals are frozen", async () => {
    const r = await probe(`globalThis.OldError = globalThis.Error;\nglobalThis.Error = {};`);
    expect(r.error?.name).toBe("TypeError");
  });

  it("shared intrinsics are frozen: prototype pollution fails and does not leak into the next action", async () => {
    const r1 = await probe(`
      const out = [];
      for (const attempt of [
        () => { Object.prototype.polluted = 1 },
        () => { Array.prototype.push = () => 0 },
        () => { Promise.prototype.then = () => 0 },
        () => { JSON.parse = () => 0 },
        () => { Object.defineProperty(globalThis, "x", { value: 1 }) },
        () => { globalThis.final_answer = () => 0 },
      ]) { try { attempt(); out.push("mutated") } catch (e) { out.push(e.name) } }
      final_answer(out);
    `);
    expect(r1.finalAnswer).toEqual(Array(6).fill("TypeError"));
    const r2 = await probe("final_answer([({}).polluted === undefined, [1].push(2)])");
    expect(r2.finalAnswer).toEqual([true, 2]);
  });

  it("lockdown() and nested Compartments give no extra power", async () => {
    const r = await probe(`
      const out = [];
      try { lockdown(); out.push("relocked") } catch (e) { out.push(e.name) }
      const c = new Compartment();
      out.push(c.evaluate("typeof process"), c.evaluate("typeof require"));
      final_answer(out);
    `);
    expect(r.finalAnswer).toEqual(["TypeError", "undefined", "undefined"]);
  });

  it("no WebAssembly, SharedArrayBuffer, Atomics, timers, fetch, GC observers or high-resolution clocks", async () => {
    const r = await probe(`
      final_answer([typeof WebAssembly, typeof SharedArrayBuffer, typeof Atomics, typeof setTimeout,
        typeof setInterval, typeof fetch, typeof structuredClone, typeof getStackString, typeof Buffer,
        typeof WeakRef, typeof FinalizationRegistry, typeof performance, typeof queueMicrotask,
        typeof global, typeof crypto, typeof assert]);
    `);
    expect(r.finalAnswer).toEqual(Array(16).fill("undefined"));
  });

  it("Symbol-based inspect hooks on logged objects are never called", async () => {
    received.length = 0;
    const r = await probe(`
      const o = { [Symbol.for("nodejs.util.inspect.custom")]: (d, opts, inspect) => { record(typeof inspect); return "hooked" } , a: 1 };
      print(o);
      const t = { then(resolve) { resolve("thenable ran") } };
      print(t);
    `);
    expect(r.logs).not.toMatch(/hooked/);
    expect(r.logs).toMatch(/a: 1/);
    expect(received).toEqual([]);
  });
});

describe("hostile values at the boundary", () => {
  it("getters, thenables, proxies and functions passed to tools are refused in the guest, never called", async () => {
    received.length = 0;
    const r = await probe(`
      const out = [];
      let touched = false;
      const hostile = [
        { get x() { touched = true; return 1 } },
        { then(r) { touched = true; r(1) } },
        new Proxy({}, { ownKeys() { touched = true; return [] }, get() { touched = true } }),
        () => 1,
        [1, 2, { deep: new Map() }],
        { toJSON() { touched = true; return "x" } },
        10n,
        NaN,
        Object.create(new Proxy({}, { getPrototypeOf() { touched = true; return null }, getOwnPropertyDescriptor() { touched = true } })),
      ];
      print(hostile[8]);
      for (const h of hostile) {
        try { await record(h); out.push("sent") } catch (e) { out.push(e.name + ": " + e.message) }
      }
      final_answer({ out, touched });
    `);
    const { out, touched } = r.finalAnswer as { out: string[]; touched: boolean };
    expect(touched).toBe(false);
    expect(out).toHaveLength(9);
    for (const line of out) expect(line).toMatch(/^TypeError: argument 1 of record\(\)/);
    expect(out[0]).toMatch(/getter/);
    expect(out[2]).toMatch(/Proxy/);
    expect(out[4]).toMatch(/Map/);
    expect(out[8]).toMatch(/Proxy prototype/);
    expect(received).toEqual([]);
  });

  it("a hostile part deep in a long uniform array is refused and never called (the copy's fast path)", async () => {
    received.length = 0;
    const r = await probe(`
      let touched = false;
      const rows = () => Array.from({ length: 2000 }, (_, i) => ({ id: i, name: "n" + i, tags: ["a", "b"] }));
      const cases = [];
      let a = rows(); Object.defineProperty(a[1000], "name", { get() { touched = true; return "x" }, enumerable: true }); cases.push(a);
      a = rows(); Object.defineProperty(a, 1000, { get() { touched = true; return 1 }, enumerable: true }); cases.push(a);
      a = rows(); Object.defineProperty(a[1000].tags, 1, { get() { touched = true; return 1 }, enumerable: true }); cases.push(a);
      a = rows(); Object.defineProperty(a, 1000, { set(v) { touched = true }, enumerable: true }); cases.push(a);
      a = rows(); a[1000] = new Proxy({}, { ownKeys() { touched = true; return [] }, get() { touched = true } }); cases.push(a);
      a = rows(); a[1000].tags = new Proxy(["a"], { get() { touched = true } }); cases.push(a);
      a = rows(); Object.defineProperty(a[1000], "toJSON", { value() { touched = true; return 1 }, enumerable: false }); cases.push(a);
      a = rows(); Object.defineProperty(a[1000].tags, "toJSON", { value() { touched = true; return 1 } }); cases.push(a);
      a = rows(); a[1000].tags[1] = NaN; cases.push(a);
      a = rows(); a[1000] = new Map(); cases.push(a);
      const out = [];
      for (const c of cases) {
        try { await record(c); out.push("sent") } catch (e) { out.push(e.message) }
      }
      // Holes and undefined elements are plain data (null), as JSON.stringify writes them.
      const holes = [1, , 3]; holes[5] = undefined;
      await record(holes);
      final_answer({ out, touched });
    `);
    const { out, touched } = r.finalAnswer as { out: string[]; touched: boolean };
    expect(touched).toBe(false);
    const what = "argument 1 of record()";
    expect(out).toEqual([
      `${what}[1000].name is a getter, which is not copied`,
      `${what}[1000] is a getter, which is not copied`,
      `${what}[1000].tags[1] is a getter, which is not copied`,
      `${what}[1000] is a getter, which is not copied`,
      `${what}[1000] is a Proxy, which cannot leave the sandbox`,
      `${what}[1000].tags is a Proxy, which cannot leave the sandbox`,
      `${what}[1000] has a toJSON method, which is not called`,
      `${what}[1000].tags has a toJSON method, which is not called`,
      `${what}[1000].tags[1] is NaN, which is not JSON-serializable`,
      `${what}[1000] is a Map, which is not JSON-serializable`,
    ]);
    expect(received).toEqual([[[1, null, 3, null, null, null]]]);
  });

  it("tool arguments arrive as plain JSON copies; later guest mutation does not affect them", async () => {
    const seen: unknown[] = [];
    const keep: HostToolFn = async (args) => {
      seen.push(args[0]);
      return { list: [1, 2] };
    };
    const r = await sandbox.run({
      code: "const a = { n: 1, nested: [1] };\nconst p = keep(a);\na.n = 2; a.nested.push(9);\nconst res = await p;\nres.list.push(3);\nfinal_answer(res)",
      tools: { keep },
    });
    expect(seen).toEqual([{ n: 1, nested: [1] }]);
    expect(Object.getPrototypeOf(seen[0])).toBe(Object.prototype);
    expect(r.finalAnswer).toEqual({ list: [1, 2, 3] });
  });

  it("a __proto__ key in tool arguments stays an own data property and pollutes nothing", async () => {
    const seen: unknown[] = [];
    const keep: HostToolFn = async (args) => {
      seen.push(args[0]);
      return null;
    };
    await sandbox.run({
      code: 'await keep(JSON.parse(\'{"__proto__": {"polluted": true}}\'))',
      tools: { keep },
    });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(seen[0])).toBe(Object.prototype);
  });

  it("errors with getter messages, proxy errors and huge messages are reported without running guest code", async () => {
    const r1 = await probe(
      `const e = new Error("x"); Object.defineProperty(e, "message", { get() { while (true) {} } }); throw e;`,
    );
    expect(r1.error).toMatchObject({ name: "Error", message: "" });
    const r2 = await probe(
      `throw new Proxy(new Error("p"), { get() { while (true) {} }, getPrototypeOf() { while (true) {} } })`,
    );
    expect(r2.error?.message).toBe("Uncaught [Proxy]");
    const r3 = await probe(`throw new Error("y".repeat(1e6))`);
    expect(r3.error!.message.length).toBeLessThan(2100);
  });

  it("tool errors carry the host message without stack frames or paths", async () => {
    const leaky: HostToolFn = async () => {
      const err = new Error(
        `ENOENT: no such file or directory, open '${process.cwd()}/secret.json'`,
      );
      throw err;
    };
    const r = await sandbox.run({ code: "await leaky()", tools: { leaky } });
    expect(r.error?.name).toBe("ToolError");
    expect(r.error?.message).toBe("ENOENT: no such file or directory, open '<path>'");
    expect(r.error?.message).not.toContain(process.cwd());
  });

  it("calls after the action ended are refused and never reach the host", async () => {
    const calls: unknown[] = [];
    const slow: HostToolFn = async (args) => {
      calls.push(args[0]);
      return "late";
    };
    const r = await sandbox.run({
      code: "slow('before').then(() => slow('after-end'));\nfinal_answer('done');\nslow('after-final').catch(() => {});",
      tools: { slow },
    });
    expect(r.finalAnswer).toBe("done");
    await new Promise((res) => setTimeout(res, 100));
    expect(calls).toEqual(["before"]);
  });
});
