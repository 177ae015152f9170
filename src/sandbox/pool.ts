/**
 * Warm pool of locked-down sandbox child processes.
 *
 * Every in-flight action gets its own child: a parent agent's action that awaits a tool running a
 * child agent never needs the parent's (busy) process. The number of children is capped; queued
 * actions wait, and a nesting deadlock at the cap is broken by a bounded number of extra children
 * (see ChildPool). `warm` idle children are kept ready; more are spawned on demand and retired when
 * idle. Idle children are unref'd so an idle pool never keeps the host process alive.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { spawn, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { threadId } from "node:worker_threads";
import type { Readable, Writable } from "node:stream";
import { CodehopError, ErrorCodes } from "../errors.ts";
import {
  DEFAULT_CAPABILITIES,
  DEFAULT_LIMITS,
  DEFAULT_MAX_PROCESSES,
  MAX_NESTING_EXTRA_PROCESSES,
} from "./limits.ts";
import {
  CHILD_CODE_CACHE_ARG,
  CHILD_MAKE_CODE_CACHE_ARG,
  CHILD_PDEATHSIG_ARG,
  LineBuffer,
  encodeLine,
  encodeRunLine,
  type HostMessage,
} from "./child/protocol.mjs";
import { buildAction } from "./transform.ts";

/** How a child is started (children are only reused for the same spec). */
export interface ChildSpec {
  heapMb: number;
  /** RLIMIT_AS in MB, or null for none. */
  addressSpaceMb: number | null;
  /** Test only: another child program speaking the protocol (default: child/child.mjs). */
  entry?: string;
}

/** Message from a child (already JSON-parsed; validated by the consumer). */
export type ChildMessage = { t: string; [key: string]: unknown };

// Real paths: the permission model compares the files the child opens with these.
const CHILD_DIR = realpathSync(fileURLToPath(new URL("./child/", import.meta.url)));
const CHILD_ENTRY = join(CHILD_DIR, "child.mjs");
/** The child's modules: the only files (with the SES bundle) it may read. */
const CHILD_FILES = readdirSync(CHILD_DIR)
  .filter((f) => f.endsWith(".mjs"))
  .map((f) => join(CHILD_DIR, f));
const SES_PATH = realpathSync(createRequire(import.meta.url).resolve("ses"));
const PRLIMIT = ["/usr/bin/prlimit", "/bin/prlimit"].find((p) => existsSync(p)) ?? null;
/**
 * util-linux's setpriv: starts the child with a parent-death signal (SIGKILL when the host dies),
 * which spares each child its watchdog thread (~40 ms of CPU per process start). Without it the
 * child runs the watchdog (child/child.mjs).
 */
const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p)) ?? null;
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

/**
 * Delay of the pool's upkeep (replacement spawns, prepared sessions' processes, killing ended
 * sessions' idle ones): long enough for the caller's model request to be on its way first.
 */
const UPKEEP_DELAY_MS = 5;

/** Idle children kept after use unless configured otherwise (see ChildPool). */
export const DEFAULT_MAX_IDLE = 4;

/**
 * V8 code caches of the SES bundle, by child heap size (V8 accepts a cache only under the flags it
 * was made with, and `--max-old-space-size` is one of them). A child given one loads SES and locks
 * down in less time (child/lockdown.mjs). A cache is made by the first child of a heap size that
 * finds none: it sends the bytecode its start-up compiled before it reports ready — before it runs
 * any action, so no guest code has run in that process yet; a `code-cache` message at any other
 * time, or from a child not asked for one, is a protocol violation (the child is killed). Files are
 * named by a hash of what the bytecode depends on (the Node build, the SES file's bytes, the heap
 * size; V8's own check compares only the source's length and its flags), so a cache never goes
 * stale and host processes of this user share them, in a directory only this user may use
 * (`codehop-sandbox-<uid>` in the temp directory: created 0700). A code cache is trusted input (a
 * crafted one is native code in the child), so the directory and the file are checked at every use
 * — before a child is given the file and before every store — and not used when the directory is
 * not a real one of ours closed to others, or the file is not a regular file of ours closed to
 * others (the temp directory's cleaning may remove the directory of a long-running host, and
 * another user re-create it). The SES file's size, mtime and inode are checked at every use too:
 * when SES is replaced in place the hash is computed again. Children may read their cache file
 * (permission model) and write nothing. A cache V8 refuses is dropped and made again.
 */
export const sesCodeCaches = {
  /** The private directory's path (undefined: not looked for yet; null: no user ids here). */
  dir: undefined as string | null | undefined,
  /** Hash of the Node build and the SES bundle (computed again when the SES file changes). */
  key: "",
  /** Size, mtime and inode of the SES file when `key` was computed. */
  sesStamp: "",
  /** Heap size -> the cache file, once made or found (checked again at every use). */
  files: new Map<number, string>(),
  /** Heap size -> the file a starting child's cache is to be stored in. */
  making: new Map<number, string>(),
  /** Heap size -> attempts that gave no cache (the child died first, or the file could not be written). */
  failures: new Map<number, number>(),

  /** The cache file for children of `spec`, if made (here or by another host process of this user) and safe to use. */
  fileFor(spec: ChildSpec): string | undefined {
    if (spec.entry !== undefined) return undefined;
    const current = this.path(spec); // the directory checked, the key current
    if (current === null) return undefined;
    let file = this.files.get(spec.heapMb);
    // One named for a SES file replaced since is not used.
    if (file !== undefined && dirname(file) === this.dir && file !== current) file = undefined;
    file ??= this.making.has(spec.heapMb) ? undefined : current;
    if (file === undefined) {
      this.files.delete(spec.heapMb);
      return undefined;
    }
    // A file set elsewhere (tests) needs its own directory checked.
    const fits = dirname(file) === this.dir || isPrivateDir(dirname(file));
    if (fits && isPrivateFile(file)) {
      this.files.set(spec.heapMb, file);
      return file;
    }
    this.files.delete(spec.heapMb);
    return undefined;
  },

  /** Where the cache for `spec` is kept, or null when there is no safe private directory now. */
  path(spec: ChildSpec): string | null {
    if (this.dir === undefined) this.dir = privateCacheDirPath();
    if (this.dir === null || !ensurePrivateDir(this.dir)) return null;
    try {
      const st = statSync(SES_PATH);
      const stamp = `${st.size}:${st.mtimeMs}:${st.ino}`;
      if (!this.key || stamp !== this.sesStamp) {
        this.key = createHash("sha256")
          .update(`${process.version}\0${process.execPath}\0${process.arch}\0`)
          .update(readFileSync(SES_PATH))
          .digest("hex")
          .slice(0, 24);
        this.sesStamp = stamp;
      }
    } catch {
      return null; // SES being replaced: no cache for this child
    }
    return join(this.dir, `ses-${this.key}-${spec.heapMb}.cache`);
  },

  /** True when a child of `spec` starting now is to make its heap size's cache (then it is recorded as making it). */
  begin(spec: ChildSpec): boolean {
    const heap = spec.heapMb;
    if (spec.entry !== undefined || this.files.has(heap) || this.making.has(heap)) return false;
    if ((this.failures.get(heap) ?? 0) >= MAX_CODE_CACHE_ATTEMPTS) return false;
    const file = this.path(spec);
    if (file === null) return false;
    this.making.set(heap, file);
    return true;
  },

  /** Stores the cache a child of `spec` made (base64); false if it could not be stored. */
  store(spec: ChildSpec, base64: string): boolean {
    const file = this.making.get(spec.heapMb) ?? this.path(spec);
    this.making.delete(spec.heapMb);
    // Written whole, then renamed (another host process never reads half a file), under a name
    // no one can predict, created exclusively (never through a planted symlink), 0600.
    const partial = `${file}.${process.pid}.${threadId}.${randomBytes(8).toString("hex")}.partial`;
    let created = false;
    try {
      if (file === null || !isPrivateDir(dirname(file)))
        throw new Error("no safe directory for code caches");
      writeFileSync(partial, Buffer.from(base64, "base64"), { mode: 0o600, flag: "wx" });
      created = true;
      renameSync(partial, file);
      this.files.set(spec.heapMb, file);
      return true;
    } catch {
      if (created) rmSync(partial, { force: true });
      this.failed(spec);
      return false;
    }
  },

  /** The child making `spec`'s cache ended without one. */
  failed(spec: ChildSpec): void {
    if (!this.making.delete(spec.heapMb) && this.files.has(spec.heapMb)) return;
    this.failures.set(spec.heapMb, (this.failures.get(spec.heapMb) ?? 0) + 1);
  },

  /** V8 refused `file`, given to a child of `spec`: the next child makes a new one. */
  refused(spec: ChildSpec, file: string): void {
    if (this.files.get(spec.heapMb) !== file) return;
    this.files.delete(spec.heapMb);
    if (file === this.path(spec)) rmSync(file, { force: true });
    this.failures.set(spec.heapMb, (this.failures.get(spec.heapMb) ?? 0) + 1);
  },
};

/** `codehop-sandbox-<uid>` in the temp directory; null where there are no user ids or no temp directory. */
function privateCacheDirPath(): string | null {
  const uid = process.getuid?.();
  if (uid === undefined) return null;
  try {
    return join(realpathSync(tmpdir()), `codehop-sandbox-${uid}`);
  } catch {
    return null;
  }
}

/** Makes `dir` 0700 if absent; true when it is then safe to trust (see isPrivate). */
function ensurePrivateDir(dir: string): boolean {
  if (isPrivateDir(dir)) return true;
  try {
    mkdirSync(dir, { mode: 0o700 }); // fails (EEXIST) when anything is there already
    return isPrivateDir(dir);
  } catch {
    return false;
  }
}

/** True when `path` (not followed if a symlink) is ours, closed to others, and a directory or a regular file as asked. */
function isPrivate(path: string, kind: "dir" | "file"): boolean {
  try {
    const st = lstatSync(path);
    return (
      (kind === "dir" ? st.isDirectory() : st.isFile()) &&
      st.uid === process.getuid?.() &&
      (st.mode & 0o077) === 0
    );
  } catch {
    return false;
  }
}
const isPrivateDir = (dir: string) => isPrivate(dir, "dir");
const isPrivateFile = (file: string) => isPrivate(file, "file");

/** Children that may fail to make a heap size's code cache before no more are asked to. */
const MAX_CODE_CACHE_ATTEMPTS = 3;

/** True when an OS address-space limit can be applied (prlimit found). */
export const HAS_OS_MEMORY_LIMIT = PRLIMIT !== null;

/**
 * The action every child runs, through the protocol, before it counts as ready: a child's first
 * action otherwise pays ~10 ms more than later ones (V8 compiles and tunes the action path: the
 * run message, the wrapper, a tool call and its result, logging, the variables report). It runs
 * framework code only, with no session (action id 0, which no real action has), in a compartment
 * of its own as every action does; its values are not kept (the host's record of what the child
 * holds stays empty, so the first real action restores nothing from it).
 */
const WARMUP_CODE =
  'const r = await warmup("a", { n: 1, list: [1, "x"] });\nconst lines = [r, `${r.length}`].map((x) => JSON.stringify(x));\nconsole.log(lines.join(" "), { n: lines.length });';
const WARMUP_ID = 0;
let warmupLine: string | undefined;

function warmupRunLine(): string {
  if (warmupLine) return warmupLine;
  const built = buildAction(WARMUP_CODE, undefined);
  if ("error" in built) throw new Error(`sandbox warm-up action: ${built.error.message}`);
  warmupLine = encodeRunLine(
    {
      t: "run",
      id: WARMUP_ID,
      source: built.source,
      names: built.names,
      keep: [],
      mentioned: built.names.filter((n) => built.mentioned.has(n)),
      tools: ["warmup"],
      unserializable: {},
      limits: { ...DEFAULT_LIMITS },
      capabilities: { ...DEFAULT_CAPABILITIES },
    },
    [],
  );
  return warmupLine;
}

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
  /** Asked to send the SES code cache for its heap size before `ready` (see sesCodeCaches). */
  readonly makesCodeCache: boolean;
  private codeCacheSent = false;
  /** The code cache file it was given, if any. */
  private readonly codeCacheFile: string | null;
  /** Whether the child loaded SES with the code cache it was given (reported with `ready`). */
  codeCache: "used" | "rejected" | "none" | null = null;
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
  private readonly stdin: Writable;
  private readonly out: Readable;
  private readonly lines = new LineBuffer(MAX_LINE_CHARS);

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
    const codeCache = sesCodeCaches.fileFor(spec);
    this.codeCacheFile = codeCache ?? null;
    this.makesCodeCache = codeCache === undefined && sesCodeCaches.begin(spec);
    const nodeArgs = [
      `--max-old-space-size=${spec.heapMb}`,
      PERMISSION_FLAG,
      ...[
        ...CHILD_FILES,
        ...(spec.entry ? [spec.entry] : []),
        SES_PATH,
        ...(codeCache ? [codeCache] : []),
      ].map((f) => `--allow-fs-read=${f}`),
      "--allow-worker", // only for the orphan watchdog thread (see child/child.mjs)
      // (--disable-warning exists from Node 20.11; the warnings only reach our stderr buffer anyway)
      ...(CAN_DISABLE_WARNINGS
        ? ["--disable-warning=ExperimentalWarning", "--disable-warning=SecurityWarning"]
        : []),
      spec.entry ?? CHILD_ENTRY,
      SES_PATH,
      ...(SETPRIV ? [CHILD_PDEATHSIG_ARG] : []),
      ...(codeCache ? [`${CHILD_CODE_CACHE_ARG}=${codeCache}`] : []),
      ...(this.makesCodeCache ? [CHILD_MAKE_CODE_CACHE_ARG] : []),
    ];
    // setpriv and prlimit each set up the process, then exec the next program: one process.
    const node = SETPRIV
      ? [SETPRIV, "--pdeathsig", "KILL", "--", process.execPath, ...nodeArgs]
      : [process.execPath, ...nodeArgs];
    const [cmd, ...args] =
      spec.addressSpaceMb !== null && PRLIMIT
        ? [
            PRLIMIT,
            `--as=${Math.round(spec.addressSpaceMb * addressSpaceFactor) * 1024 * 1024}`,
            ...node,
          ]
        : node;
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
      // 'close' (after 'exit', once the child's pipes are drained): what it wrote to stderr before
      // dying — V8's out-of-memory report — is read before anyone decides how it died.
      this.proc.on("close", (code, signal) => this.resolveExit({ code, signal }));
      this.proc.on("error", () => this.resolveExit({ code: null, signal: null }));
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
        const lines = this.lines.push(chunk);
        if (lines === null) {
          this.kill("protocol");
          return;
        }
        for (const line of lines) {
          let msg: ChildMessage;
          try {
            msg = JSON.parse(line);
          } catch {
            this.kill("protocol");
            return;
          }
          if (typeof msg !== "object" || msg === null || typeof msg.t !== "string") {
            this.kill("protocol");
            return;
          }
          if (msg.t === "code-cache") {
            // Before `ready`, so before any guest code ran in this process (see sesCodeCaches);
            // only from the child asked for it, and once: anything else breaks the protocol.
            if (
              !this.makesCodeCache ||
              this.codeCacheSent ||
              this.codeCache !== null ||
              typeof msg.data !== "string"
            ) {
              this.kill("protocol");
              return;
            }
            this.codeCacheSent = true;
            sesCodeCaches.store(this.spec, msg.data);
          } else if (this.readyAt !== null) this.onMessage?.(msg);
          else if (msg.t === "ready") {
            if (this.makesCodeCache && !this.codeCacheSent) sesCodeCaches.failed(this.spec);
            if (msg.codeCache === "rejected" && this.codeCacheFile)
              sesCodeCaches.refused(this.spec, this.codeCacheFile);
            this.codeCache =
              msg.codeCache === "used"
                ? "used"
                : msg.codeCache === "rejected"
                  ? "rejected"
                  : "none";
            this.sendLine(warmupRunLine());
          } else if (msg.t === "call" && msg.id === WARMUP_ID)
            this.send({
              t: "result",
              id: WARMUP_ID,
              callIndex: msg.callIndex as number,
              ok: true,
              json: '"ok"',
            });
          else if (msg.t === "done" && msg.id === WARMUP_ID) {
            if (msg.error) {
              this.kill("warm-up failed");
              return;
            }
            this.readyAt = performance.now();
            resolve();
          }
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
  send(msg: HostMessage): void {
    this.sendLine(encodeLine(msg));
  }

  /** Writes one protocol line made by the protocol module (ignored once dead). */
  sendLine(line: string): void {
    if (this.dead) return;
    this.stdin.write(line);
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
  /** Actions that waited for their process (queued, starting, or the pool spawning) 1 ms or more. */
  waits = 0;
  /** Total wall time those actions waited, in ms (see {@link ChildPool.noteWait}). */
  waitMs = 0;

  /**
   * @param warm idle children that never ran an action, started ahead of time for new sessions
   *   (and re-started after a kill or when one gets bound to a session)
   * @param maxIdle idle children kept after use for their session's next action (the processes a
   *   nested agent run needed are reused by its next step instead of being killed and spawned again)
   * @param maxProcesses children alive at once (at least `warm`); see the class comment for nesting
   */
  constructor(
    private readonly defaultSpec: ChildSpec,
    private readonly warm: number,
    private readonly maxIdle: number = Math.max(warm, DEFAULT_MAX_IDLE),
    readonly maxProcesses: number = Math.max(warm, DEFAULT_MAX_PROCESSES),
  ) {
    if (maxProcesses < Math.max(1, warm))
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `maxProcesses (${maxProcesses}) must be at least 1 and at least the warm pool size (${warm})`,
      );
    this.replenish();
  }

  private sameSpec(a: ChildSpec, b: ChildSpec): boolean {
    return a.heapMb === b.heapMb && a.addressSpaceMb === b.addressSpaceMb && a.entry === b.entry;
  }

  private spawnChild(spec: ChildSpec): SandboxChild {
    const child = new SandboxChild(spec, this.addressSpaceFactor);
    this.all.add(child);
    this.peakSize = Math.max(this.peakSize, this.all.size);
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
    if (wasFresh) this.scheduleUpkeep();
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

  /** Tops the idle set up to `warm` fresh children of the default spec (never past the cap or a queue). */
  replenish(): void {
    if (this.closed) return;
    let fresh = this.idle.filter(
      (c) =>
        c.session === null &&
        !c.dead &&
        c.killedBy === null &&
        this.sameSpec(c.spec, this.defaultSpec),
    ).length;
    while (fresh < this.warm && this.all.size < this.maxProcesses && this.waiters.length === 0) {
      this.idle.push(this.spawnChild(this.defaultSpec));
      fresh++;
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
      this.replenish();
      this.trimIdle();
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
