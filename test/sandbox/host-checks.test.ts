/**
 * The host's own checks of every size a child reports, in the unit the limits are stated in: UTF-8
 * bytes ("é" is 2 bytes, one UTF-16 code unit). A child that lies (test/fixtures/sandbox/
 * lying-child.mjs, started by the pool in place of the real child) is stopped; the real child,
 * counting the same way, is never mistaken for a lying one.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSandbox } from "../../src/sandbox/index.ts";
import type { CodeSandbox } from "../../src/sandbox/contract.ts";
import { DEFAULT_CAPABILITIES, DEFAULT_LIMITS } from "../../src/sandbox/limits.ts";
import { ChildPool, type ChildSpec } from "../../src/sandbox/pool.ts";
import { runAction } from "../../src/sandbox/session.ts";

const limits = { ...DEFAULT_LIMITS, maxValueBytes: 1_000, timeoutMs: 15_000 };
const wide = "é".repeat(600); // 600 characters, 1,200 bytes: over 1,000 only when counted in bytes
const ascii = "e".repeat(600);

describe("a child that reports sizes over the limits in bytes (not in characters) is stopped", () => {
  const spec: ChildSpec = {
    heapMb: 64,
    addressSpaceMb: null,
    entry: fileURLToPath(new URL("../fixtures/sandbox/lying-child.mjs", import.meta.url)),
  };
  let pool: ChildPool;
  beforeAll(() => {
    pool = new ChildPool(spec, 0);
  });
  afterAll(() => pool.close());

  const run = (tool: string, onCall: () => void = () => {}) =>
    runAction(
      pool,
      spec,
      { code: "1", tools: { [tool]: async () => onCall() } },
      limits,
      DEFAULT_CAPABILITIES,
    );

  it("a final answer over maxValueBytes in UTF-8 is a protocol violation; the same length in ASCII is accepted", async () => {
    const lying = await run("answer_wide");
    expect(lying.isFinalAnswer).toBe(false);
    expect(lying.error?.message).toMatch(/broke its protocol/);
    const honest = await run("answer_ascii");
    expect(honest.error).toBeNull();
    expect(honest.finalAnswer).toBe(ascii);
  });

  it("tool arguments over the action's budget (8 x maxValueBytes) in UTF-8 stop the child before the call is served", async () => {
    let served = 0;
    const lying = await run("args_wide", () => void served++);
    expect(lying.error?.message).toMatch(/broke its protocol/);
    expect(served).toBeLessThan(7); // 10 x 1,204 bytes (604 characters): over 8,000 at the 7th call
    served = 0;
    const honest = await run("args_ascii", () => void served++);
    expect(honest.error).toBeNull();
    expect(served).toBe(10);
    expect(honest.finalAnswer).toBe("ok");
  });
});

describe("the real child counts in bytes as the host does", () => {
  let sandbox: CodeSandbox;
  beforeAll(() => {
    sandbox = createSandbox({ limits: { timeoutMs: 15_000 } });
  });
  afterAll(() => sandbox.close());

  it("a tool result over maxValueBytes in UTF-8 is refused with its size in bytes", async () => {
    const r = await sandbox.run({
      code: "let got; try { got = await big() } catch (e) { got = e.message }\nfinal_answer(got)",
      tools: { big: async () => wide },
      limits: { maxValueBytes: 1_000 },
    });
    expect(r.error).toBeNull();
    expect(r.finalAnswer).toMatch(
      /big\(\) returned too much data \(1202 bytes; the limit is 1000\)/,
    );
  });

  it("a variable, an answer and an argument over the limit in UTF-8 are the guest's errors and notes, not protocol violations", async () => {
    const r1 = await sandbox.run({
      code: `const w = ${JSON.stringify(wide)};\nconst a = ${JSON.stringify(ascii)};`,
      tools: {},
      limits: { maxValueBytes: 1_000 },
    });
    expect(r1.error).toBeNull();
    expect(r1.notCarriedOver?.w).toMatch(/too large \(over 1000 bytes as JSON\)/);
    expect(r1.snapshot.values.a).toBe(ascii);

    const r2 = await sandbox.run({
      code: `final_answer(${JSON.stringify(wide)})`,
      tools: {},
      limits: { maxValueBytes: 1_000 },
    });
    expect(r2.isFinalAnswer).toBe(false);
    expect(r2.error?.message).toMatch(
      /final_answer value is too large \(over 1000 bytes as JSON\)/,
    );

    let served = 0;
    const r3 = await sandbox.run({
      code: `let m; try { await t(${JSON.stringify(wide)}) } catch (e) { m = e.message }\nfinal_answer(m)`,
      tools: { t: async () => void served++ },
      limits: { maxValueBytes: 1_000 },
    });
    expect(r3.error).toBeNull();
    expect(r3.finalAnswer).toMatch(/too large \(over 1000 bytes as JSON\)/);
    expect(served).toBe(0);
  });
});

describe("a compromised child gets one outcome recorded per action, and nothing after a violation", () => {
  const spec: ChildSpec = {
    heapMb: 64,
    addressSpaceMb: null,
    entry: fileURLToPath(new URL("../fixtures/sandbox/double-report-child.mjs", import.meta.url)),
  };
  let pool: ChildPool;
  beforeAll(() => {
    pool = new ChildPool(spec, 0);
  });
  afterAll(() => pool.close());

  let served: string[] = [];
  const run = (tool: string) =>
    runAction(
      pool,
      spec,
      { code: "1", tools: { [tool]: async () => void served.push(tool) }, session: tool },
      limits,
      DEFAULT_CAPABILITIES,
    );
  /** Resolves once the pool has no process left (the child was killed), or rejects after 5 s. */
  async function processGone(): Promise<void> {
    for (const started = Date.now(); pool.size > 0;) {
      if (Date.now() - started > 5_000) throw new Error(`still ${pool.size} process(es)`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  it("a second `done` is not recorded: the first answer stands and the child is killed, not kept for the session", async () => {
    const r = await run("twice");
    expect([r.isFinalAnswer, r.finalAnswer, r.error]).toEqual([true, "first", null]);
    await processGone();
    // An honest report in the same setup keeps its process for the session's next action.
    const plain = await run("plain");
    expect(plain.finalAnswer).toBe("plain");
    await new Promise((r) => setTimeout(r, 50));
    expect(pool.size).toBe(1);
    pool.endSession("plain");
  });

  it("a valid `done` after one that broke the protocol is not recorded: the action reports the violation", async () => {
    const r = await run("bad_then_good");
    expect(r.isFinalAnswer).toBe(false);
    expect(r.finalAnswer).toBeNull();
    expect(r.error?.message).toMatch(/broke its protocol/);
  });

  it("a tool call after the action's `done`, or after a violation, is never served", async () => {
    served = [];
    const r1 = await run("call_after_done");
    expect(r1.finalAnswer).toBe("first");
    const r2 = await run("bad_then_call");
    expect(r2.error?.message).toMatch(/broke its protocol/);
    await new Promise((r) => setTimeout(r, 50));
    expect(served).toEqual([]);
  });
});
