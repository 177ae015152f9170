/**
 * Capabilities switched off (one configuration for this file): the guest gets plain, powerless
 * ECMAScript — no clock, no randomness, no Intl, no float typed arrays.
 */
import { afterAll, describe, expect, it } from "vitest";
import { createSandbox } from "../../src/sandbox/index.ts";
import { CodehopError } from "../../src/errors.ts";

const sandbox = createSandbox({
  poolSize: 1,
  capabilities: { mathRandom: false, dateNow: false, floatArrays: false, intl: false },
});
afterAll(() => sandbox.close());

describe("capabilities off", () => {
  it("Math.random, Date.now and new Date() throw; Intl and Float64Array are absent", async () => {
    const r = await sandbox.run({
      code: `
        const out = [];
        for (const f of [() => Math.random(), () => Date.now(), () => new Date()]) {
          try { f(); out.push("worked") } catch (e) { out.push(e.name) }
        }
        out.push(typeof Intl, typeof Float64Array, typeof Float32Array, new Date(0).toISOString());
        try { new Intl.NumberFormat() } catch (e) { out.push(e.name + ": " + e.message) }
        final_answer(out);
      `,
      tools: {},
    });
    expect(r.finalAnswer).toEqual([
      "TypeError",
      "TypeError",
      "TypeError",
      "undefined",
      "undefined",
      "undefined",
      "1970-01-01T00:00:00.000Z",
      "ReferenceError: Intl is not defined",
    ]);
  });

  it("rejects unknown capabilities and malformed limits with CONFIG_INVALID", () => {
    expect(() => createSandbox({ capabilities: { network: true } as never })).toThrow(CodehopError);
    expect(() => createSandbox({ limits: { timeoutMs: -1 } })).toThrow(/timeoutMs/);
    expect(() => createSandbox({ limits: { nope: 1 } as never })).toThrow(/Unknown sandbox limit/);
  });

  it("rejects tool names that would shadow built-ins", async () => {
    await expect(sandbox.run({ code: "1", tools: { print: async () => 1 } })).rejects.toThrow(
      /cannot be used as a tool name/,
    );
    await expect(
      sandbox.run({ code: "1", tools: { "not a name": async () => 1 } }),
    ).rejects.toThrow(/cannot be used/);
  });
});

describe("default capabilities (for contrast, same file: capabilities are per sandbox, not per lockdown)", () => {
  it("Math.random, Date.now, Intl and Float64Array work", async () => {
    const open = createSandbox({ poolSize: 0 });
    try {
      const r = await open.run({
        code: "const x = Math.random();\nfinal_answer([x >= 0 && x < 1, Date.now() > 1.6e12, typeof Intl.NumberFormat, new Float64Array([1.5])[0], (1234.5).toFixed(1)])",
        tools: {},
      });
      expect(r.finalAnswer).toEqual([true, true, "function", 1.5, "1234.5"]);
    } finally {
      await open.close();
    }
  });
});
