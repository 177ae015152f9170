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

    it("a class read by another class's static field, and helpers used in class fields, come back before what reads them, whatever the source order", async () => {
      const [r1, r2] = await steps(
        "static-reads",
        [
          "class Shape { sides() { return 0 } }",
          "const defaults = { unit: 'cm' };",
          // Reads classes, a value and a helper declared further down, at creation.
          "class Registry { static Default = Circle; static config = defaults; static fmt = format; static make = () => new Registry.Default(); static table = { kinds: [Circle, Shape], label: `shapes` } }",
          "class Circle extends Shape { sides() { return 1 } }",
          "function format(s) { return `${s.constructor.name}:${s.sides()}` }",
          "Registry.Default = Circle; Registry.table.kinds[0] = Circle;", // the step's own order
        ].join("\n"),
        "final_answer([Registry.fmt(Registry.make()), Registry.config.unit, Registry.table.kinds.map((k) => k.name), Registry.table.label])",
      );
      expect(r1.error).toBeNull();
      expect(r1.notCarriedOver).toEqual({});
      expect(r2.error).toBeNull();
      expect(r2.finalAnswer).toEqual(["Circle:1", "cm", ["Circle", "Shape"], "shapes"]);
    });

    it("a class whose static field reads what is not carried over, or that needs itself through another class, is not carried over, with a note", async () => {
      const [r1, r2] = await steps(
        "static-reads-missing",
        "const m = new Map();\nclass UsesMap { static m = m }\nclass A { static b = B }\nclass B { static a = A }\nclass Fine { static n = 1 }",
        "final_answer([typeof UsesMap, typeof A, typeof B, Fine.n])",
      );
      expect(r1.notCarriedOver?.UsesMap).toMatch(
        /a static field reads m, which is not carried over/,
      );
      expect(r1.notCarriedOver?.A).toMatch(/class not carried over/);
      expect(r1.notCarriedOver?.B).toMatch(/class not carried over/);
      expect(r2.finalAnswer).toEqual(["undefined", "undefined", "undefined", 1]);
    });

    it("iterable classes, functions assigned to a variable, and other names for a function or class are carried over", async () => {
      const [r1, r2, r3] = await steps(
        "other-forms",
        [
          "class Range { constructor(n) { this.n = n } *[Symbol.iterator]() { for (let i = 0; i < this.n; i++) yield i } }",
          "let double;\ndouble = (x) => 2 * x;",
          "let Box;\nBox = class { constructor(v) { this.v = v } };",
          "function helper() { return 'h' }\nconst alias = helper;\nconst RangeAlias = Range;",
        ].join("\n"),
        // A step that declares a binding named Symbol: the restored class still gets the real one.
        "const Symbol = 'shadowed';\nconst n = [...new Range(3)].length;",
        "final_answer([n, [...new RangeAlias(2)], double(4), new Box(5).v, alias(), alias === helper, double.name, Box.name])",
      );
      expect(r1.notCarriedOver).toEqual({});
      expect(r2.error).toBeNull();
      expect(r3.error).toBeNull();
      expect(r3.finalAnswer).toEqual([3, [0, 1], 8, 5, "h", true, "double", "Box"]);
    });

    it("another name for a function that is no longer carried over is not carried over either, with a note", async () => {
      const [r1, r2] = await steps(
        "alias-lost",
        "function helper() { return 1 }\nconst alias = helper;",
        "helper = 5;\nfinal_answer(typeof alias)",
      );
      expect(r1.snapshot.declarations.alias).toBeDefined();
      expect(r2.finalAnswer).toBe("function");
      expect(r2.notCarriedOver?.alias).toMatch(/another name for helper/);
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
