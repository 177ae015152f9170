/**
 * Processes started ahead of demand and off the host's event loop (issue 23), without giving up
 * isolation: the started-ahead pool grows with the rate of new agent runs and shrinks back, every
 * run still gets a process no other run used; children started by the launcher process are the
 * host's children in all but parentage (actions, deadlines, crashes) and die with the host.
 */
import { spawn, execSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  AUTO_LAUNCHER_AFTER,
  ChildPool,
  RUN_RATE_WINDOW_MS,
  type SandboxChild,
} from "../../src/sandbox/pool.ts";
import { CHILD_PROGRAM } from "../../src/sandbox/child-launch.ts";
import { createSandbox } from "../../src/sandbox/index.ts";
import { Launcher } from "../../src/sandbox/launcher.ts";

const spec = { heapMb: 128, addressSpaceMb: null };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const pools: ChildPool[] = [];
const sandboxes: ReturnType<typeof createSandbox>[] = [];
afterEach(async () => {
  await Promise.all([
    ...pools.splice(0).map((p) => p.close()),
    ...sandboxes.splice(0).map((s) => s.close()),
  ]);
});

/** Parent pid of `pid` (/proc), or 0 once it is gone. */
function parentOf(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")[1]);
  } catch {
    return 0;
  }
}

describe("started-ahead pool", () => {
  it("grows while new sessions take fresh processes quickly, never lends one to two sessions, and shrinks back", async () => {
    const p = new ChildPool(spec, 1, 4, 16, 4);
    pools.push(p);
    expect(p.aheadTarget()).toBe(1);
    const seen = new Set<SandboxChild>();
    for (let i = 0; i < 6; i++) {
      const c = await p.acquire(spec, { session: `run-${i}` });
      expect(seen.has(c)).toBe(false); // a process no run used
      expect(c.session).toBe(`run-${i}`);
      seen.add(c);
      await c.ready;
      p.release(c);
      p.endSession(`run-${i}`);
    }
    // Six runs within a few seconds, each start taking ~100 ms or more: more than one ahead.
    expect(p.aheadTarget()).toBeGreaterThan(1);
    expect(p.aheadTarget()).toBeLessThanOrEqual(4);
    for (let i = 0; i < 400 && p.size < 2; i++) await sleep(10);
    expect(p.size).toBeGreaterThan(1); // fresh ones started ahead (the ended runs' are retired)
    // Once runs stop coming for the window, the target is the configured size again.
    expect(p.aheadTarget(performance.now() + RUN_RATE_WINDOW_MS + 1)).toBe(1);
  }, 120_000);

  it("a pool without a ceiling above its size stays at its size", async () => {
    const p = new ChildPool(spec, 1, 4, 16);
    pools.push(p);
    for (let i = 0; i < 4; i++) {
      const c = await p.acquire(spec, { session: `run-${i}` });
      await c.ready;
      p.release(c);
    }
    expect(p.aheadTarget()).toBe(1);
  }, 120_000);
});

describe("launcher", () => {
  it("once it is up, children are started by it (not by the host) and serve actions, deadlines and crashes as before", async () => {
    const sb = createSandbox({ poolSize: 1, launcher: true });
    sandboxes.push(sb);
    // The first children may be spawned by the host while the launcher starts; a few runs later
    // every new one comes from the launcher.
    let launched = false;
    for (let i = 0; i < 40 && !launched; i++) {
      const r = await sb.run({
        code: `final_answer(await echo(${i}))`,
        tools: { echo: async (args) => args[0] },
        session: `run-${i}`,
      });
      expect(r.finalAnswer).toBe(i);
      sb.endSession(`run-${i}`);
      const pids = execSync(`pgrep -f ${CHILD_PROGRAM.entry} || true`)
        .toString()
        .trim()
        .split(/\s+/)
        .map(Number);
      launched = pids.some(
        (pid) => pid > 0 && parentOf(pid) !== process.pid && parentOf(pid) > 1 && isOurs(pid),
      );
    }
    expect(launched).toBe(true);
    const timeout = await sb.run({
      code: "while (true) {}",
      tools: {},
      limits: { timeoutMs: 500 },
    });
    expect(timeout.error?.name).toBe("TimeoutError");
    const oom = await sb.run({
      code: "const a = []; while (true) a.push(new Array(1e6).fill(1));",
      tools: {},
      limits: { timeoutMs: 60_000 },
    });
    expect(oom.error?.name).toBe("MemoryError");
    const after = await sb.run({ code: "final_answer(1 + 1)", tools: {} });
    expect(after.finalAnswer).toBe(2);
  }, 180_000);

  it('"auto" starts the first children itself and later ones through the launcher', async () => {
    const p = new ChildPool(spec, 0, 4, 16, 0, "auto");
    pools.push(p);
    const parents: number[] = [];
    for (
      let i = 0;
      i < 40 && !parents.slice(AUTO_LAUNCHER_AFTER).some((pp) => pp !== process.pid);
      i++
    ) {
      const c = await p.acquire(spec, { session: `run-${i}` });
      await c.ready;
      parents.push(parentOf(c.proc.pid!));
      const r = await new Promise<boolean>((resolve) => {
        c.onMessage = () => resolve(true);
        c.send({ t: "ping" } as never);
      });
      expect(r).toBe(true); // it answers the host as a child of the host would
      c.onMessage = null;
      p.release(c);
      p.endSession(`run-${i}`);
    }
    // A one-shot run's few processes are the host's own (no launcher start for them) ...
    expect(parents.slice(0, AUTO_LAUNCHER_AFTER)).toEqual(
      Array(AUTO_LAUNCHER_AFTER).fill(process.pid),
    );
    // ... and a host that keeps starting runs gets its later ones from the launcher.
    const launched = parents.slice(AUTO_LAUNCHER_AFTER).filter((pp) => pp !== process.pid);
    expect(launched.length).toBeGreaterThan(0);
    expect(launched.every((pp) => pp > 1)).toBe(true);
  }, 180_000);

  it("hands over every byte a launched child wrote before its pipes reached the host", async () => {
    const l = new Launcher();
    // Up: the first start goes direct and starts the launcher.
    const first = l.start(process.execPath, ["-e", "0"], {});
    await new Promise<void>((r) => first.onClose(() => r()));
    for (let i = 0; i < 200 && !l.isUp; i++) await sleep(20);
    expect(l.isUp).toBe(true);
    // The child writes at once, on fd 3 and stderr; the host is busy meanwhile, so the handles
    // (sent one at a time, each acknowledged by the host) reach it long after the bytes were written.
    const write = `require("fs").writeSync(3, "out-first\\n"); process.stderr.write("err-first\\n"); setTimeout(() => {}, 2000);`;
    const ports = [1, 2, 3].map(() => l.start(process.execPath, ["-e", write], {}));
    const busyUntil = Date.now() + 400;
    while (Date.now() < busyUntil); // a host whose event loop is busy (a large spawn, a big JSON)
    const got = await Promise.all(
      ports.map(
        (port) =>
          new Promise<string[]>((resolve) =>
            port.onStreams(({ out, stderr }) => {
              const text = ["", ""];
              out.on("data", (d) => (text[0] += d));
              stderr.on("data", (d) => (text[1] += d));
              const check = setInterval(() => {
                if (text[0].includes("\n") && text[1].includes("\n")) {
                  clearInterval(check);
                  resolve(text);
                }
              }, 10);
              setTimeout(() => (clearInterval(check), resolve(text)), 5_000);
            }),
          ),
      ),
    );
    for (const port of ports) port.kill();
    // This test's own launcher goes too (it would otherwise live as long as the test worker).
    (l as unknown as { proc: { kill(): void } | null }).proc?.kill();
    expect(got).toEqual(ports.map(() => ["out-first\n", "err-first\n"]));
  }, 60_000);

  it('rejects a launcher option that is not true, false or "auto"', () => {
    expect(() => createSandbox({ launcher: "yes" as never })).toThrow(/launcher must be/);
  });

  it("a launched child whose host died is killed even while guest code spins", async () => {
    const root = join(import.meta.dirname, "../..");
    // A host that waits for the launcher to start its children, starts an endless action on one
    // and is then SIGKILLed (no close(), no exit handlers).
    const host = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "--input-type=module",
        "-e",
        `import { createSandbox } from ${JSON.stringify(join(root, "src/sandbox/index.ts"))};
         import { launcher } from ${JSON.stringify(join(root, "src/sandbox/launcher.ts"))};
         const sb = createSandbox({ poolSize: 1, launcher: true });
         for (let i = 0; !launcher.isUp; i++) { await sb.run({ code: "1", tools: {}, session: "w" + i }); sb.endSession("w" + i); }
         await sb.run({ code: "1", tools: {}, session: "w" });
         void sb.run({ code: "while (true) {}", tools: {}, limits: { timeoutMs: 3600000 } });
         console.log("spinning");`,
      ],
      { cwd: root, stdio: ["ignore", "pipe", "inherit"] },
    );
    let descendants: number[] = [];
    try {
      await new Promise<void>((resolve, reject) => {
        host.stdout.on("data", (d: Buffer) => d.toString().includes("spinning") && resolve());
        host.on("exit", () => reject(new Error("host exited early")));
      });
      await sleep(500);
      // The host's grandchildren through the launcher (`node -e`): the sandbox children.
      const tree = execSync(`ps -eo pid=,ppid=,args=`).toString().split("\n");
      const childrenOf = (pid: number) =>
        tree
          .map((l) => l.trim().split(/\s+/))
          .filter((f) => Number(f[1]) === pid)
          .map((f) => Number(f[0]));
      const launchers = childrenOf(host.pid!);
      descendants = launchers.flatMap(childrenOf);
      expect(descendants.length).toBeGreaterThan(0);
    } finally {
      host.kill("SIGKILL");
    }
    const alive = () => descendants.filter(running);
    const t0 = performance.now();
    while (alive().length > 0 && performance.now() - t0 < 10_000) await sleep(100);
    const survivors = alive();
    for (const pid of survivors) process.kill(pid, "SIGKILL"); // no orphan behind a failure
    expect(survivors).toEqual([]);
  }, 180_000);
});

/** Whether `pid` runs (not gone, not a zombie waiting to be reaped). */
function running(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1][0] !== "Z";
  } catch {
    return false;
  }
}

/** Whether `pid`'s parent is a launcher of this test process (its parent is us). */
function isOurs(pid: number): boolean {
  return parentOf(parentOf(pid)) === process.pid;
}
