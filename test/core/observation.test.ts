import { describe, expect, it } from "vitest";
import { formatObservation, truncateMiddle } from "../../src/core/observation.ts";
import type { ActionOutcome } from "../../src/core/state.ts";

const outcome = (o: Partial<ActionOutcome>): ActionOutcome => ({
  step: 1,
  ok: true,
  logs: "",
  isFinalAnswer: false,
  finalAnswer: null,
  error: null,
  toolCalls: [],
  durationMs: 1,
  ...o,
});

describe("formatObservation", () => {
  it("shows the logs", () => {
    expect(formatObservation(outcome({ logs: "42\n" }), [], 1000)).toEqual({
      text: "Execution logs:\n42",
      isError: false,
    });
  });

  it("tells the model to print when nothing was printed", () => {
    expect(formatObservation(outcome({}), [], 1000).text).toMatch(/console\.log/);
  });

  it("names the tools that exist when the code calls an unknown one", () => {
    const o = formatObservation(
      outcome({
        ok: false,
        error: { name: "ReferenceError", message: "search_web is not defined", line: 2 },
      }),
      ["search_wikipedia", "get_page"],
      1000,
    );
    expect(o.isError).toBe(true);
    expect(o.text).toContain("Error (line 2): ReferenceError: search_web is not defined");
    expect(o.text).toContain("The tools that exist are: search_wikipedia, get_page, final_answer.");
  });

  it("builds the tool list (given as a function) only to answer an unknown name", () => {
    let built = 0;
    const names = () => {
      built++;
      return ["lookup"];
    };
    expect(formatObservation(outcome({ logs: "fine" }), names, 1000).text).toBe(
      "Execution logs:\nfine",
    );
    const failed = { name: "TypeError", message: "x.map is not a function", line: 1 };
    formatObservation(outcome({ ok: false, error: failed }), names, 1000);
    expect(built).toBe(0);
    const unknown = formatObservation(
      outcome({
        ok: false,
        error: { name: "ReferenceError", message: "lookup_all is not defined", line: 1 },
      }),
      names,
      1000,
    );
    expect(built).toBe(1);
    expect(unknown.text).toContain("The tools that exist are: lookup, final_answer.");
  });

  it("lists the tools for an uncallable bare name, but not for a method", () => {
    const bare = formatObservation(
      outcome({
        ok: false,
        error: { name: "TypeError", message: "web is not a function", line: 1 },
      }),
      ["get"],
      1000,
    );
    expect(bare.text).toContain("The tools that exist are: get, final_answer.");
    const method = formatObservation(
      outcome({
        ok: false,
        error: { name: "TypeError", message: "s.foo is not a function", line: 1 },
      }),
      ["get"],
      1000,
    );
    expect(method.text).not.toContain("The tools that exist");
  });

  it("keeps logs printed before an error and explains timeouts", () => {
    const o = formatObservation(
      outcome({
        ok: false,
        logs: "step 1",
        error: { name: "TimeoutError", message: "action exceeded 30000 ms", line: null },
      }),
      [],
      1000,
    );
    expect(o.text).toMatch(/^Execution logs:\nstep 1\nError: TimeoutError/);
    expect(o.text).toContain("do less per step");
  });

  it("shows a syntax error's line and column once", () => {
    const o = formatObservation(
      outcome({
        ok: false,
        error: {
          name: "SyntaxError",
          message: "Unexpected token (line 2, column 4)",
          line: 2,
          column: 4,
        },
      }),
      [],
      1000,
    );
    expect(o.text).toMatch(/^Error \(line 2, column 4\): SyntaxError: Unexpected token\n/);
  });

  it("notes the variables the action created that cannot be carried over to the next step", () => {
    const o = formatObservation(
      outcome({
        logs: "ok",
        notCarriedOver: {
          m: "Map is not JSON-serializable",
          b: "instance of Box is not JSON-serializable",
        },
      }),
      [],
      1000,
    );
    expect(o).toEqual({
      text: "Execution logs:\nok\nNote: not carried over to the next step: m (Map is not JSON-serializable), b (instance of Box is not JSON-serializable)",
      isError: false,
    });
    expect(formatObservation(outcome({ logs: "ok", notCarriedOver: {} }), [], 1000).text).toBe(
      "Execution logs:\nok",
    );
  });

  it("passes format errors through as they are", () => {
    const o = formatObservation(
      outcome({ ok: false, error: { name: "FormatError", message: "No code found.", line: null } }),
      [],
      1000,
    );
    expect(o).toEqual({ text: "No code found.", isError: true });
  });

  it("caps long observations keeping head and tail", () => {
    const o = formatObservation(outcome({ logs: `HEAD${"x".repeat(5000)}TAIL` }), [], 500);
    expect(o.text.length).toBeLessThanOrEqual(500);
    expect(o.text).toContain("HEAD");
    expect(o.text).toContain("TAIL");
    expect(o.text).toMatch(/characters cut/);
  });
});

it("truncateMiddle leaves short text alone", () => {
  expect(truncateMiddle("abc", 10)).toBe("abc");
});
