/**
 * Processes made ready ahead of an agent run's action (`prepare`, called while the model thinks)
 * and let go when the run ends (`endSession`), without giving up isolation: a prepared process
 * never ran an action and serves only the session it was prepared for.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ChildPool, type SandboxChild } from "../../src/sandbox/pool.ts";

const spec = { heapMb: 128, addressSpaceMb: null };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const pools: ChildPool[] = [];
function pool(warm: number, maxProcesses = 16): ChildPool {
  const p = new ChildPool(spec, warm, 4, maxProcesses);
  pools.push(p);
  return p;
}
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
});

/** Waits until `test` holds (the pool's upkeep runs a few ms after it is asked for). */
async function until(test: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !test(); i++) await sleep(5);
  expect(test()).toBe(true);
}

describe("prepare", () => {
  it("binds a fresh process to the session, which its first action gets; a replacement starts for new sessions", async () => {
    const p = pool(1);
    await until(() => p.size === 1);
    p.prepare("run-a");
    // The fresh one is now the session's; the upkeep starts the next fresh one.
    await until(() => p.size === 2);
    const a = await p.acquire(spec, { session: "run-a" });
    const b = await p.acquire(spec, { session: "run-b" });
    expect(a.session).toBe("run-a");
    expect(b).not.toBe(a); // never lent to another session
    expect(b.session).toBe("run-b");
    // run-a's process was started before its action asked for it: it was the warm one.
    expect(a.spawnedAt).toBeLessThan(b.spawnedAt);
    await Promise.all([a.ready, b.ready]);
    p.release(a);
    p.release(b);
  });

  it("with no fresh process idle, starts one for the session, which nothing else gets", async () => {
    const p = pool(0);
    p.prepare("run-a");
    await until(() => p.size === 1);
    const other = await p.acquire(spec, { session: "run-b" });
    expect(p.size).toBe(2); // run-b got a process of its own, not run-a's
    const a = await p.acquire(spec, { session: "run-a" });
    expect(a).not.toBe(other);
    expect(a.session).toBe("run-a");
    await Promise.all([a.ready, other.ready]);
    p.release(a);
    p.release(other);
  });

  it("does nothing for a session that has its process, at the cap, or while actions are queued", async () => {
    const p = pool(0, 1);
    const a = await p.acquire(spec, { session: "run-a" });
    await a.ready;
    p.release(a);
    p.prepare("run-a"); // it has its process
    p.prepare("run-b"); // at the cap (1)
    await sleep(50);
    expect(p.size).toBe(1);
    const again = await p.acquire(spec, { session: "run-a" });
    expect(again).toBe(a);
    const queued = p.acquire(spec, { session: "run-c" });
    p.prepare("run-d"); // run-c waits for the only process: it comes first
    await sleep(50);
    expect(p.size).toBe(1);
    p.release(again); // run-c gets a process once run-a's idle one makes room
    const c = await queued;
    expect(c).not.toBe(a);
    expect(c.session).toBe("run-c");
    await c.ready;
    p.release(c);
  });
});

describe("endSession", () => {
  it("retires the session's idle process; its next action gets a fresh one", async () => {
    const p = pool(0);
    const a = await p.acquire(spec, { session: "run-a" });
    await a.ready;
    p.release(a);
    p.endSession("run-a");
    await a.exited;
    expect(a.killedBy).toBe("retired");
    const next = await p.acquire(spec, { session: "run-a" });
    expect(next).not.toBe(a);
    await next.ready;
    p.release(next);
  });

  it("retires a busy process when its action ends, and leaves other sessions' processes alone", async () => {
    const p = pool(0);
    const [a, b] = await Promise.all([
      p.acquire(spec, { session: "run-a" }),
      p.acquire(spec, { session: "run-b" }),
    ]);
    await Promise.all([a.ready, b.ready]);
    p.endSession("run-a"); // while its action runs
    await sleep(30);
    expect(a.dead).toBe(false);
    p.release(a);
    p.release(b);
    await a.exited;
    const again: SandboxChild = await p.acquire(spec, { session: "run-b" });
    expect(again).toBe(b); // run-b keeps its process
    p.release(again);
  });
});
