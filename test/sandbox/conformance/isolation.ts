/**
 * Conformance: agent runs that must not see each other don't. Each attack is made by one session
 * (an agent run) and checked from another, on a sandbox of one warm process — the setting in which
 * a reused process would carry the attack over.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import type { CodeSandbox } from "../../../src/sandbox/contract.ts";
import type { SandboxFactory } from "../conformance.ts";

/** Registers the isolation part of the suite. */
export function describeIsolation(factory: SandboxFactory): void {
  let sandbox: CodeSandbox;
  beforeAll(() => {
    sandbox = factory.create({ limits: { timeoutMs: 10_000 } });
  });
  afterAll(() => sandbox.close());

  const run = (session: string, code: string) => sandbox.run({ code, tools: {}, session });

  it("a patch of Intl.Segmenter's lazily created segment/iterator prototypes never reaches another run", async () => {
    const attack = await run(
      "attacker",
      `
      const stolen = [];
      const segments = new Intl.Segmenter("en", { granularity: "word" }).segment("a b");
      const SegmentsProto = Object.getPrototypeOf(segments);
      const IteratorProto = Object.getPrototypeOf(segments[Symbol.iterator]());
      const out = [];
      const fake = function () { stolen.push(String(this)); return { done: true, value: undefined } };
      for (const [proto, key] of [[IteratorProto, "next"], [SegmentsProto, Symbol.iterator], [SegmentsProto, "containing"]]) {
        try { Object.defineProperty(proto, key, { value: fake, writable: true, configurable: true }); out.push("patched") }
        catch (e) { out.push(e.name) }
      }
      out;
      `,
    );
    expect(attack.ok).toBe(true);
    const victim = await run(
      "victim",
      'const secret = "top secret words";\nfinal_answer([...new Intl.Segmenter("en", { granularity: "word" }).segment(secret)].map((s) => s.segment))',
    );
    expect(victim.finalAnswer).toEqual(["top", " ", "secret", " ", "words"]);
    const again = await run(
      "attacker",
      'const it = new Intl.Segmenter("en").segment("x")[Symbol.iterator]();\nfinal_answer(String(Object.getPrototypeOf(it).next.stolen ?? "nothing"))',
    );
    expect(again.finalAnswer).toBe("nothing");
  });

  it("TextDecoder/TextEncoder internals and error classes cannot be patched across runs, and replacing a decoder's internals crashes nothing", async () => {
    const attack = await run(
      "attacker",
      `
      const out = [];
      try { new TextDecoder("no-such-encoding") } catch (e) {
        for (let p = Object.getPrototypeOf(e); p; p = Object.getPrototypeOf(p)) {
          try { p.toString = () => "hijacked"; out.push("patched") } catch (err) { out.push(err.name) }
        }
      }
      try { new TextEncoder().encodeInto("a", 5) } catch (e) {
        try { Object.getPrototypeOf(e).toString = () => "hijacked"; out.push("patched") } catch (err) { out.push(err.name) }
      }
      const d = new TextDecoder("utf-16le");
      for (const key of Reflect.ownKeys(d)) { try { d[key] = {} } catch {} }
      try { out.push(d.decode(new Uint8Array([104, 0, 105, 0]))) } catch (e) { out.push(e.name) }
      final_answer(out);
      `,
    );
    expect(attack.error).toBeNull();
    expect(attack.isFinalAnswer).toBe(true);
    expect(attack.finalAnswer as string[]).not.toContain("patched");
    const victim = await run(
      "victim",
      'const out = [];\ntry { new TextDecoder("no-such-encoding") } catch (e) { out.push(String(e)) }\ntry { new TextEncoder().encodeInto("a", 5) } catch (e) { out.push(String(e)) }\nfinal_answer(out)',
    );
    const messages = victim.finalAnswer as string[];
    expect(messages).toHaveLength(2);
    expect(messages[0]).toMatch(/^RangeError: /);
    expect(messages[1]).toMatch(/^TypeError: /);
    expect(messages.join()).not.toMatch(/hijacked/);
  });

  it("a run that fills the Symbol.for registry does not make another run (or its own next step) run out of memory", async () => {
    const heap = { timeoutMs: 20_000, maxHeapMb: 96 };
    const fill = await sandbox.run({
      code: 'for (let i = 0; i < 40000; i++) Symbol.for(String(i).padStart(1000, "x"));\nfinal_answer("filled")',
      tools: {},
      session: "filler",
      limits: heap,
    });
    expect(fill.finalAnswer).toBe("filled");
    const allocate =
      "const keep = [];\nfor (let i = 0; i < 50; i++) keep.push(new Array(125000).fill(i));\nfinal_answer(keep.length)";
    const other = await sandbox.run({ code: allocate, tools: {}, session: "other", limits: heap });
    expect(other.error).toBeNull();
    expect(other.finalAnswer).toBe(50);
    const own = await sandbox.run({ code: allocate, tools: {}, session: "filler", limits: heap });
    expect(own.error).toBeNull();
    expect(own.finalAnswer).toBe(50);
  });

  it("what one run's action leaves behind never runs inside another run's action", async () => {
    const attack = await run(
      "attacker",
      // A promise chain left running after the action ended, and a patch attempt on shared intrinsics.
      `(async () => { for (let i = 0; i < 1000; i++) await null; throw new Error("leftover") })();
      const out = [];
      try { Array.prototype.map = () => "hijacked" } catch (e) { out.push(e.name) }
      final_answer(out);`,
    );
    expect(attack.finalAnswer).toEqual(["TypeError"]);
    const victim = await run("victim", "final_answer([1, 2].map((x) => x * 2))");
    expect(victim.error).toBeNull();
    expect(victim.finalAnswer).toEqual([2, 4]);
  });
}
