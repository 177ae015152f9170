/**
 * The pool's queue and nesting rule on their own, with explicit action scopes (no guest code):
 * which acquire waits, which gets an extra process, and what happens to a process beyond the cap.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  AcquireRefused,
  ChildPool,
  type ActionScope,
  type SandboxChild,
} from "../../src/sandbox/pool.ts";
import { MAX_NESTING_EXTRA_PROCESSES } from "../../src/sandbox/limits.ts";

const spec = { heapMb: 128, addressSpaceMb: null };
const top = (): ActionScope => ({ parent: null, depth: 0 });
const under = (parent: ActionScope): ActionScope => ({ parent, depth: parent.depth + 1 });
const tick = () => new Promise((r) => setTimeout(r, 20));

/** Settles to the child, or "pending" if the acquire is still waiting after a short while. */
async function state(p: Promise<SandboxChild>): Promise<SandboxChild | "pending"> {
  return Promise.race([p, tick().then(() => "pending" as const)]);
}

const pools: ChildPool[] = [];
function pool(maxProcesses: number): ChildPool {
  const p = new ChildPool(spec, 0, 4, maxProcesses);
  pools.push(p);
  return p;
}
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
});

describe("ChildPool queue at the cap", () => {
  it("an unrelated action waits for a process; a nested one of the holder gets an extra at once", async () => {
    const p = pool(1);
    const t = top();
    const a = await p.acquire(spec, { scope: t });
    const unrelated = p.acquire(spec, { scope: top() });
    expect(await state(unrelated)).toBe("pending");
    expect(p.size).toBe(1);
    // The holder now waits (through a tool call) for its own nested action: that is a deadlock.
    const nested = await p.acquire(spec, { scope: under(t) });
    expect(nested).not.toBe(a);
    expect(p.size).toBe(2);
    expect(p.queued).toBe(1); // the unrelated action still waits
    // The nested action ends: beyond the cap and not needed for a deadlock, its process is killed
    // rather than handed to the unrelated action (which would be one more process at work).
    await nested.ready;
    p.release(nested);
    await nested.exited;
    expect(p.size).toBe(1);
    expect(await state(unrelated)).toBe("pending");
    // The holder ends: its process goes to the queue.
    await a.ready;
    p.release(a);
    expect(await unrelated).toBe(a);
  });

  it("the queue serves the deepest action first, then first come", async () => {
    const p = pool(1);
    const t = top();
    const holder = await p.acquire(spec, { scope: t });
    const order: string[] = [];
    const first = p.acquire(spec, { scope: top() }).then((c) => (order.push("top"), c));
    // Unrelated to the holder (its parent holds nothing here), so no deadlock: it just queues.
    const deep = p
      .acquire(spec, { scope: under(under(top())) })
      .then((c) => (order.push("deep"), c));
    await tick();
    expect(p.queued).toBe(2);
    await holder.ready;
    p.release(holder);
    const c = await deep;
    p.release(c);
    await first;
    expect(order).toEqual(["deep", "top"]);
  });

  it(`a chain nested deeper than ${MAX_NESTING_EXTRA_PROCESSES} extras is refused with AcquireRefused "nesting"`, async () => {
    const p = pool(1);
    let scope = top();
    await p.acquire(spec, { scope });
    for (let i = 0; i < MAX_NESTING_EXTRA_PROCESSES; i++) {
      scope = under(scope);
      await p.acquire(spec, { scope });
    }
    expect(p.size).toBe(1 + MAX_NESTING_EXTRA_PROCESSES);
    const err = await p.acquire(spec, { scope: under(scope) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AcquireRefused);
    expect((err as AcquireRefused).reason).toBe("nesting");
    expect(p.queued).toBe(0);
  });

  it("an abort signal takes a waiting action out of the queue", async () => {
    const p = pool(1);
    await p.acquire(spec, { scope: top() });
    const controller = new AbortController();
    const waiting = p.acquire(spec, { scope: top(), signal: controller.signal });
    await tick();
    expect(p.queued).toBe(1);
    controller.abort();
    const err = await waiting.catch((e: unknown) => e);
    expect((err as AcquireRefused).reason).toBe("aborted");
    expect(p.queued).toBe(0);
  });
});
