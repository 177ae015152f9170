/**
 * Conformance: a failed action keeps everything the run had (compile errors, syntax the engine
 * lacks, timeouts, errors after assignments), text the model writes is accepted as written
 * (comment-like or import-like text in strings, templates, regexes and names — also in helpers
 * restored from earlier steps), and template raw text is never changed.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import type {
  ActionResult,
  CodeSandbox,
  VariablesSnapshot,
} from "../../../src/sandbox/contract.ts";
import type { SandboxFactory } from "../conformance.ts";

/** Registers the failed-actions part of the suite. */
export function describeFailedActions(factory: SandboxFactory): void {
  let sandbox: CodeSandbox;
  beforeAll(() => {
    sandbox = factory.create({ limits: { timeoutMs: 5_000 } });
  });
  afterAll(() => sandbox.close());

  const SETUP =
    "const kept = { a: 1 };\nfunction helper() { return 2 }\nconst arrow = (s) => s.split('<!--')[0];\nclass Box { constructor(v) { this.v = v } }";
  const CHECK = "final_answer([kept.a, helper(), arrow('x<!--y'), new Box(3).v])";

  async function setup(session: string): Promise<VariablesSnapshot> {
    const r = await sandbox.run({ code: SETUP, tools: {}, session });
    expect(r.error).toBeNull();
    return r.snapshot;
  }
  async function check(session: string, snapshot: VariablesSnapshot): Promise<ActionResult> {
    const r = await sandbox.run({ code: CHECK, tools: {}, session, snapshot });
    expect(r.error).toBeNull();
    expect(r.finalAnswer).toEqual([1, 2, "x", 3]);
    return r;
  }

  it("text that looks like HTML comments, import() or eval() in literals and names runs, and nothing is lost", async () => {
    const snapshot = await setup("texts");
    const cases = [
      "const re = /<!--(.*?)-->/;\nconst m = re.exec('a<!-- b -->c')[1];",
      "const s = 'import/* x */' + \"import// y\" + 'import (z)' + 'eval (w)';",
      "const o = { import(x) { return x }, eval(x) { return x } };\nconst r = o.import(1) + o.eval(2);",
      "class P { #import = 1; get v() { return this.#import } }\nconst pv = new P().v;",
      "const $import = (x) => x;\nconst $eval = (x) => x;\nconst q = $import(1) + $eval(2);",
      "const t = `a<!--b${1}import(c)`;",
      "const x = 1 <!--y\n;",
    ];
    for (const code of cases) {
      const r = await sandbox.run({ code, tools: {}, session: "texts", snapshot });
      // Either it runs, or it is a syntax error the model can fix; the run keeps its variables.
      if (!r.ok) expect(r.error?.name, code).toBe("SyntaxError");
      else expect(r.error, code).toBeNull();
      expect(Object.keys(r.snapshot.values), code).toContain("kept");
      expect(Object.keys(r.snapshot.declarations), code).toEqual(
        expect.arrayContaining(["Box", "arrow", "helper"]),
      );
    }
    await check("texts", snapshot);
    const ok = await sandbox.run({
      code: "const re = /<!--(.*?)-->/;\nfinal_answer([re.exec('a<!-- b -->c')[1], ({ import: (x) => x }).import(7)])",
      tools: {},
    });
    expect(ok.finalAnswer).toEqual([" b ", 7]);
  });

  it("a helper restored from an earlier step may contain any of that text", async () => {
    const [r1] = [
      await sandbox.run({
        code: "function strip(html) { return html.replace(/<!--[^]*?-->/g, '').replace(/import\\(/g, 'i(') }\nconst page = '<p>a<!-- note -->b import(x)</p>';",
        tools: {},
        session: "restored-text",
      }),
    ];
    expect(r1.error).toBeNull();
    const r2 = await sandbox.run({
      code: "final_answer(strip(page))",
      tools: {},
      session: "restored-text",
      snapshot: r1.snapshot,
    });
    expect(r2.error).toBeNull();
    expect(r2.finalAnswer).toBe("<p>ab i(x)</p>");
  });

  it("syntax errors (also syntax this engine cannot run, like block `using` where unsupported) keep every variable", async () => {
    const snapshot = await setup("syntax");
    for (const code of ["const = 1;", "{ using res = null; }\nconst after = 1;", "x +* 2"]) {
      const r = await sandbox.run({ code, tools: {}, session: "syntax", snapshot });
      if (!r.ok) {
        expect(r.error?.name, code).toBe("SyntaxError");
        expect(typeof r.error?.line, code).toBe("number");
      }
      expect(r.snapshot.values.kept, code).toEqual({ a: 1 });
      expect(Object.keys(r.snapshot.declarations).sort(), code).toEqual(["Box", "arrow", "helper"]);
    }
    await check("syntax", snapshot);
  });

  it("a timeout keeps the previous variables", async () => {
    const snapshot = await setup("timeout");
    const r = await sandbox.run({
      code: "kept.a = 99;\nconst lost = 1;\nwhile (true) {}",
      tools: {},
      session: "timeout",
      snapshot,
      limits: { timeoutMs: 500 },
    });
    expect(r.error?.name).toBe("TimeoutError");
    expect(r.snapshot).toEqual(snapshot);
    await check("timeout", r.snapshot);
  });

  it("template raw text is never changed (String.raw, tagged templates), and a tag sees one strings array per call site", async () => {
    const r = await sandbox.run({
      code: [
        "const tag = (s) => s;",
        "const site = () => tag`<!--${1}-->`;",
        "final_answer([String.raw`a<!--b`, String.raw`import(x)`, String.raw`\\u0041<!--`, `x<!--${2}-->y`, tag`eval(1)`.raw[0], site() === site(), Object.isFrozen(site()), site().raw.join('|')])",
      ].join("\n"),
      tools: {},
    });
    expect(r.error).toBeNull();
    expect(r.finalAnswer).toEqual([
      "a<!--b",
      "import(x)",
      "\\u0041<!--",
      "x<!--2-->y",
      "eval(1)",
      true,
      true,
      "<!--|-->",
    ]);
  });
}
