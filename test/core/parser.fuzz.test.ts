/**
 * Fuzzing the action parser (fast-check): random mutations of real model replies
 * (test/core/fuzz/model-replies.ts) always end in code to run or a format error for the model,
 * never a throw, within a time bound that only a linear parser meets on large replies. On replies
 * small enough for it, the result is exactly that of the parser as first written with regular
 * expressions (test/core/fuzz/reference-parser.ts), so making it linear changed nothing else.
 * Inputs found by fuzzing (each took seconds at 20 KB before) are kept below as regression cases.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FORMAT_REMINDER, normalizeCode, parseAction } from "../../src/core/parser.ts";
import { MODEL_REPLIES } from "./fuzz/model-replies.ts";
import { referenceNormalizeCode, referenceParseAction } from "./fuzz/reference-parser.ts";

/** Pieces of the reply format (and of what breaks it) that mutations insert. */
const TOKENS = [
  "```",
  "```js\n",
  "```python\n",
  "```\n",
  "<think>",
  "</think>",
  "<THINK>",
  "<code>",
  "</code>",
  "Code:",
  "code:\n",
  "Thought:",
  "<end_action>",
  "<end_code>",
  "\n",
  "\r\n",
  " ",
  "\t",
  "\u00a0",
  "\u2028",
  "/*",
  "*/",
  "//",
  ";",
  "`",
  "é",
  "😀",
  "\u0130", // lower-cases to two code units
];

const token = fc.constantFrom(...TOKENS);
const reply = fc.constantFrom(...MODEL_REPLIES);

/** One edit of a text: insert a token or random text, delete or duplicate a slice, repeat a token. */
const edit = (maxRepeat: number) =>
  fc.oneof(
    fc.record({
      kind: fc.constant("insert" as const),
      at: fc.nat(),
      text: fc.oneof(token, fc.string({ maxLength: 8 })),
    }),
    fc.record({ kind: fc.constant("delete" as const), at: fc.nat(), length: fc.nat({ max: 40 }) }),
    fc.record({
      kind: fc.constant("duplicate" as const),
      at: fc.nat(),
      length: fc.nat({ max: 80 }),
      times: fc.integer({ min: 2, max: 5 }),
    }),
    fc.record({
      kind: fc.constant("repeat" as const),
      at: fc.nat(),
      text: token,
      times: fc.integer({ min: 2, max: maxRepeat }),
    }),
  );

type Edit =
  | { kind: "insert"; at: number; text: string }
  | { kind: "delete"; at: number; length: number }
  | { kind: "duplicate"; at: number; length: number; times: number }
  | { kind: "repeat"; at: number; text: string; times: number };

function applyEdits(text: string, edits: Edit[]): string {
  let out = text;
  for (const e of edits) {
    const at = out.length === 0 ? 0 : e.at % (out.length + 1);
    if (e.kind === "insert") out = out.slice(0, at) + e.text + out.slice(at);
    else if (e.kind === "delete") out = out.slice(0, at) + out.slice(at + e.length);
    else if (e.kind === "duplicate") {
      const piece = out.slice(at, at + e.length);
      out = out.slice(0, at) + piece.repeat(e.times) + out.slice(at + e.length);
    } else out = out.slice(0, at) + e.text.repeat(e.times) + out.slice(at);
  }
  return out;
}

const mutated = (maxEdits: number, maxRepeat: number) =>
  fc
    .tuple(reply, fc.array(edit(maxRepeat), { minLength: 1, maxLength: maxEdits }))
    .map(([text, edits]) => applyEdits(text, edits as Edit[]));

/** What every result must look like, whatever the reply. */
function checkShape(input: string, p: ReturnType<typeof parseAction>): void {
  expect(typeof p.thought).toBe("string");
  if (p.code === null) {
    expect(typeof p.error).toBe("string");
    expect(p.error).toContain(FORMAT_REMINDER);
  } else {
    expect(p.code.length).toBeGreaterThan(0);
    expect(p.code).toBe(p.code.trim());
    // (End markers are removed in one pass: one nested in another, `<<end_action>end_action>`,
    // leaves one, which the sandbox reports as a syntax error the model can act on.)
    expect(p.error).toBeUndefined();
  }
  // Nothing is made up: the parts come from the reply (blocks joined by a blank line).
  expect(p.thought.length + (p.code?.length ?? 0)).toBeLessThanOrEqual(input.length);
}

/**
 * Generous: a linear parse of 200 KB takes milliseconds, the quadratic cases took minutes. CPU
 * time, not wall time: a loaded machine slows the parse, it does not make it do more work.
 */
const BOUND_MS = 1_000;

/** CPU milliseconds this process has used since `since`. */
function cpuMsSince(since: NodeJS.CpuUsage): number {
  const u = process.cpuUsage(since);
  return (u.user + u.system) / 1000;
}

function timedParse(input: string): { parsed: ReturnType<typeof parseAction>; ms: number } {
  const t0 = process.cpuUsage();
  const parsed = parseAction(input);
  if (parsed.code !== null) normalizeCode(parsed.code);
  return { parsed, ms: cpuMsSince(t0) };
}

describe("action parser fuzzing", () => {
  it("small mutated replies parse exactly as the reference (regular-expression) parser does", () => {
    fc.assert(
      fc.property(mutated(6, 20), (input) => {
        const p = parseAction(input);
        expect(p).toEqual(referenceParseAction(input));
        checkShape(input, p);
        if (p.code !== null) expect(normalizeCode(p.code)).toBe(referenceNormalizeCode(p.code));
      }),
      { numRuns: 400 },
    );
  });

  it("code snippets normalize exactly as the reference does", () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(token, fc.string({ maxLength: 6 })), { maxLength: 40 }),
        (parts) => {
          const code = parts.join("");
          expect(normalizeCode(code)).toBe(referenceNormalizeCode(code));
        },
      ),
      { numRuns: 300 },
    );
  });

  it("large mutated replies (runs of format tokens thousands long) end in code or a format error within the bound", () => {
    fc.assert(
      fc.property(mutated(4, 20_000), (input) => {
        const { parsed, ms } = timedParse(input);
        checkShape(input, parsed);
        expect(ms).toBeLessThan(BOUND_MS);
      }),
      { numRuns: 60 },
    );
  });

  // Found by fuzzing: each took 1-30 s at 20-90 KB with the regular expressions (a quadratic scan
  // from every start position). Kept as regression cases, at 200 KB.
  const N = 200_000;
  const REGRESSIONS: Record<string, string> = {
    "a run of backticks with no line break": "```".repeat(N / 3),
    "thousands of blank lines": "\n".repeat(N) + "x",
    "blank lines and spaces before text": "\n \t".repeat(N / 3) + "x",
    "a thought followed by blank lines": `Thought: x${"\n".repeat(N)}y`,
    "<think> opened again and again, never closed": "<think>".repeat(N / 7),
    "labels on one long line": " code:".repeat(N / 6),
  };
  it.each(Object.entries(REGRESSIONS))("regression: %s", (_, input) => {
    const { parsed, ms } = timedParse(input);
    checkShape(input, parsed);
    expect(ms).toBeLessThan(BOUND_MS);
    const small = input.slice(0, 2_000);
    expect(parseAction(small)).toEqual(referenceParseAction(small));
  });

  it("regression: unclosed comments and long runs of semicolons normalize within the bound", () => {
    for (const code of ["/*a".repeat(N / 3), `${";".repeat(N)}x`, `x${";".repeat(N)}`]) {
      const t0 = process.cpuUsage();
      normalizeCode(code);
      expect(cpuMsSince(t0)).toBeLessThan(BOUND_MS);
      const small = code.slice(0, 2_000);
      expect(normalizeCode(small)).toBe(referenceNormalizeCode(small));
    }
  });
});
