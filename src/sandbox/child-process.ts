/**
 * One sandbox child process: started (child-launch.ts), brought up through the start-up exchange
 * (child-protocol.ts), then a line protocol the running action consumes; ref'd only while busy;
 * killed with SIGKILL and reaped even when Node misses its exit. Which process serves which action
 * is pool.ts.
 */
import type { Writable } from "node:stream";
import { CodehopError, ErrorCodes } from "../errors.ts";
import {
  LIBRARY_REFUSED_MARK,
  LineBuffer,
  encodeLine,
  type HostMessage,
} from "./child/protocol.mjs";
import { CHILD_ENV, childCommand, type ChildSpec } from "./child-launch.ts";
import {
  MAX_LINE_CHARS,
  readMessages,
  startupStep,
  warmupRunLine,
  type ChildMessage,
  type CodeCacheUse,
} from "./child-protocol.ts";
import { sesCodeCaches } from "./code-cache.ts";
import { launcher, spawnDirect, type ChildExit, type ChildPort } from "./launcher.ts";

const STDERR_TAIL_CHARS = 4096;
/** After SIGKILL, how long to wait for Node's 'exit' event before checking the pid directly. */
const REAP_CHECK_AFTER_MS = 1_000;
/** A child that is not locked down and ready by then is killed (and run() rejects). */
const CHILD_START_TIMEOUT_MS = 20_000;

/** One sandbox child process and its line protocol. */
export class SandboxChild {
  readonly spec: ChildSpec;
  /** The process (started by the host's launcher, launcher.ts, or directly while it is not up). */
  readonly proc: ChildPort;
  readonly spawnedAt = performance.now();
  /** Resolves when the child reported `ready` (rejects if it died first). */
  readonly ready: Promise<void>;
  /** Resolves with how the process ended. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readyAt: number | null = null;
  /** Asked to send the SES code cache for its heap size before `ready` (see sesCodeCaches). */
  readonly makesCodeCache: boolean;
  private codeCacheSent = false;
  /** The code cache file it was given, if any. */
  private readonly codeCacheFile: string | null;
  /** Whether the child loaded SES with the code cache it was given (reported with `ready`). */
  codeCache: CodeCacheUse | null = null;
  dead = false;
  /**
   * The session (agent run) this child serves, set when it is first lent; null while it never ran
   * an action. A child is only ever lent to actions of its own session.
   */
  session: string | null = null;
  /** Killed instead of kept when released: its session is one action long. */
  singleUse = false;
  /** Set by the session when the child should not serve another action (e.g. its heap grew too much). */
  retire = false;
  /** When it last became idle (least recently used idle children are retired first). */
  idleSince = 0;
  /**
   * The values this child holds for its session, as the host knows them (by name: the frozen value
   * objects of the snapshot its last action produced). An action whose snapshot still has the same
   * object under a name does not send that value again.
   */
  kept = new Map<string, unknown>();
  /** Set when we killed it on purpose (timeout, grace expiry, close). */
  killedBy: string | null = null;
  stderrTail = "";
  /** Current consumer of messages (the running action); null when idle. */
  onMessage: ((msg: ChildMessage) => void) | null = null;
  /** Current consumer of the exit event (the running action); null when idle. */
  onExit: ((exit: { code: number | null; signal: NodeJS.Signals | null }) => void) | null = null;
  private resolveExit!: (exit: { code: number | null; signal: NodeJS.Signals | null }) => void;
  private reaper: NodeJS.Timeout | null = null;
  private stdin: Writable | null = null;
  /** Lines written before the child's pipes arrived from the launcher. */
  private early: string[] = [];
  private readonly lines = new LineBuffer(MAX_LINE_CHARS);

  /**
   * @param spec how the child is identified for reuse
   * @param addressSpaceFactor multiplier for the address-space limit actually applied (the pool
   *   raises it when this machine's Node needs more address space just to start)
   * @param viaLauncher started by the host's launcher process (launcher.ts) once it is up, so the
   *   host's event loop never blocks in `spawn()`; else spawned by the host
   */
  constructor(
    spec: ChildSpec,
    readonly addressSpaceFactor = 1,
    viaLauncher = false,
  ) {
    this.spec = spec;
    const codeCache = sesCodeCaches.fileFor(spec);
    this.codeCacheFile = codeCache ?? null;
    this.makesCodeCache = codeCache === undefined && sesCodeCaches.begin(spec);
    const { cmd, args } = childCommand(spec, addressSpaceFactor, codeCache, this.makesCodeCache);
    this.proc = viaLauncher
      ? launcher.start(cmd, args, CHILD_ENV)
      : spawnDirect(cmd, args, CHILD_ENV); // (empty but for one malloc arena: see CHILD_ENV)
    this.exited = new Promise((resolve) => {
      this.resolveExit = (exit) => {
        if (this.dead) return;
        this.dead = true;
        if (this.reaper) clearInterval(this.reaper);
        this.stdin?.destroy();
        resolve(exit);
      };
      // Once the child exited and its output pipes are drained: what it wrote to stderr before
      // dying — V8's out-of-memory report — is read before anyone decides how it died.
      this.proc.onClose((exit: ChildExit) => this.resolveExit(exit));
    });
    void this.exited.then((exit) => {
      if (
        this.makesCodeCache &&
        !this.codeCacheSent &&
        this.readyAt === null &&
        this.codeCache === null
      )
        sesCodeCaches.failed(spec);
      this.onExit?.(exit);
    });
    this.ready = new Promise((resolve, reject) => {
      const onData = (chunk: string) => {
        const { messages, broken } = readMessages(this.lines, chunk);
        for (const msg of messages) {
          const step = startupStep(
            {
              makesCodeCache: this.makesCodeCache,
              codeCacheSent: this.codeCacheSent,
              codeCache: this.codeCache,
              ready: this.readyAt !== null,
            },
            msg,
          );
          switch (step.step) {
            case "deliver":
              // Once killed (a deadline, a broken protocol), what is still in the pipe is not acted
              // on — but its output, streamed before the kill, still is.
              if (this.killedBy === null || msg.t === "log") this.onMessage?.(msg);
              break;
            case "violation":
              this.kill("protocol");
              return;
            case "store-code-cache":
              this.codeCacheSent = true;
              sesCodeCaches.store(this.spec, step.data);
              break;
            case "warm-up":
              if (this.makesCodeCache && !this.codeCacheSent) sesCodeCaches.failed(this.spec);
              if (step.codeCache === "rejected" && this.codeCacheFile)
                sesCodeCaches.refused(this.spec, this.codeCacheFile);
              this.codeCache = step.codeCache;
              this.sendLine(warmupRunLine());
              break;
            case "answer":
              this.send(step.message);
              break;
            case "warm-up-failed":
              this.kill("warm-up failed");
              return;
            case "ready":
              this.readyAt = performance.now();
              resolve();
              break;
          }
        }
        if (broken) this.kill("protocol");
      };
      this.proc.onStreams(({ stdin, out, stderr }) => {
        stdin.on("error", () => {}); // EPIPE after the child died is reported through its exit
        out.setEncoding("utf8");
        stderr.setEncoding("utf8");
        stderr.on("data", (chunk: string) => {
          this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL_CHARS);
        });
        out.on("data", onData);
        if (this.dead) return void stdin.destroy();
        this.stdin = stdin;
        for (const line of this.early.splice(0)) stdin.write(line);
      });
      // A child that never reports ready (hung at startup) must not leave run() waiting forever.
      const startTimer = setTimeout(() => {
        if (this.readyAt === null) this.kill("start timeout");
      }, CHILD_START_TIMEOUT_MS);
      startTimer.unref();
      void this.exited.then(() => {
        clearTimeout(startTimer);
        if (this.readyAt === null) {
          // An authorized library refused at load: the operator's configuration, said as such.
          const refused = this.stderrTail.lastIndexOf(LIBRARY_REFUSED_MARK);
          reject(
            refused >= 0
              ? new CodehopError(
                  ErrorCodes.SANDBOX_LIBRARY_REFUSED,
                  this.stderrTail
                    .slice(refused + LIBRARY_REFUSED_MARK.length)
                    .split("\n")[0]
                    .slice(0, 1000),
                )
              : new CodehopError(
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
  send(msg: HostMessage): void {
    this.sendLine(encodeLine(msg));
  }

  /** Writes one protocol line made by the protocol module (ignored once dead). */
  sendLine(line: string): void {
    if (this.dead) return;
    if (this.stdin) this.stdin.write(line);
    else this.early.push(line);
  }

  /** Keeps the host alive while an action runs; lets it exit while idle. */
  setRef(on: boolean): void {
    this.proc.setRef(on);
  }

  /** SIGKILL (idempotent); `reason` is kept for the result. */
  kill(reason: string): void {
    if (!this.killedBy) this.killedBy = reason;
    if (this.dead) return;
    this.proc.kill();
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
          if (this.proc.pid !== undefined) process.kill(this.proc.pid, 0);
        } catch {
          this.resolveExit({ code: null, signal: "SIGKILL" });
        }
      }, 20);
    }
  }
}
