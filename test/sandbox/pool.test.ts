/** The child-process pool on its own: startup failure, reuse, no respawn loops. */
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  lstatSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  ChildPool,
  HAS_OS_MEMORY_LIMIT,
  SandboxChild,
  sesCodeCaches,
} from "../../src/sandbox/pool.ts";
import { CodehopError } from "../../src/errors.ts";
import { CHILD_PROGRAM } from "../../src/sandbox/child-launch.ts";

describe.runIf(HAS_OS_MEMORY_LIMIT)("startup failure", () => {
  // Node aborts at startup within a 200 MB address space: a stand-in for any broken startup.
  const broken = { heapMb: 64, addressSpaceMb: 200 };

  it("a child that cannot start rejects `ready` with SANDBOX_INTERNAL", async () => {
    const child = new SandboxChild(broken);
    const err = await child.ready.catch((e: unknown) => e);
    child.kill("test");
    expect(CodehopError.isInstance(err)).toBe(true);
    expect((err as CodehopError).code).toBe("CODEHOP_SANDBOX_INTERNAL");
    expect((err as Error).message).toMatch(/failed to start/);
  });

  it("the pool does not respawn a child that never started (no tight respawn loop)", async () => {
    const pool = new ChildPool(broken, 2);
    try {
      await new Promise((r) => setTimeout(r, 1_500));
      expect(pool.size).toBe(0);
    } finally {
      await pool.close();
    }
  });
});

describe.runIf(HAS_OS_MEMORY_LIMIT)("address-space limit too small for this machine's Node", () => {
  it("the pool raises the limit for later children instead of failing forever", async () => {
    const spec = { heapMb: 64, addressSpaceMb: 200 }; // 200 MB: Node cannot start; 800 MB: it can
    const pool = new ChildPool(spec, 0);
    try {
      let started: SandboxChild | null = null;
      for (let attempt = 0; attempt < 4 && !started; attempt++) {
        const child = await pool.acquire(spec);
        try {
          await child.ready;
          started = child;
        } catch {
          child.kill("test");
          await child.exited;
        }
      }
      expect(started).not.toBeNull();
      expect(started!.addressSpaceFactor).toBeGreaterThan(1);
    } finally {
      await pool.close();
    }
  });
});

describe("reuse", () => {
  it("sequential acquires of one session reuse one warm process", async () => {
    const pool = new ChildPool({ heapMb: 128, addressSpaceMb: null }, 1);
    try {
      const a = await pool.acquire({ heapMb: 128, addressSpaceMb: null });
      await a.ready;
      pool.release(a);
      const b = await pool.acquire({ heapMb: 128, addressSpaceMb: null });
      expect(b).toBe(a);
      pool.release(b);
      // The session's process, and a fresh one started for the next session when `a` got bound.
      expect(pool.size).toBe(2);
    } finally {
      await pool.close();
    }
    expect(pool.size).toBe(0);
  });

  it("processes used by concurrent actions are kept idle up to maxIdle, then retired", async () => {
    const spec = { heapMb: 128, addressSpaceMb: null };
    const pool = new ChildPool(spec, 1, 2);
    try {
      const children = await Promise.all([
        pool.acquire(spec),
        pool.acquire(spec),
        pool.acquire(spec),
      ]);
      expect(new Set(children).size).toBe(3); // never shared while busy
      await Promise.all(children.map((c) => c.ready));
      for (const c of children) pool.release(c);
      // One is over maxIdle: the least recently used is retired.
      const retired = await Promise.race(children.map((c) => c.exited.then(() => c)));
      expect(retired).toBe(children[0]);
      // Two kept for their session, plus the fresh one kept warm for a new session.
      expect(pool.size).toBe(3);
      const again = await Promise.all([pool.acquire(spec), pool.acquire(spec)]);
      expect(again.every((c) => children.includes(c))).toBe(true); // reused, not respawned
      for (const c of again) pool.release(c);
    } finally {
      await pool.close();
    }
  });

  it("a process that served one session is never lent to another; a new session gets a fresh one", async () => {
    const spec = { heapMb: 128, addressSpaceMb: null };
    const pool = new ChildPool(spec, 1, 4, 2);
    try {
      const a = await pool.acquire(spec, { session: "run-a" });
      await a.ready;
      pool.release(a);
      const b = await pool.acquire(spec, { session: "run-b" });
      expect(b).not.toBe(a);
      expect(b.session).toBe("run-b");
      await b.ready;
      pool.release(b);
      // At the cap (2), run-c's process is made by retiring an idle one of another session.
      const c = await pool.acquire(spec, { session: "run-c" });
      expect([a, b]).not.toContain(c);
      expect(pool.size).toBeLessThanOrEqual(2);
      await c.ready;
      pool.release(c);
      const again = await pool.acquire(spec, { session: "run-c" });
      expect(again).toBe(c);
      pool.release(again);
    } finally {
      await pool.close();
    }
  });

  it("a single-use process is retired after its action and never serves another", async () => {
    const spec = { heapMb: 128, addressSpaceMb: null };
    const pool = new ChildPool(spec, 1);
    try {
      const a = await pool.acquire(spec, { session: "one-off", singleUse: true });
      await a.ready;
      pool.release(a);
      await a.exited;
      const b = await pool.acquire(spec, { session: "one-off" });
      expect(b).not.toBe(a);
      pool.release(b);
    } finally {
      await pool.close();
    }
  });

  it("a different heap limit gets its own process, retired after use", async () => {
    const pool = new ChildPool({ heapMb: 128, addressSpaceMb: null }, 1);
    try {
      const other = await pool.acquire({ heapMb: 64, addressSpaceMb: null });
      await other.ready;
      expect(pool.size).toBe(2);
      pool.release(other);
      await other.exited;
      expect(pool.size).toBe(1);
    } finally {
      await pool.close();
    }
  });
});

describe("SES code cache", () => {
  // Every test here keeps its caches in a temporary directory of its own (TMPDIR), never in the
  // user's shared one, which other test runs of this user use at the same time.
  let saved: { tmp: string | undefined; dir: string | null | undefined } | undefined;
  let root = "";
  beforeEach(() => {
    saved = { tmp: process.env.TMPDIR, dir: sesCodeCaches.dir };
    root = mkdtempSync(join(tmpdir(), "codehop-cache-test-"));
    process.env.TMPDIR = root;
    sesCodeCaches.dir = undefined;
    sesCodeCaches.files.clear();
    sesCodeCaches.making.clear();
    sesCodeCaches.failures.clear();
  });
  afterEach(() => {
    if (saved!.tmp === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved!.tmp;
    sesCodeCaches.dir = saved!.dir;
    sesCodeCaches.files.clear();
    sesCodeCaches.making.clear();
    sesCodeCaches.failures.clear();
    rmSync(root, { recursive: true, force: true });
  });

  /** Starts a child of `spec`, waits until it is ready (or failed), kills it; returns it. */
  async function started(spec: { heapMb: number; addressSpaceMb: null; entry?: string }) {
    const child = new SandboxChild(spec);
    const failure = await child.ready.then(
      () => null,
      (e: unknown) => e,
    );
    child.kill("test");
    await child.exited;
    return { child, failure };
  }

  it("the first child of a heap size sends its SES code cache before ready; later ones load SES with it", async () => {
    const spec = { heapMb: 136, addressSpaceMb: null };
    expect(sesCodeCaches.fileFor(spec)).toBeUndefined();
    const first = await started(spec);
    expect(first.failure).toBeNull();
    expect(first.child.makesCodeCache).toBe(true);
    expect(first.child.codeCache).toBe("none");
    const file = sesCodeCaches.fileFor(spec)!;
    expect(file).toMatch(/codehop-sandbox-\d+\/ses-[0-9a-f]{24}-136\.cache$/);
    // Only this user can open the directory, or write the file.
    expect(statSync(dirname(file)).mode & 0o777).toBe(0o700);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const later = await Promise.all([started(spec), started(spec)]);
    for (const { child, failure } of later) {
      expect(failure).toBeNull();
      expect(child.makesCodeCache).toBe(false);
      expect(child.codeCache).toBe("used"); // V8 accepted it
      expect(child.proc.spawnargs).toContain(`--allow-fs-read=${file}`);
      expect(child.proc.spawnargs.some((a) => a.startsWith("--allow-fs-write"))).toBe(false);
    }
    // A cached child runs actions like any other.
    const pool = new ChildPool(spec, 0);
    try {
      const { runAction } = await import("../../src/sandbox/session.ts");
      const { DEFAULT_CAPABILITIES, DEFAULT_LIMITS } = await import("../../src/sandbox/limits.ts");
      const r = await runAction(
        pool,
        spec,
        { code: "const x = [1, 2].map((n) => n * 2);\nfinal_answer(harden({ x }))", tools: {} },
        { ...DEFAULT_LIMITS, maxHeapMb: 136 },
        DEFAULT_CAPABILITIES,
      );
      expect(r.error).toBeNull();
      expect(r.finalAnswer).toEqual({ x: [2, 4] });
    } finally {
      await pool.close();
    }
  });

  it("a cache V8 cannot use (other bytes, other flags) is ignored: the child compiles SES from source", async () => {
    const spec = { heapMb: 140, addressSpaceMb: null };
    const dir = mkdtempSync(join(root, "elsewhere-"));
    try {
      const garbage = join(dir, "garbage.cache");
      writeFileSync(garbage, Buffer.alloc(4096, 7), { mode: 0o600 });
      sesCodeCaches.files.set(spec.heapMb, garbage);
      const a = await started(spec);
      expect(a.failure).toBeNull();
      expect(a.child.codeCache).toBe("rejected");
      // The cache of another heap size: V8's flag check refuses it.
      await started({ heapMb: 144, addressSpaceMb: null });
      const other = join(dir, "heap-144.cache");
      copyFileSync(sesCodeCaches.fileFor({ heapMb: 144, addressSpaceMb: null })!, other);
      sesCodeCaches.files.set(spec.heapMb, other);
      const b = await started(spec);
      expect(b.failure).toBeNull();
      expect(b.child.codeCache).toBe("rejected");
      // A refused cache is dropped: the next child makes a new one (and does not delete files
      // that are not the cache of its own heap size).
      expect(sesCodeCaches.fileFor(spec)).toBeUndefined();
      expect(existsSync(other)).toBe(true);
      expect(existsSync(sesCodeCaches.fileFor({ heapMb: 144, addressSpaceMb: null })!)).toBe(true);
    } finally {
      sesCodeCaches.files.delete(spec.heapMb);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.runIf(typeof process.getuid === "function")(
    "a cache directory another user could write to (or a symlink) is not used",
    () => {
      const dir = join(root, `codehop-sandbox-${process.getuid!()}`);
      const spec = { heapMb: 152, addressSpaceMb: null };
      mkdirSync(dir);
      chmodSync(dir, 0o777);
      expect(sesCodeCaches.path(spec)).toBeNull();
      expect(sesCodeCaches.begin(spec)).toBe(false); // no child is asked to make one
      rmSync(dir, { recursive: true });
      symlinkSync(mkdtempSync(join(root, "elsewhere-")), dir);
      expect(sesCodeCaches.path(spec)).toBeNull();
      rmSync(dir);
      expect(sesCodeCaches.path(spec)).toMatch(/codehop-sandbox-\d+\/ses-[0-9a-f]{24}-152\.cache$/);
      expect(statSync(dir).mode & 0o777).toBe(0o700);
    },
  );

  it.runIf(typeof process.getuid === "function")(
    "the directory and the file are checked at every use: a cache that became unsafe after first use is not given to a child",
    async () => {
      const spec = { heapMb: 156, addressSpaceMb: null };
      const file = sesCodeCaches.path(spec)!;
      const dir = dirname(file);
      // A cache of ours, in use.
      expect(sesCodeCaches.begin(spec)).toBe(true);
      expect(sesCodeCaches.store(spec, Buffer.from("bytecode").toString("base64"))).toBe(true);
      expect(sesCodeCaches.fileFor(spec)).toBe(file);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      // The temp directory's cleaning removed it, and someone re-created it open to all, with a
      // cache at the predictable name.
      rmSync(dir, { recursive: true });
      mkdirSync(dir);
      chmodSync(dir, 0o777);
      writeFileSync(file, "planted", { mode: 0o600 });
      expect(sesCodeCaches.fileFor(spec)).toBeUndefined();
      expect(sesCodeCaches.begin(spec)).toBe(false);
      expect(sesCodeCaches.store(spec, Buffer.from("x").toString("base64"))).toBe(false);
      // The child starts without it (the spawn itself never fails over a cache).
      const { child, failure } = await started(spec);
      expect(failure).toBeNull();
      expect(child.codeCache).toBe("none");
      expect(child.makesCodeCache).toBe(false);
      expect(child.proc.spawnargs.some((a) => a.includes(file))).toBe(false);
      // A directory closed again, but a file others may write, or a symlink: not used either.
      chmodSync(dir, 0o700);
      chmodSync(file, 0o666);
      expect(sesCodeCaches.fileFor(spec)).toBeUndefined();
      rmSync(file);
      const target = join(dir, "target");
      writeFileSync(target, "bytecode", { mode: 0o600 });
      symlinkSync(target, file);
      expect(sesCodeCaches.fileFor(spec)).toBeUndefined();
      // A regular file of ours, closed to others: used.
      rmSync(file);
      writeFileSync(file, "bytecode", { mode: 0o600 });
      expect(sesCodeCaches.fileFor(spec)).toBe(file);
    },
  );

  it("a cache is stored under an unpredictable name, never through a symlink planted at the old one", () => {
    const spec = { heapMb: 160, addressSpaceMb: null };
    const file = sesCodeCaches.path(spec)!;
    const victim = join(root, "victim");
    writeFileSync(victim, "precious", { mode: 0o600 });
    symlinkSync(victim, `${file}.${process.pid}.partial`);
    expect(sesCodeCaches.begin(spec)).toBe(true);
    expect(sesCodeCaches.store(spec, Buffer.from("bytecode").toString("base64"))).toBe(true);
    expect(readFileSync(victim, "utf8")).toBe("precious");
    expect(lstatSync(file).isFile()).toBe(true);
    expect(readFileSync(file, "utf8")).toBe("bytecode");
    // No partial file is left behind, whether the store worked or not.
    const left = () => readdirSync(dirname(file)).filter((f) => f.endsWith(".partial"));
    expect(left()).toEqual([`${basename(file)}.${process.pid}.partial`]);
    chmodSync(dirname(file), 0o770); // no longer private: nothing is written
    expect(sesCodeCaches.store(spec, Buffer.from("other").toString("base64"))).toBe(false);
    chmodSync(dirname(file), 0o700);
    expect(readFileSync(file, "utf8")).toBe("bytecode");
    expect(left()).toHaveLength(1);
  });

  it("a cache made for a SES file replaced since is not used (the key follows the SES file)", () => {
    const spec = { heapMb: 164, addressSpaceMb: null };
    const file = sesCodeCaches.path(spec)!;
    writeFileSync(file, "bytecode", { mode: 0o600 });
    expect(sesCodeCaches.fileFor(spec)).toBe(file);
    sesCodeCaches.sesStamp = "another SES file"; // as when its size, mtime or inode changed
    sesCodeCaches.key = "0".repeat(24);
    sesCodeCaches.files.set(spec.heapMb, join(dirname(file), `ses-${"0".repeat(24)}-164.cache`));
    writeFileSync(sesCodeCaches.files.get(spec.heapMb)!, "stale", { mode: 0o600 });
    expect(sesCodeCaches.fileFor(spec)).toBe(file); // the hash recomputed from the file's bytes
  });

  it("a child that sends a code cache it was not asked for is stopped, and nothing is stored", async () => {
    const spec = {
      heapMb: 148,
      addressSpaceMb: null,
      entry: fileURLToPath(new URL("../fixtures/sandbox/cache-sending-child.mjs", import.meta.url)),
    };
    const { child, failure } = await started(spec);
    expect(child.makesCodeCache).toBe(false);
    expect(child.killedBy).toBe("protocol");
    expect((failure as Error).message).toMatch(/failed to start/);
    expect(sesCodeCaches.files.has(148)).toBe(false);
  });

  it("a child that sends a code cache after it is ready is stopped, and nothing is stored", async () => {
    const spec = {
      heapMb: 148,
      addressSpaceMb: null,
      entry: fileURLToPath(
        new URL("../fixtures/sandbox/late-cache-sending-child.mjs", import.meta.url),
      ),
    };
    const child = new SandboxChild(spec);
    try {
      await child.ready;
      await Promise.race([child.exited, new Promise((r) => setTimeout(r, 10_000))]);
      expect(child.killedBy).toBe("protocol");
      expect(sesCodeCaches.files.has(148)).toBe(false);
    } finally {
      child.kill("test");
    }
  });
});

// Starts a tsx host and watches its child's CPU time: slow on a loaded machine.
describe("orphans", { timeout: 180_000 }, () => {
  it("a child whose host died kills itself even while guest code spins", async () => {
    const { spawn, execSync } = await import("node:child_process");
    const { readFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const root = join(import.meta.dirname, "../..");
    // A host that starts an endless action and is then SIGKILLed (no close(), no exit handlers).
    const host = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "--input-type=module",
        "-e",
        `import { createSandbox } from ${JSON.stringify(join(root, "src/sandbox/index.ts"))};
         const sb = createSandbox({ poolSize: 1 });
         void sb.run({ code: "while (true) {}", tools: {}, limits: { timeoutMs: 3600000 } });`,
      ],
      { cwd: root, stdio: "ignore" },
    );
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const cpuTicks = (pid: number) => {
      try {
        return Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")[11]);
      } catch {
        return 0; // gone
      }
    };
    let childPid = 0;
    try {
      // Wait for the child running the action to exist and to be spinning (its CPU time grows).
      // The host also keeps a fresh idle child warm: the spinning one is the one to watch.
      const children = () =>
        execSync(`ps -o pid=,args= --ppid ${host.pid} || true`)
          .toString()
          .split("\n")
          .filter((l) => l.includes(CHILD_PROGRAM.entry))
          .map((l) => Number(l.trim().split(/\s+/)[0]));
      for (let i = 0; i < 150 && children().length === 0; i++) await sleep(100);
      expect(children().length).toBeGreaterThan(0);
      let spinning = false;
      for (let i = 0; i < 100 && !spinning; i++) {
        const pids = children();
        const before = pids.map(cpuTicks);
        await sleep(300);
        // >= 30 ms of CPU in 300 ms: a spinning child at load 20 on 2 cores gets about that much
        // (an idle one none; one still starting may count too: its death is what is checked).
        const busy = pids.findIndex((pid, k) => cpuTicks(pid) - before[k] >= 3);
        if (busy >= 0) {
          childPid = pids[busy];
          spinning = true;
        }
      }
      expect(spinning).toBe(true);
    } finally {
      host.kill("SIGKILL");
    }
    const alive = () => {
      try {
        process.kill(childPid, 0);
        return true;
      } catch {
        return false;
      }
    };
    const t0 = performance.now();
    while (alive() && performance.now() - t0 < 5_000) await sleep(100);
    const survived = alive();
    if (survived) process.kill(childPid, "SIGKILL"); // don't leave a spinning orphan behind a failure
    expect(survived).toBe(false);
  });
});
