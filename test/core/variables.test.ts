import { Overwrite } from "@langchain/langgraph";
import { describe, expect, it } from "vitest";
import {
  asVariablesLog,
  foldVariables,
  variablesDelta,
  variablesUpdate,
  type VariablesLog,
} from "../../src/core/variables.ts";
import type { VariablesSnapshot } from "../../src/sandbox/contract.ts";

const snap = (s: Partial<VariablesSnapshot>): VariablesSnapshot => ({
  values: {},
  declarations: {},
  unserializable: {},
  ...s,
});

/** Applies updates as the `variables` channel's reducer does (Overwrite replaces the log). */
function apply(log: VariablesLog, update: ReturnType<typeof variablesUpdate>): VariablesLog {
  if (update === undefined) return log;
  if (update instanceof Overwrite) return update.value as VariablesLog;
  return [...log, update];
}

describe("sandbox variables stored as a log of per-action changes", () => {
  it("writes only what an action changed, and folds back to the snapshot", () => {
    const big = Array.from({ length: 1000 }, (_, i) => `row ${i}`);
    const steps = [
      snap({ values: { big, n: 1 } }),
      snap({ values: { big, n: 2 } }),
      snap({ values: { big, n: 2, m: "x" }, declarations: { f: "function f() {}" } }),
      snap({ values: { big, m: "x" }, declarations: { f: "function f() { return 1 }" } }),
    ];
    let log: VariablesLog = [];
    const written: string[] = [];
    for (const s of steps) {
      const update = variablesUpdate(log, s);
      written.push(JSON.stringify(update ?? null));
      log = apply(log, update);
      expect(foldVariables(log)).toEqual(s);
    }
    // The 1000-row value is written once: later steps write only their small changes.
    expect(written[0].length).toBeGreaterThan(8000);
    for (const w of written.slice(1)) expect(w.length).toBeLessThan(200);
    expect(log.at(-1)).toEqual({
      declarations: { f: "function f() { return 1 }" },
      removed: ["n"],
    });
  });

  it("writes nothing when nothing changed", () => {
    const s = snap({ values: { a: [1, 2] } });
    const log = apply([], variablesUpdate([], s));
    expect(variablesUpdate(log, snap({ values: { a: [1, 2] } }))).toBeUndefined();
  });

  it("moves a name between kinds (a value becomes a function, a function becomes unserializable)", () => {
    const a = snap({ values: { f: 1 } });
    const b = snap({ declarations: { f: "const f = () => 2" } });
    const c = snap({ unserializable: { f: "Map is not JSON-serializable" } });
    let log: VariablesLog = [];
    for (const s of [a, b, c]) {
      log = apply(log, variablesUpdate(log, s));
      expect(foldVariables(log)).toEqual(s);
    }
    expect(variablesDelta(b, c)).toEqual({
      unserializable: { f: "Map is not JSON-serializable" },
      removed: ["f"],
    });
  });

  it("compacts the log into one snapshot when it outgrows what it encodes", () => {
    let log: VariablesLog = [];
    let overwrites = 0;
    for (let i = 0; i < 40; i++) {
      const update = variablesUpdate(
        log,
        snap({ values: { counter: i, text: `v${i}`.repeat(50) } }),
      );
      if (update instanceof Overwrite) overwrites++;
      log = apply(log, update);
      expect(foldVariables(log)?.values.counter).toBe(i);
      expect(log.length).toBeLessThanOrEqual(16);
    }
    expect(overwrites).toBeGreaterThan(0);
  });

  it("reads and converts the single snapshot earlier versions stored in the channel", () => {
    const legacy = snap({ values: { x: 1 }, declarations: { g: "function g() {}" } });
    expect(asVariablesLog(legacy)).toEqual([legacy]);
    expect(foldVariables(legacy)).toEqual(legacy);
    expect(foldVariables(null)).toBeNull();
    const update = variablesUpdate(legacy, snap({ values: { x: 2 } }));
    expect(update).toBeInstanceOf(Overwrite);
    expect(foldVariables(apply([], update))).toEqual(snap({ values: { x: 2 } }));
  });
});
