/** The AST wrapper builder (no child process involved). */
import { describe, expect, it } from "vitest";
import { isBindableName } from "../../src/sandbox/contract.ts";
import { buildAction, type BuiltAction } from "../../src/sandbox/transform.ts";

function build(code: string, previous?: Parameters<typeof buildAction>[1]): BuiltAction {
  const built = buildAction(code, previous);
  if ("error" in built) throw new Error(`unexpected failure: ${built.error.message}`);
  return built;
}

describe("buildAction", () => {
  it("collects top-level bindings of every declaration form, including var in nested blocks", () => {
    const b = build(
      "const a = 1; let [b, { c }] = [2, { c: 3 }]; var d;\nfunction f() { var inner = 1 }\nclass K {}\nfor (var i = 0; i < 1; i++) { var j = i }\nfor (var k in {}) {}\nif (true) { let blockScoped = 1 }",
    );
    expect(b.names.sort()).toEqual(["K", "a", "b", "c", "d", "f", "i", "j", "k"]);
    expect(Object.keys(b.declarationSources).sort()).toEqual(["K", "f"]);
  });

  it("records const f = () => ... as a declaration with its source text", () => {
    const b = build("const inc = (n) => n + 1;\nconst C = class { };\nconst x = inc(1);");
    expect(b.declarationSources).toEqual({ inc: "(n) => n + 1", C: "class { }" });
  });

  it("never pastes guest text: the generated wrapper reparses to the same guest statements", () => {
    const b = build("const s = '}); process.exit(1); ({';");
    expect(b.source).not.toContain("'}); process.exit(1); ({'");
    expect(b.source).toContain(JSON.stringify("}); process.exit(1); ({"));
  });

  it("reports syntax errors with line and 1-based column, in the fields and the message", () => {
    const r = buildAction("const a = 1;\nconst = 2;", undefined);
    expect("error" in r && r.error).toEqual({
      name: "SyntaxError",
      message: "Unexpected token (line 2, column 7)",
      line: 2,
      column: 7,
    });
    const ts = buildAction("const n: number = 1;", undefined);
    expect("error" in ts && ts.error.message).toBe(
      "Unexpected token (line 1, column 8) (the sandbox runs JavaScript: remove TypeScript type annotations)",
    );
  });

  it("treats a #! first line as a comment without shifting positions", () => {
    const b = build("#!/usr/bin/env node\nconst a = 1;");
    expect(b.names).toEqual(["a"]);
    const r = buildAction("#!x\nconst = 2;", undefined);
    expect("error" in r && r.error).toMatchObject({ line: 2, column: 7 });
    // Only on the first line, like JavaScript itself.
    expect("error" in buildAction("\n#!x", undefined)).toBe(true);
  });

  it("leaves names whose values could not be carried over unbound (undefined ones stay bound)", () => {
    const b = build("1", {
      values: {},
      declarations: {},
      unserializable: { m: "Map is not JSON-serializable", u: "value is undefined" },
    });
    expect(b.names).toEqual(["u"]);
  });

  it("parses as strict code, so strict-only errors get a position (with, octal, duplicate params)", () => {
    for (const [code, line] of [
      ["const a = 1;\nwith (a) {}", 2],
      ["var x = 010;", 1],
      ["function f(a, a) {}", 1],
    ] as const) {
      const r = buildAction(code, undefined);
      expect("error" in r && r.error, code).toMatchObject({ name: "SyntaxError", line });
    }
    const r = buildAction("const a = = 1;", undefined);
    expect("error" in r && r.error.column).toBe(11); // column of the guest's own line 1, not of the added directive
  });

  it("hints at TypeScript when a syntax error comes from type annotations", () => {
    const r = buildAction("const n: number = 1;", undefined);
    expect("error" in r && r.error.message).toMatch(
      /runs JavaScript: remove TypeScript type annotations/,
    );
    const plain = buildAction("const = 1;", undefined);
    expect("error" in plain && plain.error.message).not.toMatch(/TypeScript/);
  });

  it("rejects import() with a clear message and its position", () => {
    const r = buildAction("const x = 1;\nawait import('fs')", undefined);
    expect("error" in r && r.error).toMatchObject({
      name: "SyntaxError",
      line: 2,
      message: expect.stringMatching(/import\(\) is not available/),
    });
  });

  it("turns absurdly nested code into a SyntaxError instead of crashing the host", () => {
    const r = buildAction("(".repeat(100_000) + ")".repeat(100_000), undefined);
    expect("error" in r).toBe(true);
  });

  it("drops snapshot entries with invalid names or non-function declaration sources, with a reason", () => {
    const b = build("1", {
      values: { ok: 1, "bad name": 2, "a;process": 3 },
      declarations: {
        f: "function f() { return 1 }",
        evil: "process.exit(1)",
        trailing: "() => 1; process.exit(1)",
        g: "function g() {} }); process.exit(1); ({",
      },
      unserializable: {},
    });
    expect(b.names.sort()).toEqual(["f", "ok"]);
    expect(Object.keys(b.dropped).sort()).toEqual([
      "a;process",
      "bad name",
      "evil",
      "g",
      "trailing",
    ]);
    expect(b.dropped.evil).toMatch(/not a function or class/);
  });

  it("never restores tool or built-in names from a snapshot", () => {
    const built = buildAction(
      "1",
      { values: { search: 1 }, declarations: { print: "() => 1" }, unserializable: {} },
      new Set(["search", "print"]),
    );
    expect("names" in built && built.names).toEqual([]);
    expect("dropped" in built && Object.keys(built.dropped).sort()).toEqual(["print", "search"]);
  });

  it("maps generated positions back to guest lines", () => {
    const b = build("const a = 1;\n\nconst b = 2;\nnull.x;");
    const line = b.source.split("\n").findIndex((l) => l.includes(".x")) + 1;
    expect(b.mapLine(line, 4)).toBe(4);
  });
});

describe("isBindableName", () => {
  it("accepts identifiers and rejects keywords, reserved words and junk", () => {
    expect(isBindableName("foo_1")).toBe(true);
    expect(isBindableName("$x")).toBe(true);
    for (const bad of ["", "1a", "a b", "let", "eval", "arguments", "class", "a.b", "x;y"])
      expect(isBindableName(bad), bad).toBe(false);
  });
});
