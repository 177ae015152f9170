/**
 * Fuzzing the action transform (fast-check): random mutations of the code of real model replies
 * (test/core/fuzz/model-replies.ts) and of code that exercises every phase (declarations, classes,
 * templates, regexes, text SES refuses) either build a wrapper that parses as JavaScript or fail
 * with a syntax error for the model — never a throw, a wrapper that does not parse, or a hang.
 */
import * as acorn from "acorn";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseAction } from "../../src/core/parser.ts";
import { buildAction } from "../../src/sandbox/transform.ts";
import { MODEL_REPLIES } from "../core/fuzz/model-replies.ts";

const PHASES = [
  "const { a, b: [c, ...d] = [] } = obj;\nvar n = 0;\nfor (var i of [1, 2]) n += i;",
  "function helper(x = 1) { return x * 2 }\nclass Box extends Base { static kind = 'box'; #v = 1; get v() { return this.#v } }\nclass Base {}",
  "const f = () => `a${1 + 2}b`;\nlet g; g = class { *[Symbol.iterator]() { yield 1 } };\nconst alias = f;",
  "const re = /<!--.*?-->/g;\nconst s = 'import(x) eval(y) <!-- -->';\nconst t = String.raw`\\u{61}${s}`;",
  "if (typeof maybe === 'undefined') { print(__proto__, toString) }\nlabel: for (const k in o) { continue label }",
  "const r = await search('x');\ntry { final_answer(r) } catch ({ message }) { console.log(message) }\nr",
  "return (0, eval)('1 + 1')",
];

const TOKENS = [
  "{",
  "}",
  "(",
  ")",
  "[",
  "]",
  "`",
  "${",
  "'",
  '"',
  "/",
  "/*",
  "*/",
  "//",
  "\n",
  ";",
  ",",
  "=",
  "=>",
  "class ",
  "function ",
  "static ",
  "extends ",
  "await ",
  "return ",
  "var ",
  "let ",
  "const ",
  "async ",
  "yield ",
  "new ",
  "import(",
  "eval(",
  "<!--",
  "-->",
  "__proto__",
  "#x",
  "super",
  "this",
  "arguments",
  "\u2028",
  "é",
  "0x",
  "1n",
  "...",
  "?.",
  "??=",
];

const CODES: string[] = [
  ...MODEL_REPLIES.map((r) => parseAction(r).code).filter((c): c is string => c !== null),
  ...PHASES,
];

const edit = fc.oneof(
  fc.record({ at: fc.nat(), cut: fc.nat({ max: 12 }), text: fc.constantFrom(...TOKENS) }),
  fc.record({ at: fc.nat(), cut: fc.nat({ max: 12 }), text: fc.string({ maxLength: 4 }) }),
);

const mutatedCode = fc
  .tuple(fc.constantFrom(...CODES), fc.array(edit, { minLength: 1, maxLength: 6 }))
  .map(([code, edits]) => {
    let out = code;
    for (const e of edits) {
      const at = e.at % (out.length + 1);
      out = out.slice(0, at) + e.text + out.slice(at + e.cut);
    }
    return out;
  });

/** A previous step's snapshot, so restore (values, declarations, notes) is fuzzed too. */
const previous = {
  values: { obj: { a: 1 }, n: 2 },
  declarations: {
    helper: "function helper() { return 1 }",
    Base: "class Base {}",
    alias: "helper",
  },
  unserializable: { m: "Map is not JSON-serializable", '"__proto__"': "cannot be carried over" },
};
const tools = new Set(["search", "print", "console", "final_answer"]);

/**
 * Generous: building the wrapper of a few KB takes a few ms. Counted in this process's CPU time,
 * which a loaded machine does not inflate the way it does wall time (a hang spends CPU either way).
 */
const BOUND_MS = 2_000;

function check(code: string): void {
  const c0 = process.cpuUsage();
  const built = buildAction(code, previous, tools);
  const used = process.cpuUsage(c0);
  expect((used.user + used.system) / 1000).toBeLessThan(BOUND_MS);
  if ("error" in built) {
    expect(built.error.name).toBe("SyntaxError");
    expect(typeof built.error.message).toBe("string");
    expect(built.error.message.length).toBeGreaterThan(0);
    return;
  }
  // The wrapper is JavaScript V8 can compile as a script (what the child evaluates).
  expect(() =>
    acorn.parse(built.source, { ecmaVersion: "latest", sourceType: "script" }),
  ).not.toThrow();
  expect(new Set(built.names).size).toBe(built.names.length);
  for (const source of Object.values(built.declarationSources))
    expect(typeof source).toBe("string");
}

describe("action transform fuzzing", () => {
  it("mutated model code builds a wrapper that parses, or fails with a syntax error for the model", () => {
    fc.assert(fc.property(mutatedCode, check), { numRuns: 300 });
  });

  it.each([
    ["deep parentheses", "(".repeat(50_000) + "1" + ")".repeat(50_000)],
    ["deep arrays", "[".repeat(50_000) + "]".repeat(50_000)],
    ["deep templates", "`${".repeat(5_000) + "1" + "}`".repeat(5_000)],
    ["deep blocks", "{".repeat(50_000) + "}".repeat(50_000)],
    [
      "many declarations",
      Array.from({ length: 5_000 }, (_, i) => `const v${i} = ${i};`).join("\n"),
    ],
  ])("regression: %s", (_, code) => check(code));
});
