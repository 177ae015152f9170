/**
 * Warm pool of locked-down sandbox child processes.
 *
 * Every in-flight action gets its own child: a parent agent's action that awaits a tool running a
 * child agent never needs the parent's (busy) process, so nested agents cannot deadlock the pool.
 * `warm` idle children are kept ready; more are spawned on demand and retired when idle. Idle
 * children are unref'd so an idle pool never keeps the host process alive.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import type { Readable, Writable } from "node:stream";
import { CodehopError, ErrorCodes } from "../errors.ts";

/** How a child is started (children are only reused for the same spec). */
export interface ChildSpec {
  heapMb: number;
  /** RLIMIT_AS in MB, or null for none. */
  addressSpaceMb: number | null;
}

/** Message from a child (already JSON-parsed; validated by the consumer). */
export type ChildMessage = { t: string; [key: string]: unknown };

// Real paths: the permission model compares the files the child opens with these.
const CHILD_ENTRY = realpathSync(fileURLToPath(new URL("./child.mjs", import.meta.url)));
const SES_PATH = realpathSync(createRequire(import.meta.url).resolve("ses"));
const PRLIMIT = ["/usr/bin/prlimit", "/bin/prlimit"].find((p) => existsSync(p)) ?? null;
const PERMISSION_FLAG = process.allowedNodeEnvironmentFlags.has("--permission")
  ? "--permission"
  : "--experimental-permission";
const CAN_DISABLE_WARNINGS = process.allowedNodeEnvironmentFlags.has("--disable-warning");
/** Largest single protocol line accepted from a child (guards host memory against a broken child). */
const MAX_LINE_CHARS = 64 * 1024 * 1024;
const STDERR_TAIL_CHARS = 4096;
/** After SIGKILL, how long to wait for Node's 'exit' event before checking the pid directly. */
const REAP_CHECK_AFTER_MS = 1_000;
/** A child that is not locked down and ready by then is killed (and run() rejects). */
const CHILD_START_TIMEOUT_MS = 20_000;

/** stderr of a child that could not even reserve its startup memory under RLIMIT_AS. */
const STARTUP_OOM = /Failed to reserve|Fatal process OOM|Cannot allocate memory|out of memory/i;
/** The address-space limit is raised at most to this multiple of the configured one. */
const MAX_ADDRESS_SPACE_FACTOR = 8;

/** Idle children kept after use unless configured otherwise (see ChildPool). */
export const DEFAULT_MAX_IDLE = 4;

/** True when an OS address-space limit can be applied (prlimit found). */
export const HAS_OS_MEMORY_LIMIT = PRLIMIT !== null;

/** One sandbox child process and its line protocol. */
export class SandboxChild {
  readonly spec: ChildSpec;
  readonly proc: ChildProcess;
  readonly spawnedAt = performance.now();
  /** Resolves when the child reported `ready` (rejects if it died first). */
  readonly ready: Promise<void>;
  /** Resolves with how the process ended. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readyAt: number | null = null;
  dead = false;
  /** Set when we killed it on purpose (timeout, grace expiry, close). */
  killedBy: string | null = null;
  stderrTail = "";
  /** Current consumer of messages (the running action); null when idle. */
  onMessage: ((msg: ChildMessage) => void) | null = null;
  /** Current consumer of the exit event (the running action); null when idle. */
  onExit: ((exit: { code: number | null; signal: NodeJS.Signals | null }) => void) | null = null;
  private resolveExit!: (exit: { code: number | null; signal: NodeJS.Signals | null }) => void;
  private reaper: NodeJS.Timeout | null = null;
  private readonly stdin: Writable;
  private readonly out: Readable;
  private buf = "";

  /**
   * @param spec how the child is identified for reuse
   * @param addressSpaceFactor multiplier for the address-space limit actually applied (the pool
   *   raises it when this machine's Node needs more address space just to start)
   */
  constructor(
    spec: ChildSpec,
    readonly addressSpaceFactor = 1,
  ) {
    this.spec = spec;
    const nodeArgs = [
      `--max-old-space-size=${spec.heapMb}`,
      PERMISSION_FLAG,
      `--allow-fs-read=${CHILD_ENTRY}`,
      `--allow-fs-read=${SES_PATH}`,
      "--allow-worker", // only for the orphan watchdog thread (see child.mjs)
      // (--disable-warning exists from Node 20.11; the warnings only reach our stderr buffer anyway)
      ...(CAN_DISABLE_WARNINGS
        ? ["--disable-warning=ExperimentalWarning", "--disable-warning=SecurityWarning"]
        : []),
      CHILD_ENTRY,
      SES_PATH,
    ];
    const [cmd, args] =
      spec.addressSpaceMb !== null && PRLIMIT
        ? [
            PRLIMIT,
            [
              `--as=${Math.round(spec.addressSpaceMb * addressSpaceFactor) * 1024 * 1024}`,
              process.execPath,
              ...nodeArgs,
            ],
          ]
        : [process.execPath, nodeArgs];
    this.proc = spawn(cmd, args, {
      // Empty environment: no secrets, no NODE_OPTIONS, no LOCKDOWN_* overrides reach the child.
      // One malloc arena: per-thread arenas reserve 64 MB of address space each, which would
      // count against RLIMIT_AS without being usable by the guest.
      env: { MALLOC_ARENA_MAX: "1" },
      stdio: ["pipe", "ignore", "pipe", "pipe"],
      detached: false,
    });
    this.stdin = this.proc.stdin as Writable;
    this.out = this.proc.stdio[3] as Readable;
    this.stdin.on("error", () => {}); // EPIPE after the child died is reported through `exit`
    this.out.setEncoding("utf8");
    this.proc.stderr!.setEncoding("utf8");
    this.proc.stderr!.on("data", (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL_CHARS);
    });
    this.exited = new Promise((resolve) => {
      this.resolveExit = (exit) => {
        if (this.dead) return;
        this.dead = true;
        if (this.reaper) clearInterval(this.reaper);
        resolve(exit);
      };
      this.proc.on("exit", (code, signal) => this.resolveExit({ code, signal }));
      this.proc.on("error", () => this.resolveExit({ code: null, signal: null }));
    });
    void this.exited.then((exit) => this.onExit?.(exit));
    this.ready = new Promise((resolve, reject) => {
      const onData = (chunk: string) => {
        this.buf += chunk;
        if (this.buf.length > MAX_LINE_CHARS && this.buf.indexOf("\n") < 0) {
          this.kill("protocol");
          return;
        }
        let nl: number;
        while ((nl = this.buf.indexOf("\n")) >= 0) {
          const line = this.buf.slice(0, nl);
          this.buf = this.buf.slice(nl + 1);
          let msg: ChildMessage;
          try {
            msg = JSON.parse(line);
          } catch {
            this.kill("protocol");
            return;
          }
          if (msg?.t === "ready" && this.readyAt === null) {
            this.readyAt = performance.now();
            resolve();
          } else this.onMessage?.(msg);
        }
      };
      this.out.on("data", onData);
      // A child that never reports ready (hung at startup) must not leave run() waiting forever.
      const startTimer = setTimeout(() => {
        if (this.readyAt === null) this.kill("start timeout");
      }, CHILD_START_TIMEOUT_MS);
      startTimer.unref();
      void this.exited.then(() => {
        clearTimeout(startTimer);
        if (this.readyAt === null) {
          reject(
            new CodehopError(
              ErrorCodes.SANDBOX_INTERNAL,
              `Sandbox process failed to start: ${this.stderrTail.trim().slice(-1000) || "no output"}`,
            ),
          );
        }
      });
    });
    this.ready.catch(() => {}); // observed by whoever awaits it
    this.setRef(false);
  }

  /** Writes one protocol message (ignored once dead). */
  send(msg: unknown): void {
    if (this.dead) return;
    this.stdin.write(JSON.stringify(msg) + "\n");
  }

  /** Keeps the host alive while an action runs; lets it exit while idle. */
  setRef(on: boolean): void {
    const items = [this.proc, this.stdin, this.out, this.proc.stderr] as unknown as {
      ref?(): void;
      unref?(): void;
    }[];
    for (const item of items) {
      if (on) item?.ref?.();
      else item?.unref?.();
    }
  }

  /** SIGKILL (idempotent); `reason` is kept for the result. */
  kill(reason: string): void {
    if (!this.killedBy) this.killedBy = reason;
    if (this.dead) return;
    this.proc.kill("SIGKILL");
    // Observed under load: the event loop can drain after SIGKILL before Node emits the child's
    // 'exit' (libuv drops the process handle from the loop first), so code awaiting the exit — a
    // run() reporting a timeout, close() under top-level await — ended with exit code 13. A ref'd
    // timer keeps the loop alive until the exit is seen, and settles it if the process is gone
    // without an event.
    if (!this.reaper) {
      const killedAt = performance.now();
      this.reaper = setInterval(() => {
        if (this.dead || performance.now() - killedAt < REAP_CHECK_AFTER_MS) return;
        try {
          process.kill(this.proc.pid!, 0);
        } catch {
          this.resolveExit({ code: null, signal: "SIGKILL" });
        }
      }, 20);
    }
  }
}

/** Pool of {@link SandboxChild} processes. */
export class ChildPool {
  private readonly idle: SandboxChild[] = [];
  private addressSpaceFactor = 1;
  private readonly all = new Set<SandboxChild>();
  /** Children whose action reported `done` but not yet `idle`, with the acquirer waiting for each. */
  private readonly finishing = new Map<
    SandboxChild,
    ((child: SandboxChild | null) => void) | null
  >();
  private closed = false;

  /**
   * @param warm idle children started ahead of time (and re-started after a kill)
   * @param maxIdle idle children kept after use — more than `warm`, so the processes a nested
   *   agent run needed are reused by its next step instead of being killed and spawned again
   */
  constructor(
    private readonly defaultSpec: ChildSpec,
    private readonly warm: number,
    private readonly maxIdle: number = Math.max(warm, DEFAULT_MAX_IDLE),
  ) {
    this.replenish();
  }

  private sameSpec(a: ChildSpec, b: ChildSpec): boolean {
    return a.heapMb === b.heapMb && a.addressSpaceMb === b.addressSpaceMb;
  }

  private spawnChild(spec: ChildSpec): SandboxChild {
    const child = new SandboxChild(spec, this.addressSpaceFactor);
    this.all.add(child);
    void child.exited.then(() => {
      this.all.delete(child);
      if (
        child.readyAt === null &&
        child.spec.addressSpaceMb !== null &&
        child.addressSpaceFactor === this.addressSpaceFactor && // count each failed level once
        STARTUP_OOM.test(child.stderrTail) &&
        this.addressSpaceFactor < MAX_ADDRESS_SPACE_FACTOR
      ) {
        // Node on this machine reserves more address space at startup than the limit allows (V8
        // builds differ): raise the limit for every later child rather than fail every action.
        this.addressSpaceFactor *= 2;
      }
      const waiter = this.finishing.get(child);
      this.finishing.delete(child);
      waiter?.(null);
      const i = this.idle.indexOf(child);
      if (i >= 0) this.idle.splice(i, 1);
      // Replace children that were healthy (killed at a deadline, crashed on guest input). One that
      // never started is not replaced here: that would respawn in a tight loop when startup is
      // broken; the next acquire() spawns again and reports the failure to its caller.
      if (child.readyAt !== null) this.replenish();
    });
    return child;
  }

  /** Tops the idle set up to `warm` children of the default spec. */
  replenish(): void {
    if (this.closed) return;
    let warmIdle = this.idle.filter((c) => this.sameSpec(c.spec, this.defaultSpec)).length;
    while (warmIdle < this.warm) {
      this.idle.push(this.spawnChild(this.defaultSpec));
      warmIdle++;
    }
  }

  /**
   * A child for `spec` that runs nothing else — never one that is busy with another action.
   * Order of preference: an idle child that is up; a child whose action just ended (it reports
   * idle within microseconds, or is killed within IDLE_GRACE_MS — so waiting cannot deadlock); an
   * idle child still starting; a new child.
   */
  async acquire(spec: ChildSpec): Promise<SandboxChild> {
    if (this.closed)
      throw new CodehopError(ErrorCodes.SANDBOX_INTERNAL, "The sandbox has been closed");
    let index = this.idle.findIndex(
      (c) => !c.dead && c.readyAt !== null && this.sameSpec(c.spec, spec),
    );
    if (index < 0) {
      for (const [c, waiter] of this.finishing) {
        if (waiter === null && this.sameSpec(c.spec, spec)) {
          const handed = await new Promise<SandboxChild | null>((resolve) =>
            this.finishing.set(c, resolve),
          );
          if (handed && !handed.dead && !this.closed) {
            handed.setRef(true);
            return handed;
          }
          return this.acquire(spec);
        }
      }
      index = this.idle.findIndex((c) => !c.dead && this.sameSpec(c.spec, spec));
    }
    const child = index >= 0 ? this.idle.splice(index, 1)[0] : this.spawnChild(spec);
    child.setRef(true);
    // No refill here: the child comes back on release, so sequential actions reuse one process.
    // Concurrent actions beyond the warm set pay a cold start; dead children are replaced on exit.
    return child;
  }

  /** The child's action ended; it will be released (or killed) shortly. */
  markFinishing(child: SandboxChild): void {
    if (!child.dead) this.finishing.set(child, null);
  }

  /** Returns a healthy child after its action (handed to a waiter, kept warm, or retired). */
  release(child: SandboxChild): void {
    child.onMessage = null;
    child.onExit = null;
    const waiter = this.finishing.get(child);
    this.finishing.delete(child);
    if (waiter && !child.dead) {
      waiter(child);
      return;
    }
    child.setRef(false);
    if (child.dead) return;
    const warmIdle = this.idle.filter((c) => this.sameSpec(c.spec, this.defaultSpec)).length;
    if (!this.closed && this.sameSpec(child.spec, this.defaultSpec) && warmIdle < this.maxIdle)
      this.idle.push(child);
    else child.kill("retired");
  }

  /** Kills every child and waits for them to exit. */
  async close(): Promise<void> {
    this.closed = true;
    const children = [...this.all];
    this.idle.length = 0;
    for (const c of children) {
      c.setRef(true); // so awaiting their exit keeps the event loop alive (e.g. top-level await)
      c.kill("closed");
    }
    await Promise.all(children.map((c) => c.exited));
  }

  /** Number of live child processes (for tests and benchmarks). */
  get size(): number {
    return this.all.size;
  }
}
