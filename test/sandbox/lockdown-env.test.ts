/**
 * LOCKDOWN_* environment variables of the host must not weaken the child's lockdown (every option
 * is passed explicitly and the child gets an empty environment). This file's configuration: a host
 * environment asking for the weakest settings.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSandbox } from "../../src/sandbox/index.ts";
import type { CodeSandbox } from "../../src/sandbox/contract.ts";

const WEAK = {
  LOCKDOWN_ERROR_TAMING: "unsafe",
  LOCKDOWN_STACK_FILTERING: "verbose",
  LOCKDOWN_OVERRIDE_TAMING: "min",
  LOCKDOWN_CONSOLE_TAMING: "unsafe",
  LOCKDOWN_HARDEN_TAMING: "unsafe",
  NODE_OPTIONS: "--no-experimental-permission",
};
const saved: Record<string, string | undefined> = {};
let sandbox: CodeSandbox;

beforeAll(() => {
  for (const [k, v] of Object.entries(WEAK)) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
  sandbox = createSandbox({ poolSize: 0 });
});
afterAll(async () => {
  await sandbox.close();
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

describe("host LOCKDOWN_* variables are ignored", () => {
  it("errors still have no stack, and hardened objects are still frozen", async () => {
    const r = await sandbox.run({
      code: "const e = new Error('x');\nfinal_answer([e.stack, Object.isFrozen(print), Object.isFrozen(Object.prototype)])",
      tools: {},
    });
    expect(r.finalAnswer).toEqual(["", true, true]);
  });
});
