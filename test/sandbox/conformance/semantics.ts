/**
 * Conformance: what guest code can do and what an action returns (REPL semantics, variables,
 * tools, errors, cancellation, limits). One sandbox with default limits for the whole part.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CodeSandbox, HostToolFn } from "../../../src/sandbox/contract.ts";
import type { SandboxFactory } from "../conformance.ts";

/** Half the default action deadline (30 s): what an action stopped early stays below. */
const BELOW_DEFAULT_DEADLINE_MS = 15_000;

/** Registers the semantics part of the suite. */
export function describeSemantics(factory: SandboxFactory): void {
  let sandbox: CodeSandbox;
  beforeAll(() => {
    sandbox = factory.create();
  });
  afterAll(() => sandbox.close());

  const search: HostToolFn = async (args) => `result for ${String(args[0])}`;
  const tools = { search };

  describe("code actions", () => {
    it("runs top-level await, tools, console.log and print", async () => {
      const r = await sandbox.run({
        code: 'const r = await search("cats");\nconsole.log("got", r);\nprint({ a: [1, "x"] });',
        tools,
      });
      expect(r.error).toBeNull();
      expect(r.ok).toBe(true);
      expect(r.logs).toBe('got result for cats\n{ a: [ 1, "x" ] }\n');
      expect(r.toolCalls).toBe(1);
      expect(r.variables).toEqual({ r: "result for cats" });
    });

    it("console supports Node's format specifiers and the common methods, without calling guest code", async () => {
      const r = await sandbox.run({
        code: 'console.log("%s has %d items (%i%%) %j", "list", 3, 42.9, { a: [1] });\nconsole.table([{ a: 1 }]);\nconsole.warn("careful");\nconsole.log("%d", { valueOf() { throw new Error("called") } });',
        tools,
      });
      expect(r.error).toBeNull();
      expect(r.logs).toBe('list has 3 items (42%) {"a":[1]}\n[ { a: 1 } ]\n[warn] careful\nNaN\n');
    });

    it("final_answer ends the action and records a JSON copy of the value", async () => {
      const r = await sandbox.run({
        code: 'final_answer({ answer: 42, why: ["x"] });\nprint("not reached");',
        tools,
      });
      expect(r.ok).toBe(true);
      expect(r.isFinalAnswer).toBe(true);
      expect(r.finalAnswer).toEqual({ answer: 42, why: ["x"] });
      expect(r.logs).toBe("");
    });

    it("final_answer cannot be swallowed by guest try/catch", async () => {
      const r = await sandbox.run({
        code: 'try { final_answer("yes") } catch (e) { print("caught") }\nprint("after")',
        tools,
      });
      expect(r.isFinalAnswer).toBe(true);
      expect(r.finalAnswer).toBe("yes");
      expect(r.logs).toBe("");
    });

    it("final_answer cannot be forged by throwing a look-alike", async () => {
      const r = await sandbox.run({
        code: 'throw { isFinalAnswer: true, finalAnswer: "forged", name: "FinalAnswer" }',
        tools,
      });
      expect(r.isFinalAnswer).toBe(false);
      expect(r.finalAnswer).toBeNull();
      expect(r.ok).toBe(false);
    });

    it("a throwing tool surfaces as a catchable Error with the host message, sanitized", async () => {
      const boom: HostToolFn = async () => {
        throw new Error("lookup failed in /srv/secret/config.json\n    at foo (/srv/app/x.js:1:2)");
      };
      const r = await sandbox.run({
        code: "try { await boom() } catch (e) { print(e instanceof Error, e.name, e.message) }",
        tools: { boom },
      });
      expect(r.error).toBeNull();
      expect(r.logs).toBe("true ToolError lookup failed in <path>\n");
    });

    it("an uncaught tool error is reported as ToolError with the guest line", async () => {
      const boom: HostToolFn = async () => {
        throw new Error("no such page");
      };
      const r = await sandbox.run({ code: "const a = 1;\n\nawait boom();", tools: { boom } });
      expect(r.ok).toBe(false);
      expect(r.error).toEqual({ name: "ToolError", message: "no such page", line: 3 });
    });

    it("reports runtime errors with name, message and guest line", async () => {
      const r = await sandbox.run({ code: "let a = 1;\nlet b = 2;\nnull.foo;", tools });
      expect(r.error).toEqual({
        name: "TypeError",
        message: "Cannot read properties of null (reading 'foo')",
        line: 3,
      });
    });

    it("reports syntax errors with line and column, also in the message", async () => {
      const r = await sandbox.run({ code: "let x = 1;\nx +* 2", tools });
      expect(r.ok).toBe(false);
      expect(r.error).toEqual({
        name: "SyntaxError",
        message: "Unexpected token (line 2, column 4)",
        line: 2,
        column: 4,
      });
    });

    it("accepts a #! first line and keeps line numbers", async () => {
      const r = await sandbox.run({ code: "#!/usr/bin/env node\nconst y = 2;\nnull.x", tools });
      expect(r.error).toEqual({
        name: "TypeError",
        message: "Cannot read properties of null (reading 'x')",
        line: 3,
      });
      expect(r.variables).toEqual({ y: 2 });
      const bad = await sandbox.run({ code: "#!node\nlet x = = 1", tools });
      expect(bad.error).toMatchObject({ line: 2, column: 9 });
    });

    it("assigns callIndex in call order, also for concurrent calls", async () => {
      const seen: [number, unknown][] = [];
      const echo: HostToolFn = async (args, ctx) => {
        seen.push([ctx.callIndex, args[0]]);
        // Finish in reverse order: indexes must still follow the guest's call order.
        await new Promise((r) => setTimeout(r, 30 - ctx.callIndex * 10));
        return args[0];
      };
      const r = await sandbox.run({
        code: 'const out = await Promise.all([echo("a"), echo("b"), echo("c")]);\nconst d = await echo("d");',
        tools: { echo },
      });
      expect(r.error).toBeNull();
      expect(r.variables).toEqual({ out: ["a", "b", "c"], d: "d" });
      expect(seen.sort((x, y) => x[0] - y[0])).toEqual([
        [0, "a"],
        [1, "b"],
        [2, "c"],
        [3, "d"],
      ]);
    });
  });

  describe("persistent variables", () => {
    it("carries values and declarations from action to action, and redeclaration wins", async () => {
      const r1 = await sandbox.run({
        code: "const x = 1;\nlet list = [1, 2];\nfunction double(n) { return n * 2 }\nconst inc = (n) => n + 1;\nclass Box { constructor(v) { this.v = v } }",
        tools,
      });
      expect(r1.error).toBeNull();
      expect(r1.snapshot.values).toEqual({ x: 1, list: [1, 2] });
      expect(Object.keys(r1.snapshot.declarations).sort()).toEqual(["Box", "double", "inc"]);

      const r2 = await sandbox.run({
        code: "list.push(3);\nconst x = double(x) + inc(0);\nconst b = new Box(x);\nprint(x, list, b.v);",
        tools,
        snapshot: r1.snapshot,
      });
      expect(r2.error).toBeNull();
      expect(r2.logs).toBe("3 [ 1, 2, 3 ] 3\n");
      expect(r2.snapshot.values).toEqual({ x: 3, list: [1, 2, 3] });
      expect(r2.snapshot.unserializable.b).toMatch(/instance of Box/);

      const r3 = await sandbox.run({
        code: "const x = 'again';\nvar double = 7;",
        tools,
        snapshot: r2.snapshot,
      });
      expect(r3.error).toBeNull();
      expect(r3.snapshot.values.x).toBe("again");
      expect(r3.snapshot.values.double).toBe(7);
      expect(r3.snapshot.declarations.double).toBeUndefined();
    });

    it("variables named like the wrapper's internals survive the next action", async () => {
      const r1 = await sandbox.run({
        code: "const $restore = 1;\nconst $decl = 2;\nconst $ref = 3;",
        tools,
      });
      // An action that doesn't mention them must still be able to declare them as bindings.
      const r2 = await sandbox.run({ code: "const other = 0;", tools, snapshot: r1.snapshot });
      expect(r2.error).toBeNull();
      const r3 = await sandbox.run({
        code: "final_answer($restore + $decl + $ref)",
        tools,
        snapshot: r2.snapshot,
      });
      expect(r3.finalAnswer).toBe(6);
    });

    it("restores from a JSON round-tripped snapshot in a fresh sandbox process", async () => {
      const r1 = await sandbox.run({
        code: "const city = 'Paris';\nfunction greet(p) { return 'hi ' + p }",
        tools,
      });
      const stored = JSON.parse(JSON.stringify(r1.snapshot));
      const fresh = factory.create();
      try {
        const r2 = await fresh.run({ code: "final_answer(greet(city))", tools, snapshot: stored });
        expect(r2.finalAnswer).toBe("hi Paris");
      } finally {
        await fresh.close();
      }
    });

    it("lists unserializable values by name with a reason instead of dropping them", async () => {
      const r = await sandbox.run({
        code: "const m = new Map();\nconst d = new Date(0);\nconst n = NaN;\nlet u;",
        tools,
      });
      expect(r.snapshot.unserializable).toEqual({
        m: expect.stringMatching(/Map/),
        d: expect.stringMatching(/Date/),
        n: expect.stringMatching(/NaN/),
        u: "value is undefined",
      });
    });

    it("a Date inside a value is carried over as its JSON string instead of dropping the whole value", async () => {
      const r1 = await sandbox.run({
        code: "const obj = { a: 1, d: new Date(0), list: [new Date(86400000), new Date(NaN)] };\nconst m = new Map([[1, 2]]);\nconst p = search('x');",
        tools,
      });
      expect(r1.snapshot.values).toEqual({
        obj: { a: 1, d: "1970-01-01T00:00:00.000Z", list: ["1970-01-02T00:00:00.000Z", null] },
      });
      expect(r1.notCarriedOver).toEqual({
        m: "Map is not JSON-serializable",
        p: "Promise is not JSON-serializable (did you forget await?)",
      });
      const r2 = await sandbox.run({
        code: "final_answer(obj.d.slice(0, 4))",
        tools,
        snapshot: r1.snapshot,
      });
      expect(r2.finalAnswer).toBe("1970");
    });

    it("keeps variables assigned before an error", async () => {
      const r = await sandbox.run({
        code: "const before = 'kept';\nthrow new Error('stop')",
        tools,
      });
      expect(r.error).toMatchObject({ name: "Error", message: "stop", line: 2 });
      expect(r.snapshot.values).toEqual({ before: "kept" });
    });
  });

  describe("REPL semantics", () => {
    it("var in loops, destructuring, async helpers and closures over later values all persist", async () => {
      const r1 = await sandbox.run({
        code: "for (var i = 0; i < 3; i++) {}\nconst { a, b: [c] } = { a: 1, b: [2] };\nlet factor = 10;\nfunction scale(n) { return n * factor }\nasync function lookup(q) { return (await search(q)).toUpperCase() }",
        tools,
      });
      expect(r1.error).toBeNull();
      expect(r1.snapshot.values).toEqual({ i: 3, a: 1, c: 2, factor: 10 });
      const r2 = await sandbox.run({
        code: "factor = 100;\nfinal_answer([scale(i), await lookup('x'), a + c])",
        tools,
        snapshot: r1.snapshot,
      });
      expect(r2.finalAnswer).toEqual([300, "RESULT FOR X", 3]);
    });

    it("variables that shadow built-ins or tools live for one action only, with a note", async () => {
      const r1 = await sandbox.run({
        code: 'const Date = "today";\nconst search = 1;\nconst ok = Date + search;',
        tools,
      });
      expect(r1.snapshot.values).toEqual({ ok: "today1" });
      expect(r1.snapshot.unserializable.Date).toMatch(/shadows a built-in/);
      const r2 = await sandbox.run({
        code: "final_answer([typeof Date.now(), await search('x'), ok])",
        tools,
        snapshot: r1.snapshot,
      });
      expect(r2.finalAnswer).toEqual(["number", "result for x", "today1"]);
    });

    it("echoes the last expression's value like a REPL (but not print/console/final_answer calls)", async () => {
      const r1 = await sandbox.run({
        code: "const a = [1, 2];\nawait search('x');\na.map((n) => n * 2)",
        tools,
      });
      expect(r1.lastValue).toBe("[ 2, 4 ]");
      const r2 = await sandbox.run({ code: "const z = 1;\nprint('hi')", tools });
      expect(r2.lastValue).toBeNull();
      const r3 = await sandbox.run({ code: "'text'", tools });
      expect(r3.lastValue).toBe("text");
      const r4 = await sandbox.run({ code: "let u;\nu", tools });
      expect(r4.lastValue).toBeNull();
      // An unawaited promise is echoed as a promise, not silently awaited; top-level return works too.
      const r5 = await sandbox.run({ code: "search('late')", tools });
      expect(r5.lastValue).toBe("Promise { <pending or settled> }");
      const r6 = await sandbox.run({ code: "if (true) { return 5 }\nprint('not reached')", tools });
      expect([r6.lastValue, r6.logs]).toEqual(["5", ""]);
    });

    it("strings that merely contain import(, eval( or HTML comment markers still work", async () => {
      const r = await sandbox.run({
        code: "const s = 'use import(x) or eval(y) <!-- c --> ';\nconst t = `import(${1})`;\nfinal_answer([s, t])",
        tools,
      });
      expect(r.finalAnswer).toEqual(["use import(x) or eval(y) <!-- c --> ", "import(1)"]);
    });

    it("eval works as an indirect eval in the compartment; a source eval refuses is a SyntaxError at the guest line", async () => {
      const r1 = await sandbox.run({
        code: 'final_answer([eval("1 + 1"), eval("typeof process")])',
        tools,
      });
      expect(r1.finalAnswer).toEqual([2, "undefined"]);
      // (Text the guest writes itself, like /<!--/, is accepted: see the failed-actions part.)
      const r2 = await sandbox.run({ code: "const x = 1;\nconst y = eval('1 <!-- 2');", tools });
      expect(r2.error).toMatchObject({ name: "SyntaxError", line: 2 });
      expect(r2.snapshot.values).toEqual({ x: 1 });
    });

    it("unknown names throw a real ReferenceError (SES alone would read them as undefined)", async () => {
      const r = await sandbox.run({
        code: "const ok = typeof nothingHere;\nwiki_lookup('x')",
        tools,
      });
      expect(r.error).toEqual({
        name: "ReferenceError",
        message: "wiki_lookup is not defined",
        line: 2,
      });
      expect(r.snapshot.values).toEqual({ ok: "undefined" });
    });

    it("a value that could not be carried over explains itself when used, also steps later", async () => {
      const r1 = await sandbox.run({ code: "const m = new Map([[1, 2]]);", tools });
      expect(r1.notCarriedOver).toEqual({ m: "Map is not JSON-serializable" });
      const r2 = await sandbox.run({ code: "const other = 1;", tools, snapshot: r1.snapshot });
      // Kept in the snapshot, but not news of this action.
      expect([r2.snapshot.unserializable.m, r2.notCarriedOver]).toEqual([
        "Map is not JSON-serializable",
        {},
      ]);
      const r3 = await sandbox.run({ code: "m.get(1)", tools, snapshot: r2.snapshot });
      expect(r3.error).toEqual({
        name: "ReferenceError",
        message:
          "m is not defined (its value could not be carried over: Map is not JSON-serializable)",
        line: 1,
      });
      // Declaring it again works and clears the note.
      const r4 = await sandbox.run({
        code: "const m = { 1: 2 };\nfinal_answer(m[1])",
        tools,
        snapshot: r3.snapshot,
      });
      expect([r4.finalAnswer, r4.snapshot.values.m, r4.snapshot.unserializable.m]).toEqual([
        2,
        { 1: 2 },
        undefined,
      ]);
    });

    it("a variable holding undefined is still carried over (as undefined) and can be assigned", async () => {
      const r1 = await sandbox.run({ code: "let later;", tools });
      const r2 = await sandbox.run({
        code: "later = 5;\nfinal_answer(later)",
        tools,
        snapshot: r1.snapshot,
      });
      expect(r2.finalAnswer).toBe(5);
    });
  });

  describe("concurrency", () => {
    it("nested agents: a tool that runs further actions in the same sandbox does not deadlock", async () => {
      // Parent action -> tool -> two concurrent child actions -> each calls a grandchild action.
      const leaf: HostToolFn = async (args) => `leaf(${String(args[0])})`;
      const runAgent =
        (depth: number): HostToolFn =>
        async (args) => {
          const r = await sandbox.run({
            code:
              depth > 0
                ? `final_answer(await sub(${JSON.stringify(String(args[0]))} + "/${depth}"))`
                : "final_answer(await leaf('x'))",
            tools: depth > 0 ? { sub: runAgent(depth - 1) } : { leaf },
          });
          if (!r.ok) throw new Error(r.error?.message ?? "failed");
          return r.finalAnswer;
        };
      const sub = runAgent(2);
      const r = await sandbox.run({
        code: "final_answer(await Promise.all([sub('a'), sub('b')]))",
        tools: { sub },
      });
      expect(r.error).toBeNull();
      expect(r.finalAnswer).toEqual(["leaf(x)", "leaf(x)"]);
    });

    it("many concurrent actions each get their own process and all complete", async () => {
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          sandbox.run({ code: `const r = await search("q${i}");\nfinal_answer(r)`, tools }),
        ),
      );
      expect(results.map((r) => r.finalAnswer)).toEqual(
        Array.from({ length: 6 }, (_, i) => `result for q${i}`),
      );
    });
  });

  describe("cancellation", () => {
    it("an AbortSignal stops a running action at once and aborts its tool calls", async () => {
      const controller = new AbortController();
      let toolSignal: AbortSignal | undefined;
      const hang: HostToolFn = (_args, ctx) => {
        toolSignal = ctx.signal;
        setTimeout(() => controller.abort(), 50);
        return new Promise(() => {});
      };
      const t0 = performance.now();
      const r = await sandbox.run({
        code: "const before = 1;\nawait hang();",
        tools: { hang },
        signal: controller.signal,
      });
      // Stopped by the signal, not by the deadline (the default 30 s): a bound a loaded machine
      // cannot reach by slowness alone.
      expect(performance.now() - t0).toBeLessThan(BELOW_DEFAULT_DEADLINE_MS);
      expect(r.error).toEqual({
        name: "AbortError",
        message: "The action was cancelled by the host",
        line: null,
      });
      expect(toolSignal?.aborted).toBe(true);
      const next = await sandbox.run({ code: "final_answer('still works')", tools });
      expect(next.finalAnswer).toBe("still works");
    });

    it("an already aborted signal returns without running anything", async () => {
      const ran: unknown[] = [];
      const r = await sandbox.run({
        code: "await mark()",
        tools: { mark: async () => ran.push(1) },
        signal: AbortSignal.abort(),
      });
      expect(r.error?.name).toBe("AbortError");
      expect(ran).toEqual([]);
    });
  });

  describe("limits", () => {
    it("kills an infinite loop at the deadline, reports it and replaces the process", async () => {
      const t0 = performance.now();
      const r = await sandbox.run({ code: "while (true) {}", tools, limits: { timeoutMs: 300 } });
      // Killed at the action's own 300 ms deadline, not the default 30 s one.
      expect(performance.now() - t0).toBeLessThan(BELOW_DEFAULT_DEADLINE_MS);
      expect(r.ok).toBe(false);
      expect(r.error?.name).toBe("TimeoutError");
      const next = await sandbox.run({ code: "final_answer(1 + 1)", tools });
      expect(next.finalAnswer).toBe(2);
    });

    it("keeps the head and tail of long output with a visible marker", async () => {
      const r = await sandbox.run({
        code: "for (let i = 0; i < 5000; i++) print('line ' + i)",
        tools,
        limits: { maxOutputChars: 1000 },
      });
      expect(r.logs.startsWith("line 0\nline 1\n")).toBe(true);
      expect(r.logs.endsWith("line 4999\n")).toBe(true);
      expect(r.logs).toMatch(/characters of output truncated/);
      expect(r.logs.length).toBeLessThan(1200);
    });
  });
}
