/**
 * Conformance: restoring the variables of earlier steps runs no code the model wrote. Functions
 * and classes come back as definitions; a class whose creation would run code (static block,
 * static initializer, computed name, `extends` expression) is not carried over, with a note, in
 * the step that defines it — so no later step runs it before its own code, calls a tool it does not
 * contain, answers for it or loops forever.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ActionResult, CodeSandbox, HostToolFn } from "../../../src/sandbox/contract.ts";
import type { SandboxFactory } from "../conformance.ts";

/** Registers the restore-as-data part of the suite. */
export function describeRestoreAsData(factory: SandboxFactory): void {
  let sandbox: CodeSandbox;
  beforeAll(() => {
    sandbox = factory.create({ limits: { timeoutMs: 5_000 } });
  });
  afterAll(() => sandbox.close());

  let calls: string[] = [];
  const search: HostToolFn = async (args) => {
    calls.push(String(args[0]));
    return `result for ${String(args[0])}`;
  };
  const tools = { search };

  /** Runs `steps` as one agent run, each from the previous step's snapshot. */
  async function steps(session: string, ...codes: string[]): Promise<ActionResult[]> {
    const out: ActionResult[] = [];
    for (const code of codes)
      out.push(await sandbox.run({ code, tools, session, snapshot: out.at(-1)?.snapshot }));
    return out;
  }

  describe("classes whose creation runs code are not carried over", () => {
    it("a static block runs once, in its own step; later steps neither run it nor answer for it", async () => {
      const [r1, r2, r3] = await steps(
        "static-block",
        'const kept = 1;\nclass Evil { static { print("static block ran"); if (typeof armed !== "undefined") final_answer("hijacked") } }',
        "var armed = true;\nconst two = 2;",
        "final_answer(kept + two)",
      );
      expect(r1.logs).toBe("static block ran\n");
      expect(r1.notCarriedOver?.Evil).toMatch(/static block/);
      expect([r2.logs, r2.isFinalAnswer, r2.error]).toEqual(["", false, null]);
      expect([r3.finalAnswer, r3.logs]).toEqual([3, ""]);
    });

    it("a static initializer that calls a tool is not re-run: later steps make only their own calls", async () => {
      calls = [];
      const [r1, r2] = await steps(
        "static-tool",
        'class Cache { static data = search("from the class") }\nconst n = 1;',
        'const hit = await search("own call");',
      );
      expect(r1.toolCalls).toBe(1);
      expect(r1.notCarriedOver?.Cache).toMatch(/static field is initialized with code/);
      expect(r2.toolCalls).toBe(1);
      expect(calls).toEqual(["from the class", "own call"]);
    });

    it("a static initializer armed to loop forever on restore does not time out every later step", async () => {
      const [r1, r2, r3] = await steps(
        "static-loop",
        "let armed = false;\nclass Trap { static x = armed ? (() => { for (;;) {} })() : 0 }\narmed = true;",
        "const a = 1;",
        "final_answer([armed, a])",
      );
      expect(r1.ok).toBe(true);
      expect(r2.error).toBeNull();
      expect(r3.finalAnswer).toEqual([true, 1]);
    });

    it("computed member names and `extends` expressions are not re-evaluated", async () => {
      const [r1, r2] = await steps(
        "computed",
        'class K { [(print("key ran"), "m")]() { return 1 } }\nclass E extends (print("extends ran"), Object) {}\nconst v = 1;',
        "const w = v + 1;",
      );
      expect(r1.logs).toBe("key ran\nextends ran\n");
      expect(Object.keys(r1.notCarriedOver ?? {}).sort()).toEqual(["E", "K"]);
      expect([r2.logs, r2.snapshot.values]).toEqual(["", { v: 1, w: 2 }]);
      const r3 = await sandbox.run({ code: "new K()", tools, snapshot: r2.snapshot });
      expect(r3.error?.message).toMatch(
        /^K is not defined \(its value could not be carried over: /,
      );
    });
  });

  describe("definitions come back in an order that keeps them valid", () => {
    it("classes extending classes, functions or standard constructors, literal static fields, and helpers calling helpers defined later", async () => {
      const [, r2] = await steps(
        "order",
        [
          "class Base { hi() { return 'base' } }",
          "class Derived extends Base { hi() { return super.hi() + '+derived' } }",
          "class Failure extends Error { name = 'Failure' }",
          "function Legacy() {}",
          "class FromFunction extends Legacy { static kind = 'legacy'; static max = -1 }",
          "const twice = (x) => helper() * x;",
          "function helper() { return 2 }",
          "class Counter { n = helper(); static label = `plain` }",
        ].join("\n"),
        // This step declares a binding named like the standard constructor a class extends.
        "const Error = 'shadowed here';\nfinal_answer([new Derived().hi(), new Failure('x') instanceof globalThis.Error, new Failure('x').name, FromFunction.kind, FromFunction.max, twice(3), new Counter().n, Counter.label])",
      );
      expect(r2.error).toBeNull();
      expect(r2.finalAnswer).toEqual([
        "base+derived",
        true,
        "Failure",
        "legacy",
        -1,
        6,
        2,
        "plain",
      ]);
    });

    it("a class extending something that is not carried over is not carried over either, with a note", async () => {
      const [r1] = await steps(
        "missing-base",
        "const Base = class { static { } };\nclass Derived extends Base {}\nconst base2 = 5;\nclass FromValue extends Object {}\n",
      );
      expect(r1.notCarriedOver?.Base).toMatch(/static block/);
      expect(r1.notCarriedOver?.Derived).toMatch(/extends Base/);
      expect(r1.notCarriedOver?.FromValue).toBeUndefined();
    });
  });

  describe("a snapshot from elsewhere (an old checkpoint, an edited one) is restored as data too", () => {
    it("declarations that would run code on restore are dropped with a note before the step runs", async () => {
      calls = [];
      const r = await sandbox.run({
        code: "final_answer(typeof Evil)",
        tools,
        session: "crafted",
        snapshot: {
          values: {},
          declarations: {
            Evil: 'class Evil { static { search("smuggled"); final_answer("hijacked") } }',
            Loop: "class Loop { static x = (() => { for (;;) {} })() }",
            ok: "(x) => x + 1",
          },
          unserializable: {},
        },
      });
      expect([r.finalAnswer, r.toolCalls, calls]).toEqual(["undefined", 0, []]);
      expect(r.snapshot.declarations).toEqual({ ok: "(x) => x + 1" });
      expect(r.snapshot.unserializable.Evil).toMatch(/static block/);
    });
  });
}
