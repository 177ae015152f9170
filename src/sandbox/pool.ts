/**
 * Warm pool of locked-down sandbox child processes.
 *
 * Every in-flight action gets its own child: a parent agent's action that awaits a tool running a
 * child agent never needs the parent's (busy) process. The number of children is capped; queued
 * actions wait, and a nesting deadlock at the cap is broken by a bounded number of extra children
 * (see ChildPool). `warm` idle children are kept ready; more are spawned on demand and retired when
 * idle. Idle children are unref'd so an idle pool never keeps the host process alive.
 *
 * This file is the scheduling: which process serves which action, the cap, the queue, nesting. How a
 * process starts is child-launch.ts (and code-cache.ts), one process's life child-process.ts, the
 * start-up exchange with it child-protocol.ts.
 *
 * Why this file is long: one scheduler whose state (idle, busy, finishing, the queue, sessions,
 * nesting extras, the started-ahead pool's rate) every method reads and changes together.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { availableParallelism } from "node:os";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { DEFAULT_MAX_PROCESSES, MAX_NESTING_EXTRA_PROCESSES } from "./limits.ts";
import { MAX_ADDRESS_SPACE_FACTOR, STARTUP_OOM, type ChildSpec } from "./child-launch.ts";
import { SandboxChild } from "./child-process.ts";

// The process side, as the pool's tests reach it.
export { HAS_OS_MEMORY_LIMIT, type ChildSpec } from "./child-launch.ts";
export { SandboxChild } from "./child-process.ts";
export type { ChildMessage } from "./child-protocol.ts";
export { sesCodeCaches } from "./code-cache.ts";

/**
 * Delay of the pool's upkeep (replacement spawns, prepared sessions' processes, killing ended
 * sessions' idle ones): long enough for the caller's model request to be on its way first.
 */
const UPKEEP_DELAY_MS = 5;

/** Idle children kept after use unless configured otherwise (see ChildPool). */
export const DEFAULT_MAX_IDLE = 4;

/**
 * Ceiling of the started-ahead pool of a sandbox (createSandbox's `maxPoolSize` default): runs that
 * start one after another grow the fresh pool up to this many (~50 MB RSS each while idle).
 */
export const DEFAULT_MAX_POOL_SIZE = 6;

/**
 * Fresh processes taken by new sessions within this window set the started-ahead pool's size; when
 * none was taken for this long, the pool shrinks back to its configured size.
 */
export const RUN_RATE_WINDOW_MS = 15_000;

/**
 * With `launcher: "auto"`, children are started through the launcher once the pool has started
 * this many directly: a host that keeps starting agent runs (a worker, a server, an eval, a chat
 * session) stops pausing its event loop in `spawn()` for each, while a one-shot run (the pool's
 * first processes, a few sub-agents) does not pay the launcher's own Node start (~50 ms of CPU).
 */
export const AUTO_LAUNCHER_AFTER = 6;

/** Spawn -> ready time assumed before the first child of a pool is up (ms). */
const INITIAL_START_MS = 150;

/**
 * Children of the started-ahead pool (beyond the configured size) starting at once: each boot takes
 * about a core for its ~70 ms; more at once only slow each other and the host down.
 */
const MAX_AHEAD_STARTING = Math.max(2, availableParallelism());

/**
 * The action a piece of host code runs on behalf of: set (AsyncLocalStorage) around every tool call,
 * so an action started from inside a tool call — a sub-agent's step — knows which action waits for
 * it. The pool uses the chain to tell a nesting deadlock from a pool that is merely busy.
 */
export interface ActionScope {
  /** The action whose tool call started this one (any sandbox), or null for a top-level action. */
  readonly parent: ActionScope | null;
  /** Nesting depth: 0 for a top-level action. */
  readonly depth: number;
}

/** The scope of the action whose tool call is running (undefined outside tool calls). */
export const currentActionScope = new AsyncLocalStorage<ActionScope>();

/** A new scope for an action started here (child of the calling action's scope, if any). */
export function newActionScope(): ActionScope {
  const parent = currentActionScope.getStore() ?? null;
  return { parent, depth: parent ? parent.depth + 1 : 0 };
}

function isAncestor(holder: ActionScope, of: ActionScope): boolean {
  for (let s = of.parent; s; s = s.parent) if (s === holder) return true;
  return false;
}

/** Why {@link ChildPool.acquire} gave no process (the action reports it; nothing crashed). */
export class AcquireRefused extends Error {
  constructor(
    readonly reason: "aborted" | "nesting",
    message: string,
  ) {
    super(message);
    this.name = "AcquireRefused";
  }
}

/** What an action needs from the pool: a process of this spec serving this session. */
interface Need {
  spec: ChildSpec;
  session: string;
  singleUse: boolean;
}

interface Waiter {
  need: Need;
  scope: ActionScope;
  resolve(child: SandboxChild): void;
  reject(err: Error): void;
}

/** Options of {@link ChildPool.acquire}. */
export interface AcquireOptions {
  /** The acquiring action (default: a new top-level scope). */
  scope?: ActionScope;
  /** Gives up waiting for a process (rejects with {@link AcquireRefused} "aborted"). */
  signal?: AbortSignal;
  /**
   * The session (agent run) the action belongs to: it gets a process that served this session
   * before, or one that never ran an action — never one that served another session. Default "":
   * one anonymous session shared by every caller that gives none.
   */
  session?: string;
  /** The process is retired after this action instead of being kept for the session. */
  singleUse?: boolean;
}

/**
 * Pool of {@link SandboxChild} processes, at most `maxProcesses` alive at once (idle, busy, finishing
 * or dying). An action that finds none free waits in a queue served deepest nesting first, then
 * first come.
 *
 * Nested agents make a plain cap deadlock: a parent action keeps its process while it awaits a tool
 * call that runs a sub-agent, whose action needs a process of its own. The pool knows which action
 * started which (see {@link ActionScope}); when every process is held by an action that is an
 * ancestor of a queued action — so no process can ever come free — the deepest queued action gets
 * an extra process (up to MAX_NESTING_EXTRA_PROCESSES extras; beyond them it is refused with
 * {@link AcquireRefused} "nesting"). Deepest first, both in the queue and for extras: nested work
 * already under way finishes and frees its holders before new siblings start and wait in turn. A
 * child beyond the cap is only ever lent to break a deadlock (else it is killed when its action
 * ends), so each new extra goes deeper than every action an extra holds: the pool stays within
 * `maxProcesses` + the nesting depth, however wide the fan-out.
 *
 * Sessions: a child is bound to the session (agent run) of the first action it runs and is lent
 * only to that session's actions afterwards, so nothing one agent run leaves in a process (patched
 * lazily created prototypes, a grown Symbol.for registry, values it kept) is ever seen by another.
 * `warm` children that never ran anything are kept ready for new sessions (topped up when one is
 * bound); up to `maxIdle` bound children wait idle for their session's next action, the least
 * recently used retired first.
 */
export class ChildPool {
  private readonly idle: SandboxChild[] = [];
  private addressSpaceFactor = 1;
  private readonly all = new Set<SandboxChild>();
  /** Children lent to an action that has not finished, with that action's scope. */
  private readonly busy = new Map<SandboxChild, ActionScope>();
  /** Children whose action reported `done` but not yet `idle`, with the acquirer waiting for each. */
  private readonly finishing = new Map<
    SandboxChild,
    ((child: SandboxChild | null) => void) | null
  >();
  private readonly waiters: Waiter[] = [];
  private closed = false;
  /** Sessions prepare() found no fresh process for: one is started for each by the next upkeep. */
  private readonly preparing = new Set<string>();
  /** Idle processes of ended sessions, killed by the next upkeep. */
  private readonly ending: SandboxChild[] = [];
  /** The pending upkeep timer (see {@link ChildPool.scheduleUpkeep}). */
  private upkeep: NodeJS.Timeout | null = null;
  /** Most children alive at once since the pool was created (tests and benchmarks). */
  peakSize = 0;
  /** Children started so far (`launcher: "auto"` counts them). */
  private spawned = 0;
  /** Actions that waited for their process (queued, starting, or the pool spawning) 1 ms or more. */
  waits = 0;
  /** Total wall time those actions waited, in ms (see {@link ChildPool.noteWait}). */
  waitMs = 0;
  /** When fresh children were last bound to new sessions (the newest last; see aheadTarget). */
  private readonly takes: number[] = [];
  /** Moving average of a child's spawn -> ready time, in ms (see aheadTarget). */
  private startMs = INITIAL_START_MS;
  /** Shrinks the started-ahead pool once runs stopped coming (see noteTake). */
  private rateTimer: NodeJS.Timeout | null = null;

  /**
   * @param warm idle children that never ran an action, started ahead of time for new sessions
   *   (and re-started after a kill or when one gets bound to a session)
   * @param maxIdle idle children kept after use for their session's next action (the processes a
   *   nested agent run needed are reused by its next step instead of being killed and spawned again)
   * @param maxProcesses children alive at once (at least `warm`); see the class comment for nesting
   * @param maxWarm ceiling of the started-ahead pool: while new sessions keep taking fresh children,
   *   the pool keeps up to this many fresh ones (at least `warm`), sized by the observed rate (see
   *   {@link ChildPool.aheadTarget}); default `warm` (a fixed pool)
   * @param viaLauncher children are started by the host's launcher process (launcher.ts); "auto":
   *   once this pool has started {@link AUTO_LAUNCHER_AFTER} children directly (see there)
   */
  constructor(
    private readonly defaultSpec: ChildSpec,
    private readonly warm: number,
    private readonly maxIdle: number = Math.max(warm, DEFAULT_MAX_IDLE),
    readonly maxProcesses: number = Math.max(warm, DEFAULT_MAX_PROCESSES),
    private readonly maxWarm: number = warm,
    private readonly viaLauncher: boolean | "auto" = false,
  ) {
    if (maxProcesses < Math.max(1, warm))
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `maxProcesses (${maxProcesses}) must be at least 1 and at least the warm pool size (${warm})`,
      );
    this.replenish();
  }

  private sameSpec(a: ChildSpec, b: ChildSpec): boolean {
    return (
      a.heapMb === b.heapMb &&
      a.addressSpaceMb === b.addressSpaceMb &&
      a.entry === b.entry &&
      a.libraries === b.libraries
    );
  }

  private spawnChild(spec: ChildSpec): SandboxChild {
    const viaLauncher =
      this.viaLauncher === "auto" ? this.spawned >= AUTO_LAUNCHER_AFTER : this.viaLauncher;
    this.spawned++;
    const child = new SandboxChild(spec, this.addressSpaceFactor, viaLauncher);
    this.all.add(child);
    this.peakSize = Math.max(this.peakSize, this.all.size);
    void child.ready.then(
      () => (this.startMs = 0.7 * this.startMs + 0.3 * (child.readyAt! - child.spawnedAt)),
      () => {},
    );
    void child.exited.then(() => {
      this.all.delete(child);
      this.busy.delete(child);
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
      // A slot came free: queued actions first.
      this.pump();
      // Replace children that were healthy (killed at a deadline, crashed on guest input). One that
      // never started is not replaced here: that would respawn in a tight loop when startup is
      // broken; the next acquire() spawns again and reports the failure to its caller.
      if (child.readyAt !== null) this.scheduleUpkeep();
    });
    return child;
  }

  /** Lends `child` to an action of `need`'s session (binding a fresh child to it). */
  private lend(child: SandboxChild, scope: ActionScope, need: Need): SandboxChild {
    const wasFresh = child.session === null;
    child.session = need.session;
    child.singleUse = need.singleUse;
    this.busy.set(child, scope);
    child.setRef(true);
    // A fresh child is no longer fresh: start its replacement for the next new session.
    if (wasFresh) {
      this.noteTake();
      this.scheduleUpkeep();
    }
    return child;
  }

  /** `c` is alive, of `need`'s spec, and fresh or bound to `need`'s session. */
  private fits(c: SandboxChild, need: Need): boolean {
    return (
      !c.dead &&
      c.killedBy === null &&
      this.sameSpec(c.spec, need.spec) &&
      (c.session === null || (c.session === need.session && !need.singleUse))
    );
  }

  /** Best idle child for `need`: its session's own, else a fresh one that is up, else any fresh one. */
  private idleFor(need: Need): number {
    let best = -1;
    let rank = 0;
    for (let i = 0; i < this.idle.length; i++) {
      const c = this.idle[i];
      if (!this.fits(c, need)) continue;
      const r = c.session !== null ? 3 : c.readyAt !== null ? 2 : 1;
      if (r > rank) [best, rank] = [i, r];
    }
    return best;
  }

  /**
   * A fresh child was bound to a new session (or one was asked for): the run rate the started-ahead
   * pool is sized by. Once none came for RUN_RATE_WINDOW_MS, an upkeep shrinks the pool again.
   */
  private noteTake(): void {
    if (this.maxWarm <= this.warm) return;
    const now = performance.now();
    this.takes.push(now);
    if (this.takes.length > 8) this.takes.shift();
    if (this.rateTimer) clearTimeout(this.rateTimer);
    this.rateTimer = setTimeout(() => {
      this.rateTimer = null;
      this.scheduleUpkeep();
    }, RUN_RATE_WINDOW_MS + 50);
    this.rateTimer.unref();
  }

  /**
   * Fresh children to keep ready: `warm`, or — while new sessions take fresh children faster than
   * one start covers — enough to cover a start at the observed rate (the spawn -> ready time over
   * the mean time between takes, counting the time since the last one, plus one), up to `maxWarm`.
   * Isolation is unchanged: a child started ahead is still fresh, and bound to one session only.
   */
  aheadTarget(now = performance.now()): number {
    if (this.maxWarm <= this.warm) return this.warm;
    const recent = this.takes.filter((t) => now - t <= RUN_RATE_WINDOW_MS);
    if (recent.length < 3) return this.warm;
    const interval = Math.max(now - recent[0], 1) / recent.length;
    const need = Math.ceil(this.startMs / interval) + 1;
    return Math.min(this.maxWarm, Math.max(this.warm, need));
  }

  /**
   * Tops the idle set up to {@link ChildPool.aheadTarget} fresh children of the default spec (never
   * past the cap or a queue). The first `warm` are spawned at once; children beyond them one per
   * call, with at most MAX_AHEAD_STARTING still starting (each `spawn` blocks the event loop for a
   * few ms, and boots at once slow each other down): the upkeep calls again until the target is met.
   * Returns true when more are still to start.
   */
  replenish(): boolean {
    if (this.closed) return false;
    const target = this.aheadTarget();
    let fresh = 0;
    let starting = 0;
    for (const c of this.idle) {
      if (c.session !== null || c.dead || c.killedBy !== null) continue;
      if (!this.sameSpec(c.spec, this.defaultSpec)) continue;
      fresh++;
      if (c.readyAt === null) starting++;
    }
    const room = () => this.all.size < this.maxProcesses && this.waiters.length === 0;
    while (fresh < this.warm && room()) {
      this.idle.push(this.spawnChild(this.defaultSpec));
      fresh++;
      starting++;
    }
    if (fresh < target && room() && starting < MAX_AHEAD_STARTING) {
      this.idle.push(this.spawnChild(this.defaultSpec));
      fresh++;
    }
    return fresh < target && room();
  }

  /**
   * Once new sessions stopped coming (no take within RUN_RATE_WINDOW_MS), fresh idle children
   * beyond `warm` are retired.
   */
  private trimAhead(): void {
    if (this.maxWarm <= this.warm || this.aheadTarget() > this.warm) return;
    let fresh = 0;
    for (const c of [...this.idle]) {
      if (c.session !== null || c.dead || c.killedBy !== null) continue;
      if (!this.sameSpec(c.spec, this.defaultSpec) || ++fresh <= this.warm) continue;
      this.idle.splice(this.idle.indexOf(c), 1);
      c.kill("retired");
    }
  }

  /** True when `session` has a live process that may serve its next action (idle, busy or finishing). */
  private hasProcessFor(session: string): boolean {
    for (const c of this.all)
      if (c.session === session && !c.dead && c.killedBy === null && !c.retire && !c.singleUse)
        return true;
    return false;
  }

  /**
   * Process work that nothing waits for — replacement spawns, starting prepared sessions' processes,
   * killing ended sessions' idle processes — runs a few ms later, off the code path that asked for
   * it: `spawn` blocks the event loop for several ms (longer in a large host), and the caller is
   * usually about to send a model request or to hand a tool result back to a running action.
   */
  private scheduleUpkeep(): void {
    if (this.upkeep || this.closed) return;
    this.upkeep = setTimeout(() => {
      this.upkeep = null;
      if (this.closed) return;
      for (const c of this.ending.splice(0)) c.kill("retired");
      for (const session of [...this.preparing]) {
        this.preparing.delete(session);
        if (this.waiters.length > 0 || this.all.size >= this.maxProcesses) break;
        if (this.hasProcessFor(session)) continue;
        const child = this.spawnChild(this.defaultSpec);
        child.session = session;
        child.idleSince = performance.now();
        this.idle.push(child);
      }
      this.preparing.clear();
      this.trimAhead();
      const more = this.replenish();
      this.trimIdle();
      if (more) this.scheduleUpkeep();
    }, UPKEEP_DELAY_MS);
    this.upkeep.unref();
  }

  /**
   * An action of `session` is coming (its model call just started): a fresh process — one that
   * never ran an action, so isolation is the same as binding it when the action starts — is bound
   * to the session now, and the fresh one that replaces it (or, with none idle, the session's own)
   * is started by the next upkeep, so process starts overlap the model call instead of delaying
   * the action. Nothing when the session already has a process, when actions are queued for one
   * (they come first) or at the cap.
   */
  prepare(session: string): void {
    if (this.closed || this.waiters.length > 0 || this.hasProcessFor(session)) return;
    let index = -1;
    for (let i = 0; i < this.idle.length; i++) {
      const c = this.idle[i];
      if (c.session !== null || c.dead || c.killedBy !== null) continue;
      if (!this.sameSpec(c.spec, this.defaultSpec)) continue;
      if (index < 0 || (c.readyAt !== null && this.idle[index].readyAt === null)) index = i;
    }
    if (index >= 0) {
      const child = this.idle[index];
      child.session = session;
      child.idleSince = performance.now();
    } else if (this.all.size < this.maxProcesses) this.preparing.add(session);
    else return;
    this.noteTake();
    this.scheduleUpkeep();
  }

  /**
   * `session`'s agent run is over: its idle processes are killed (by the next upkeep), a busy or
   * finishing one when its action ends. A later action of the session gets a fresh process
   * (restored from its snapshot), as a resumed run does.
   */
  endSession(session: string): void {
    this.preparing.delete(session);
    for (const c of this.all) {
      if (c.session !== session) continue;
      c.retire = true;
      const i = this.idle.indexOf(c);
      if (i >= 0) {
        this.idle.splice(i, 1);
        this.ending.push(c);
        this.scheduleUpkeep();
      }
    }
  }

  /** Records that an action waited `ms` for its process (from asking the pool to the process being ready). */
  noteWait(ms: number): void {
    if (ms < 1) return;
    this.waits++;
    this.waitMs += ms;
  }

  /** Retires the least recently used bound idle children beyond `maxIdle`. */
  private trimIdle(): void {
    const bound = this.idle.filter((c) => c.session !== null && c.killedBy === null);
    if (bound.length <= this.maxIdle) return;
    bound.sort((a, b) => a.idleSince - b.idleSince);
    for (const c of bound.slice(0, bound.length - this.maxIdle)) c.kill("retired");
  }

  /**
   * A child for `spec` that runs nothing else — never one that is busy with another action.
   * Order of preference: an idle child that is up; a child whose action just ended (it reports
   * idle within microseconds, or is killed within IDLE_GRACE_MS — so waiting cannot deadlock); an
   * idle child still starting; a new child while under `maxProcesses`; else a place in the queue.
   * Rejects with CODEHOP_SANDBOX_INTERNAL once the pool is closed (also while queued), and with
   * {@link AcquireRefused} when `signal` fires while queued or the nesting extras are used up.
   */
  async acquire(spec: ChildSpec, options: AcquireOptions = {}): Promise<SandboxChild> {
    if (this.closed)
      throw new CodehopError(ErrorCodes.SANDBOX_INTERNAL, "The sandbox has been closed");
    const scope = options.scope ?? { parent: null, depth: 0 };
    const need: Need = {
      spec,
      session: options.session ?? "",
      singleUse: options.singleUse ?? false,
    };
    if (this.waiters.length === 0) {
      let index = this.idleFor(need);
      if (index < 0 || this.idle[index].session === null) {
        // The session's own child may be finishing its previous action (it reports idle within
        // microseconds, or is killed within IDLE_GRACE_MS): it holds the session's state, so wait.
        for (const [c, waiter] of this.finishing) {
          // (Never beyond the cap: a child there only breaks deadlocks, see release().)
          if (
            waiter === null &&
            c.session === need.session &&
            !c.singleUse &&
            !c.retire &&
            this.fits(c, need) &&
            this.all.size <= this.maxProcesses
          ) {
            const handed = await new Promise<SandboxChild | null>((resolve) =>
              this.finishing.set(c, resolve),
            );
            if (handed && !handed.dead && !this.closed) return this.lend(handed, scope, need);
            return this.acquire(spec, options);
          }
        }
        index = this.idleFor(need);
      }
      if (index >= 0) return this.lend(this.idle.splice(index, 1)[0], scope, need);
      if (this.all.size < this.maxProcesses) return this.lend(this.spawnChild(spec), scope, need);
    }
    const signal = options.signal;
    if (signal?.aborted) throw new AcquireRefused("aborted", "cancelled while waiting");
    return new Promise<SandboxChild>((resolve, reject) => {
      const onAbort = () => {
        const i = this.waiters.indexOf(waiter);
        if (i < 0) return;
        this.waiters.splice(i, 1);
        reject(new AcquireRefused("aborted", "cancelled while waiting"));
        this.pump(); // the queue changed: what was a deadlock may not be one any more, and v.v.
      };
      const done = () => signal?.removeEventListener("abort", onAbort);
      const waiter: Waiter = {
        need,
        scope,
        resolve: (child) => {
          done();
          resolve(child);
        },
        reject: (err) => {
          done();
          reject(err);
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      // Deepest first, then first come: finishing nested work already under way frees its
      // holders, where starting a new sibling would only add one more waiting holder.
      let at = this.waiters.length;
      while (at > 0 && this.waiters[at - 1].scope.depth < scope.depth) at--;
      this.waiters.splice(at, 0, waiter);
      this.pump();
    });
  }

  /** Serves queued actions: idle children, free slots, then the nesting rule. */
  private pump(): void {
    if (this.closed) return;
    // Idle children that fit, in queue order (deepest first, see acquire()).
    for (let i = 0; i < this.waiters.length; i++) {
      const w = this.waiters[i];
      const index = this.idleFor(w.need);
      if (index < 0) continue;
      this.waiters.splice(i--, 1);
      w.resolve(this.lend(this.idle.splice(index, 1)[0], w.scope, w.need));
    }
    // Free slots, in queue order.
    while (this.waiters.length > 0 && this.all.size < this.maxProcesses) {
      const w = this.waiters.shift()!;
      w.resolve(this.lend(this.spawnChild(w.need.spec), w.scope, w.need));
    }
    if (this.waiters.length === 0) return;
    // At the cap. Idle children nobody queued can use (another spec, another session) make room
    // by exiting, those of ended sessions first.
    for (const c of this.ending.splice(0)) c.kill("retired");
    let dying = 0;
    for (const c of this.all) if (c.killedBy !== null) dying++;
    for (const c of this.idle) {
      if (dying >= this.waiters.length) break;
      if (!c.dead && c.killedBy === null) {
        c.kill("retired");
        dying++;
      }
    }
    while (this.deadlocked()) {
      const w = this.waiters.shift()!; // the deepest

      if (this.all.size < this.maxProcesses + MAX_NESTING_EXTRA_PROCESSES) {
        // Its holder-ancestors wait for it: a new process can't add to the deadlock, so one is enough.
        w.resolve(this.lend(this.spawnChild(w.need.spec), w.scope, w.need));
        return;
      }
      // Out of extras: refuse rather than hang (the rest are refused too while it stays deadlocked).
      w.reject(
        new AcquireRefused(
          "nesting",
          `No sandbox process can come free: all ${this.all.size} (the limit of ${this.maxProcesses} plus ${MAX_NESTING_EXTRA_PROCESSES} for nesting) run actions that wait for nested actions. Make fewer nested agent calls at the same time`,
        ),
      );
    }
  }

  /**
   * True when no queued action can ever get a process by waiting: every live child (but `except`)
   * is lent to an action that (through its tool calls) waits for a queued action, and none is idle,
   * finishing or dying (those come free by themselves).
   */
  private deadlocked(except?: SandboxChild): boolean {
    if (this.waiters.length === 0 || this.idle.length > 0 || this.finishing.size > 0) return false;
    for (const c of this.all) {
      if (c === except) continue;
      if (c.killedBy !== null) return false;
      const holder = this.busy.get(c);
      if (!holder || !this.waiters.some((w) => isAncestor(holder, w.scope))) return false;
    }
    return true;
  }

  /** The child's action ended; it will be released (or killed) shortly. */
  markFinishing(child: SandboxChild): void {
    this.busy.delete(child);
    if (!child.dead) this.finishing.set(child, null);
  }

  /** Returns a healthy child after its action (handed to a waiter, kept warm, or retired). */
  release(child: SandboxChild): void {
    child.onMessage = null;
    child.onExit = null;
    this.busy.delete(child);
    const waiter = this.finishing.get(child);
    this.finishing.delete(child);
    if (child.singleUse || child.retire) {
      child.setRef(false);
      child.kill("retired");
      waiter?.(null); // its session's next action takes another process
      return;
    }
    if (waiter && !child.dead) {
      waiter(child);
      return;
    }
    child.setRef(false);
    if (child.dead) return;
    // A child beyond the cap (a nesting extra) only ever serves to break a deadlock: handed to a
    // queued action that is not, it would let one more parent start and park, and the extras grow
    // with the fan-out instead of the nesting depth.
    const overCap = this.all.size > this.maxProcesses;
    const queued = this.waiters.findIndex((w) => this.fits(child, w.need));
    if (!this.closed && queued >= 0 && (!overCap || this.deadlocked(child))) {
      const [w] = this.waiters.splice(queued, 1);
      w.resolve(this.lend(child, w.scope, w.need));
      return;
    }
    if (
      !this.closed &&
      !overCap &&
      this.waiters.length === 0 &&
      this.sameSpec(child.spec, this.defaultSpec)
    ) {
      child.idleSince = performance.now();
      this.idle.push(child);
      this.trimIdle();
    } else child.kill("retired"); // (its exit serves a queued action of another spec or session)
  }

  /** Kills every child and waits for them to exit; queued actions are rejected (SANDBOX_INTERNAL). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.upkeep) clearTimeout(this.upkeep);
    this.upkeep = null;
    if (this.rateTimer) clearTimeout(this.rateTimer);
    this.rateTimer = null;
    this.ending.length = 0; // (still in `all`: killed below)
    for (const w of this.waiters.splice(0)) {
      w.reject(
        new CodehopError(
          ErrorCodes.SANDBOX_INTERNAL,
          "The sandbox was closed while the action waited for a process",
        ),
      );
    }
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

  /** Number of actions waiting for a process. */
  get queued(): number {
    return this.waiters.length;
  }
}
