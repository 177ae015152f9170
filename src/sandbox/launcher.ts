/**
 * Starting sandbox children without blocking the host's event loop.
 *
 * `child_process.spawn()` forks the calling process: the host's event loop stops for as long as the
 * kernel copies its page tables (measured 2–6 ms for a 90 MB host and ~20 ms for a 640 MB one on
 * the loaded 2-core machine), once per agent run (one fresh process per run). A small launcher
 * process (plain Node, no modules of ours, started once per host) does the spawning instead: the
 * host sends it the command line over an IPC channel, the launcher spawns the child and passes the
 * child's three pipe ends (stdin, stderr, fd 3) back over the same channel as handles, then closes
 * its own copies. From then on the host talks to the child directly, exactly as if it had spawned
 * it; the launcher only reports the child's exit status and delivers SIGKILL (it is the child's
 * parent, so it alone knows when the pid is reaped and can never be reused under it).
 *
 * Lifetimes: the launcher runs under `setpriv --pdeathsig KILL` when available (the kernel kills it
 * when the host thread that started it ends), and exits by itself when its IPC channel closes (the
 * host is gone); children it started run under the same parent-death signal, so they die with it
 * (or see their parent change and stop through their watchdog, child/child.mjs). A launcher that
 * dies takes its children with it: their actions end as crashed (SandboxError) and the pool replaces
 * them; the next start launches a new launcher. While it starts (~50 ms), and wherever it cannot
 * run, children are spawned directly by the host as before.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import type { Readable, Writable } from "node:stream";

/** How a child ended (as Node's 'close' event reports it). */
export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** What the host needs of a started child: its pipes, its end, a way to kill it. */
export interface ChildPort {
  /** The command line (`[cmd, ...args]`, as ChildProcess.spawnargs). */
  readonly spawnargs: readonly string[];
  /** Calls `use` once with the child's pipes (at once for a direct spawn, later for a launched one). */
  onStreams(use: (streams: ChildStreams) => void): void;
  /** Calls `done` once, when the child has exited and its output pipes are drained (or it never started). */
  onClose(done: (exit: ChildExit) => void): void;
  /** SIGKILL (idempotent; a no-op once it exited). */
  kill(): void;
  /** Whether the child's handles keep the host's event loop alive. */
  setRef(on: boolean): void;
  /** The child's pid once known (tests). */
  readonly pid: number | undefined;
}

/** The child's pipe ends on the host. */
export interface ChildStreams {
  stdin: Writable;
  out: Readable;
  stderr: Readable;
}

const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p)) ?? null;

/** A child spawned by the host itself (no launcher, or it is not up). */
export function spawnDirect(
  cmd: string,
  args: readonly string[],
  env: Record<string, string>,
): ChildPort {
  const proc = spawn(cmd, args, {
    env: { ...env },
    stdio: ["pipe", "ignore", "pipe", "pipe"],
    detached: false,
  });
  const streams: ChildStreams = {
    stdin: proc.stdin as Writable,
    out: proc.stdio[3] as Readable,
    stderr: proc.stderr as Readable,
  };
  return {
    spawnargs: proc.spawnargs,
    get pid() {
      return proc.pid;
    },
    onStreams: (use) => use(streams),
    onClose(done) {
      // 'close' (after 'exit', once the child's pipes are drained): what it wrote to stderr before
      // dying — V8's out-of-memory report — is read before anyone decides how it died.
      proc.on("close", (code, signal) => done({ code, signal }));
      proc.on("error", () => done({ code: null, signal: null }));
    },
    kill: () => void proc.kill("SIGKILL"),
    setRef: (on) => refAll([proc, ...Object.values(streams)], on),
  };
}

function refAll(items: unknown[], on: boolean): void {
  for (const item of items as { ref?(): void; unref?(): void }[]) {
    if (on) item?.ref?.();
    else item?.unref?.();
  }
}

/**
 * The launcher's program (CommonJS, run with `node -e`): spawn on request, pass the three pipe ends
 * back as handles, report the exit, kill on request; exit when the host's channel closes.
 */
const LAUNCHER_SOURCE = `"use strict";
const { spawn } = require("node:child_process");
const children = new Map();
process.on("message", (m) => {
  if (m.t === "kill") return void children.get(m.id)?.kill("SIGKILL");
  if (m.t !== "spawn") return;
  let c;
  try {
    c = spawn(m.cmd, m.args, { env: m.env, stdio: ["pipe", "ignore", "pipe", "pipe"] });
  } catch (err) {
    return void process.send({ t: "exit", id: m.id, code: null, signal: null });
  }
  c.on("error", () => {});
  if (c.pid === undefined) {
    c.once("error", () => process.send({ t: "exit", id: m.id, code: null, signal: null }));
    return;
  }
  // Nothing of the child's output is read here: it is the host's. Node starts reading a spawned
  // child's pipes at once, and the handles go over one at a time (each waits for the host's
  // acknowledgement): what the child wrote meanwhile would be read into this process and lost.
  for (const s of [c.stderr, c.stdio[3]]) s._handle?.readStop();
  children.set(m.id, c);
  process.send({ t: "pipe", id: m.id, pid: c.pid, fd: 0 }, c.stdin);
  process.send({ t: "pipe", id: m.id, fd: 2 }, c.stderr);
  process.send({ t: "pipe", id: m.id, fd: 3 }, c.stdio[3]);
  c.on("exit", (code, signal) => {
    children.delete(m.id);
    process.send({ t: "exit", id: m.id, code, signal });
  });
});
process.on("disconnect", () => process.exit(0));
process.send({ t: "up" });
`;

interface Pending {
  stdin?: Writable;
  stderr?: Readable;
  out?: Readable;
  pid?: number;
  streams: ((s: ChildStreams) => void) | null;
  exit: ChildExit | null;
  close: ((exit: ChildExit) => void) | null;
  /** Output pipes (of those that arrived) not yet closed. */
  open: number;
  killed: boolean;
  closed: boolean;
  /** Whether its pipes keep the host's loop alive (applied to each pipe as it arrives). */
  reffed: boolean;
}

/**
 * The host's side of the launcher: starts it on first use, spawns through it once it is up, and
 * spawns directly until then or when it is gone.
 */
export class Launcher {
  private proc: ChildProcess | null = null;
  private up = false;
  private nextId = 1;
  private readonly children = new Map<number, Pending>();
  /** Launched children whose handles keep the loop alive (busy, or killed and not yet reaped). */
  private refs = 0;
  /** Launcher starts that failed; past a few, children are spawned directly for good. */
  private failures = 0;

  /** True while children are started through the launcher (tests). */
  get isUp(): boolean {
    return this.up && this.proc?.connected === true;
  }

  /** Starts a child: through the launcher when it is up, directly otherwise. */
  start(cmd: string, args: readonly string[], env: Record<string, string>): ChildPort {
    if (!this.up || !this.proc?.connected) {
      this.launch();
      return spawnDirect(cmd, args, env);
    }
    return this.launched(cmd, args, env);
  }

  /** Starts the launcher in the background (nothing when it runs, is starting, or gave up). */
  private launch(): void {
    if (this.proc || this.failures >= 3) return;
    const node = [process.execPath, "-e", LAUNCHER_SOURCE];
    const [cmd, ...args] = SETPRIV ? [SETPRIV, "--pdeathsig", "KILL", "--", ...node] : node;
    let proc: ChildProcess;
    try {
      // No environment (no NODE_OPTIONS, loaders or profilers of the host), no stdio but the channel.
      proc = spawn(cmd, args, { env: {}, stdio: ["ignore", "ignore", "ignore", "ipc"] });
    } catch {
      this.failures++;
      return;
    }
    this.proc = proc;
    proc.on("error", () => {});
    proc.on("message", (m: LauncherMessage, handle: unknown) => this.onMessage(m, handle));
    proc.on("exit", () => {
      if (this.proc === proc) {
        if (!this.up) this.failures++;
        this.proc = null;
        this.up = false;
      }
      // Its children die with it (parent-death signal): settle what still waits on them.
      for (const [id, p] of this.children) this.exited(id, p, { code: null, signal: "SIGKILL" });
    });
    this.applyRef();
  }

  private launched(cmd: string, args: readonly string[], env: Record<string, string>): ChildPort {
    const id = this.nextId++;
    const p: Pending = {
      streams: null,
      exit: null,
      close: null,
      open: 0,
      killed: false,
      closed: false,
      reffed: true,
    };
    this.children.set(id, p);
    this.proc!.send({ t: "spawn", id, cmd, args, env });
    // Until its pipes arrive, the channel keeps the host alive for it (as a spawned child would).
    this.refs++;
    this.applyRef();
    const setRef = (on: boolean) => {
      if (on !== p.reffed && !p.closed) {
        p.reffed = on;
        this.refs += on ? 1 : -1;
        this.applyRef();
      }
      refAll([p.stdin, p.out, p.stderr], on);
    };
    return {
      spawnargs: [cmd, ...args],
      get pid() {
        return p.pid;
      },
      onStreams: (use) => {
        if (p.stdin && p.out && p.stderr) use({ stdin: p.stdin, out: p.out, stderr: p.stderr });
        else p.streams = use;
      },
      onClose: (done) => {
        p.close = done;
        if (p.closed && p.exit) p.close(p.exit);
      },
      kill: () => {
        if (p.killed || p.closed) return;
        p.killed = true;
        if (this.proc?.connected) this.proc.send({ t: "kill", id });
      },
      setRef,
    };
  }

  private onMessage(m: LauncherMessage, handle: unknown): void {
    if (m.t === "up") {
      this.up = true;
      return;
    }
    const p = this.children.get(m.id);
    if (!p) return;
    if (m.t === "pipe") {
      if (m.pid !== undefined) p.pid = m.pid;
      const socket = handle as (Writable & Readable) | undefined;
      if (!socket) return;
      refAll([socket], p.reffed);
      if (m.fd === 0) p.stdin = socket;
      else {
        p.open++;
        socket.once("close", () => {
          p.open--;
          this.maybeClosed(m.id, p);
        });
        if (m.fd === 2) p.stderr = socket;
        else p.out = socket;
      }
      if (p.streams && p.stdin && p.out && p.stderr) {
        const use = p.streams;
        p.streams = null;
        use({ stdin: p.stdin, out: p.out, stderr: p.stderr });
      }
      return;
    }
    if (m.t === "exit") this.exited(m.id, p, { code: m.code, signal: m.signal });
  }

  private exited(id: number, p: Pending, exit: ChildExit): void {
    p.exit ??= exit;
    this.maybeClosed(id, p);
    // The launcher died: pipes that never arrived never will; those that did close on their own.
    if (!this.proc) {
      p.open = 0;
      this.maybeClosed(id, p);
    }
  }

  private maybeClosed(id: number, p: Pending): void {
    if (p.closed || !p.exit || p.open > 0) return;
    p.closed = true;
    this.children.delete(id);
    if (p.reffed) {
      p.reffed = false;
      this.refs--;
      this.applyRef();
    }
    p.stdin?.destroy();
    p.close?.(p.exit);
  }

  /** The channel keeps the host alive only while a launched child does. */
  private applyRef(): void {
    if (!this.proc) return;
    if (this.refs > 0) {
      this.proc.ref();
      this.proc.channel?.ref();
    } else {
      this.proc.unref();
      this.proc.channel?.unref();
    }
  }
}

type LauncherMessage =
  | { t: "up" }
  | { t: "pipe"; id: number; fd: 0 | 2 | 3; pid?: number }
  | { t: "exit"; id: number; code: number | null; signal: NodeJS.Signals | null };

/** The host's launcher (one per host process, shared by every sandbox). */
export const launcher = new Launcher();
