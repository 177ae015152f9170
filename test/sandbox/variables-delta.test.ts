/**
 * The SES backend's variables protocol: after a run's first action, only changed bindings cross
 * the process boundary (either way); the process keeps the values it restored; a new process, or a
 * snapshot the process does not hold, gets the values sent again.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { LineBuffer } from "../../src/sandbox/child/protocol.mjs";
import { createSandbox } from "../../src/sandbox/index.ts";
import { SandboxChild } from "../../src/sandbox/pool.ts";

const sandbox = createSandbox({ poolSize: 1 });
afterAll(() => sandbox.close());

// Bytes of every line the host sends to children and of every chunk it reads from them.
let sent = 0;
let received = 0;
const originalSend = SandboxChild.prototype.sendLine;
const originalPush = LineBuffer.prototype.push;
beforeEach(() => {
  SandboxChild.prototype.sendLine = function (line: string) {
    sent += line.length;
    return originalSend.call(this, line);
  };
  LineBuffer.prototype.push = function (chunk: string) {
    received += chunk.length;
    return originalPush.call(this, chunk);
  };
});
afterEach(() => {
  SandboxChild.prototype.sendLine = originalSend;
  LineBuffer.prototype.push = originalPush;
});

async function traffic<T>(
  fn: () => Promise<T>,
): Promise<{ sent: number; received: number; result: T }> {
  sent = 0;
  received = 0;
  const result = await fn();
  await new Promise((r) => setTimeout(r, 50)); // the child's idle message
  return { sent, received, result };
}

const BIG = "const big = Array.from({ length: 6000 }, (_, i) => ({ id: i, text: 'row ' + i }));";

describe("only changed bindings cross the boundary after a run's first action", () => {
  it("an unchanged 100 KB value crosses neither way; a changed one crosses back once", async () => {
    const first = await traffic(() => sandbox.run({ code: BIG, tools: {}, session: "delta" }));
    const size = JSON.stringify(first.result.snapshot.values.big).length;
    expect(size).toBeGreaterThan(100_000);
    expect(first.received).toBeGreaterThan(size); // the new value came back once

    const trivial = await traffic(() =>
      sandbox.run({
        code: "const x = 1;",
        tools: {},
        session: "delta",
        snapshot: first.result.snapshot,
      }),
    );
    expect(trivial.result.error).toBeNull();
    expect(trivial.result.snapshot.values.big).toBe(first.result.snapshot.values.big); // the same object
    expect(trivial.sent).toBeLessThan(10_000);
    expect(trivial.received).toBeLessThan(10_000);

    const read = await traffic(() =>
      sandbox.run({
        code: "const n = big.length;",
        tools: {},
        session: "delta",
        snapshot: trivial.result.snapshot,
      }),
    );
    expect(read.result.snapshot.values.n).toBe(6000);
    expect(read.sent + read.received).toBeLessThan(10_000); // read, compared, unchanged

    const changed = await traffic(() =>
      sandbox.run({
        code: "big.push({ id: -1 });",
        tools: {},
        session: "delta",
        snapshot: read.result.snapshot,
      }),
    );
    expect(changed.sent).toBeLessThan(10_000);
    expect(changed.received).toBeGreaterThan(size);
    expect((changed.result.snapshot.values.big as unknown[]).length).toBe(6001);
  });

  it("another session, or a snapshot the process does not hold, gets the value sent", async () => {
    const first = await sandbox.run({ code: BIG, tools: {}, session: "holder" });
    const size = JSON.stringify(first.snapshot.values.big).length;
    const other = await traffic(() =>
      sandbox.run({
        code: "const x = 1;",
        tools: {},
        session: "someone else",
        snapshot: first.snapshot,
      }),
    );
    expect(other.sent).toBeGreaterThan(size);
    const copy = JSON.parse(JSON.stringify(first.snapshot));
    const fromCheckpoint = await traffic(() =>
      sandbox.run({ code: "const x = 1;", tools: {}, session: "holder", snapshot: copy }),
    );
    expect(fromCheckpoint.sent).toBeGreaterThan(size);
    // ... and once sent, it is held: the next step sends nothing big.
    const again = await traffic(() =>
      sandbox.run({
        code: "const y = 1;",
        tools: {},
        session: "holder",
        snapshot: fromCheckpoint.result.snapshot,
      }),
    );
    expect(again.sent).toBeLessThan(10_000);
  });

  it("values in a snapshot the sandbox returned are frozen (so one object always means one value)", async () => {
    const r = await sandbox.run({ code: "const a = { list: [1] };", tools: {} });
    expect(Object.isFrozen(r.snapshot.values.a)).toBe(true);
    expect(Object.isFrozen((r.snapshot.values.a as { list: number[] }).list)).toBe(true);
  });
});
