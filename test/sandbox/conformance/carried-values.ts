/**
 * Conformance: carried-over values are exactly what the snapshot says, whatever a backend keeps
 * between the actions of one run — changed in place, through a helper, by code left running after
 * the action ended, or replaced by the caller (an edited snapshot, a replay from an earlier step).
 * Each check compares the run's next step with the same step in a fresh sandbox from the same
 * snapshot (what a resumed run sees).
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import type {
  ActionResult,
  CodeSandbox,
  VariablesSnapshot,
} from "../../../src/sandbox/contract.ts";
import type { SandboxFactory } from "../conformance.ts";

/** Registers the carried-values part of the suite. */
export function describeCarriedValues(factory: SandboxFactory): void {
  let sandbox: CodeSandbox;
  beforeAll(() => {
    sandbox = factory.create({ limits: { timeoutMs: 10_000 } });
  });
  afterAll(() => sandbox.close());

  const step = (session: string, code: string, snapshot?: VariablesSnapshot) =>
    sandbox.run({ code, tools: {}, session, snapshot });

  /** The same step in a fresh sandbox, from a JSON copy of the snapshot: what a resume would see. */
  async function resumed(code: string, snapshot: VariablesSnapshot): Promise<ActionResult> {
    const fresh = factory.create({ limits: { timeoutMs: 10_000 } });
    try {
      return await fresh.run({ code, tools: {}, snapshot: JSON.parse(JSON.stringify(snapshot)) });
    } finally {
      await fresh.close();
    }
  }

  it("values changed in place, through a restored helper, or not at all are carried exactly", async () => {
    const s = "in-place";
    const r1 = await step(
      s,
      "const list = [1, 2];\nconst other = { n: 1 };\nfunction add(x) { list.push(x) }\nconst untouched = 'u';",
    );
    const r2 = await step(s, "list.push(3);\nother.n += 1;", r1.snapshot);
    expect(r2.snapshot.values).toEqual({ list: [1, 2, 3], other: { n: 2 }, untouched: "u" });
    const r3 = await step(s, "add(4);", r2.snapshot); // `list` is only named in the helper
    expect(r3.snapshot.values.list).toEqual([1, 2, 3, 4]);
    const check = "final_answer([list, other, untouched])";
    const next = await step(s, check, r3.snapshot);
    expect(next.finalAnswer).toEqual([[1, 2, 3, 4], { n: 2 }, "u"]);
    expect((await resumed(check, r3.snapshot)).finalAnswer).toEqual(next.finalAnswer);
  });

  it("code still running after the action ended changes nothing the next step sees", async () => {
    const s = "after-end";
    const r1 = await step(s, "const data = [1];");
    const r2 = await step(
      s,
      "(async () => { for (let i = 0; i < 20; i++) await null; data.push('late') })();\ndata.push(2);\nfinal_answer(data.length);\ndata.push('after the answer');",
      r1.snapshot,
    );
    expect(r2.finalAnswer).toBe(2);
    expect(r2.snapshot.values.data).toEqual([1, 2]);
    // Unchanged when the action ended, changed right after.
    const r3 = await step(s, "final_answer(data.length);\ndata.push('after');", r2.snapshot);
    expect(r3.snapshot.values.data).toEqual([1, 2]);
    const check = "final_answer(data)";
    const next = await step(s, check, r3.snapshot);
    expect(next.finalAnswer).toEqual([1, 2]);
    expect((await resumed(check, r3.snapshot)).finalAnswer).toEqual([1, 2]);
  });

  it("a snapshot the caller changed (edited, or an earlier one: a replay) is what the step gets", async () => {
    const s = "edited";
    const r1 = await step(s, "const a = { v: 1 };\nconst b = [1];");
    const r2 = await step(s, "a.v = 2;\nb.push(2);", r1.snapshot);
    // Back to step 1's snapshot (a replay), in the same run: the process must not serve step 2's values.
    const replay = await step(s, "final_answer([a, b])", r1.snapshot);
    expect(replay.finalAnswer).toEqual([{ v: 1 }, [1]]);
    // An edited copy.
    const edited: VariablesSnapshot = {
      ...r2.snapshot,
      values: { ...r2.snapshot.values, a: { v: 42 } },
    };
    const after = await step(s, "final_answer([a, b])", edited);
    expect(after.finalAnswer).toEqual([{ v: 42 }, [1, 2]]);
  });
}
