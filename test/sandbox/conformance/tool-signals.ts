/** Conformance: tool calls listening on their abort signal, many at once, without Node's leak warning. */
import { afterAll, beforeAll, expect, it } from "vitest";
import type { CodeSandbox, HostToolFn } from "../../../src/sandbox/contract.ts";
import type { SandboxFactory } from "../conformance.ts";

/** Registers the abort-signal part of the suite. */
export function describeToolSignals(factory: SandboxFactory): void {
  let sandbox: CodeSandbox;
  beforeAll(() => {
    sandbox = factory.create({ limits: { maxConcurrentToolCalls: 16 } });
  });
  afterAll(() => sandbox.close());

  it("16 concurrent tool calls that each listen on ctx.signal (as fetch does) emit no MaxListenersExceededWarning", async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on("warning", onWarning);
    try {
      let listening = 0;
      let most = 0;
      const wait: HostToolFn = async (args, { signal }) => {
        const onAbort = () => {};
        signal.addEventListener("abort", onAbort);
        most = Math.max(most, ++listening);
        await new Promise((r) => setTimeout(r, 50));
        listening--;
        signal.removeEventListener("abort", onAbort);
        return args[0];
      };
      const r = await sandbox.run({
        code: "final_answer((await Promise.all(Array.from({ length: 16 }, (_, i) => wait(i)))).length)",
        tools: { wait },
      });
      expect(r.finalAnswer).toBe(16);
      expect(most).toBe(16); // all at once: the case that used to warn
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning")).toEqual([]);
    } finally {
      process.off("warning", onWarning);
    }
  });
}
