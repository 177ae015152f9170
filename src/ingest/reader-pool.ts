import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import pLimit from "p-limit";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { DocumentKind, FormatOutput } from "./format-types.ts";
import { InputLimitError, limitError } from "./reader-limits.ts";
import type { ReaderFailure, ReaderJob, ReaderReply, ReaderWarmUp } from "./reader-process.ts";

/**
 * Reader processes: every extraction runs in a child process of its own, never on the thread
 * that asked (a server's requests, runs and heartbeats go on meanwhile), within the job's limits:
 *
 * - memory: the V8 heap capped at `memoryMb` (`--max-old-space-size`), and the process's resident
 *   size polled from /proc every {@link POLL_MS} ms — buffers a parser allocates (PDF.js inflating
 *   a stream) are not on the V8 heap, and a worker thread's could not be told apart from its
 *   parent's;
 * - time: `timeoutMs` of the process's CPU time (from /proc where Linux tells it, so a loaded
 *   machine does not make a file fail; wall time elsewhere), counted once the reader's code is
 *   loaded, with the wall clock as a backstop several times longer;
 * - the caller's signal.
 *
 * Past a limit the process is killed — the only way to stop synchronous parsing — and the file
 * refused with an INPUT_LIMIT error naming the limit (or the signal's reason). Processes that
 * finish a file are kept for the next one for a while (unreferenced: they never keep the parent
 * alive, and die with it); at most {@link MAX_READER_PROCESSES} read at once per process, the
 * rest wait their turn.
 */

/** Reads at once per process: each may hold a whole parsed document. */
export const MAX_READER_PROCESSES = Math.max(1, Math.min(4, availableParallelism()));

/** How long an idle reader process is kept for the next file (ms). */
const IDLE_MS = 30_000;

/** How long a process may take to start and load a reader's code (ms; tsx compiles it in tests). */
const LOAD_TIMEOUT_MS = 120_000;

/** How often a running read's memory and CPU time are looked at (ms). */
const POLL_MS = 25;

/** The wall-clock backstop of a read: this many times its CPU deadline, and at least MIN_WALL_MS. */
const WALL_FACTOR = 8;
const MIN_WALL_MS = 30_000;

/** Files of at least this size are handed to a reader through a temporary file, not IPC. */
const FILE_HANDOVER_BYTES = 1024 * 1024;

let handover: string | undefined;
/** This process's private directory (0700) for handing files to readers. */
function handoverDir(): string {
  if (!handover || !existsSync(handover)) {
    const dir = mkdtempSync(join(tmpdir(), "codehop-reader-"));
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
    handover = dir;
  }
  return handover;
}

/** setpriv makes the kernel kill a reader whose parent died, even mid-parse. */
const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));

const PAGE_BYTES = 4096;
const CLOCK_TICK_MS = 10;

const queue = pLimit(MAX_READER_PROCESSES);
/**
 * Idle processes by memory limit (a process's heap cap is fixed when it starts) and family of
 * readers: a process keeps the libraries it loaded (PDF.js, mammoth, SheetJS), and a process that
 * loaded them all would start every read with less of its memory limit left.
 */
const idle = new Map<string, ReaderProcess[]>();

/** The family of readers a type's reader belongs to (see `idle`). */
function familyOf(kind: DocumentKind): string {
  if (kind === "pdf" || kind === "docx") return kind;
  if (kind === "xlsx" || kind === "ods" || kind === "xls" || kind === "csv") return "sheet";
  return "text";
}
let nextId = 1;

/** Reads running and waiting now, and the maximum at once (for tests and diagnostics). */
export function readerStats(): { running: number; waiting: number; max: number } {
  return { running: queue.activeCount, waiting: queue.pendingCount, max: MAX_READER_PROCESSES };
}

const FROM_SOURCES = import.meta.url.endsWith(".ts");

/**
 * In a clone running its TypeScript sources (the tests, tsx), the built reader while dist/ is
 * current with the sources, as bin/codehop.mjs decides for the CLI (bin/dist-current.mjs): the
 * same code without tsx compiling it at every reader's start (~0.7 s of CPU each). Undefined when
 * the build is missing or stale, or codehop runs from its build anyway.
 */
const BUILT_READER: string | undefined = FROM_SOURCES ? await currentBuiltReader() : undefined;

async function currentBuiltReader(): Promise<string | undefined> {
  const built = fileURLToPath(new URL("../../dist/ingest/reader-process.js", import.meta.url));
  const check = new URL("../../bin/dist-current.mjs", import.meta.url);
  if (!existsSync(built) || !existsSync(fileURLToPath(check))) return undefined;
  try {
    const { whyDistIsStale } = (await import(check.href)) as { whyDistIsStale(): unknown };
    return whyDistIsStale() === undefined ? built : undefined;
  } catch {
    return undefined; // cannot tell: the sources through tsx
  }
}

/** The reader program, and tsx's loader when codehop runs from its TypeScript sources. */
function readerProgram(): { entry: string; loader?: string } {
  if (BUILT_READER) return { entry: BUILT_READER };
  const entry = fileURLToPath(
    new URL(`./reader-process.${FROM_SOURCES ? "ts" : "js"}`, import.meta.url),
  );
  if (!FROM_SOURCES) return { entry };
  const loader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
  return { entry, loader };
}

/** Resident size (MB) and CPU time (ms) of process `pid`, or undefined off Linux or once gone. */
function usage(pid: number): { rssMb: number; cpuMs: number } | undefined {
  try {
    // Two small /proc files, read synchronously: microseconds.
    const statm = readFileSync(`/proc/${pid}/statm`, "latin1");
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    const rssMb = (Number(statm.split(" ")[1]) * PAGE_BYTES) / (1024 * 1024);
    // Fields are counted after the command name's ")" (it may hold spaces).
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const cpuMs = (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_MS;
    return Number.isFinite(rssMb) && Number.isFinite(cpuMs) ? { rssMb, cpuMs } : undefined;
  } catch {
    return undefined;
  }
}

class ReaderProcess {
  readonly child: ChildProcess;
  private idleTimer?: NodeJS.Timeout;
  /** Set once the process died or was killed. */
  dead = false;
  /** The end of its stderr, for a crash's message. */
  stderrTail = "";

  constructor(
    readonly memoryMb: number,
    /** Its key in `idle`. */
    readonly key: string,
  ) {
    const { entry, loader } = readerProgram();
    const node = [
      process.execPath,
      `--max-old-space-size=${memoryMb}`,
      ...(loader ? ["--import", loader] : []),
      entry,
    ];
    const [cmd, ...args] = SETPRIV ? [SETPRIV, "--pdeathsig", "KILL", "--", ...node] : node;
    this.child = spawn(cmd, args, {
      // No secrets and no NODE_OPTIONS reach a reader: it needs none.
      env: {},
      stdio: ["ignore", "ignore", "pipe", "ipc"],
      serialization: "advanced",
    });
    this.child.stderr!.setEncoding("utf8");
    this.child.stderr!.on("data", (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-2000);
    });
    this.child.on("exit", () => (this.dead = true));
    this.child.on("error", () => (this.dead = true));
  }

  park(): void {
    this.child.unref();
    this.child.channel?.unref();
    (this.child.stderr as unknown as { unref?: () => void }).unref?.();
    this.idleTimer = setTimeout(() => this.kill(), IDLE_MS);
    this.idleTimer.unref();
  }

  wake(): void {
    clearTimeout(this.idleTimer);
    this.child.ref();
    this.child.channel?.ref();
    (this.child.stderr as unknown as { ref?: () => void }).ref?.();
  }

  kill(): void {
    this.dead = true;
    clearTimeout(this.idleTimer);
    const list = idle.get(this.key);
    if (list)
      idle.set(
        this.key,
        list.filter((p) => p !== this),
      );
    this.child.kill("SIGKILL");
  }
}

function takeProcess(memoryMb: number, kind: DocumentKind): ReaderProcess {
  const key = `${memoryMb}:${familyOf(kind)}`;
  const list = idle.get(key) ?? [];
  let reader: ReaderProcess | undefined;
  while ((reader = list.pop())) {
    if (!reader.dead) {
      reader.wake();
      return reader;
    }
  }
  return new ReaderProcess(memoryMb, key);
}

/**
 * Starts a process for `key`'s readers in the place of one just killed, loading the reader of
 * `kind` while it waits: the file after a refused bomb does not wait for a process to start.
 */
function startSpare(memoryMb: number, kind: DocumentKind): void {
  const key = `${memoryMb}:${familyOf(kind)}`;
  if ((idle.get(key) ?? []).some((p) => !p.dead)) return;
  const spare = new ReaderProcess(memoryMb, key);
  spare.child.send({ warm: kind } satisfies ReaderWarmUp, () => {});
  giveBack(spare);
}

function giveBack(reader: ReaderProcess): void {
  if (reader.dead) return;
  reader.park();
  const list = idle.get(reader.key) ?? [];
  list.push(reader);
  idle.set(reader.key, list);
}

/** What one read cost its reader process (for benchmarks and diagnostics). */
export interface ReaderUsage {
  /** Peak resident size of the reader process during the read (MB), where Linux tells it. */
  peakRssMb?: number;
  /** CPU time the read took (ms), where Linux tells it. */
  cpuMs?: number;
  /** Wall time from sending the file to the answer (ms), loading the reader's code included. */
  wallMs: number;
}

/** Resets the peak resident size Linux keeps for `pid` (VmHWM); false where it cannot. */
function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
    return true;
  } catch {
    return false;
  }
}

/** The peak resident size (MB) of `pid` since its last reset, or undefined. */
function peakRssMb(pid: number): number | undefined {
  try {
    const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "latin1"))?.[1];
    return kb ? Number(kb) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** The error a reader reported, as the CodehopError it was. */
function fromFailure(failure: ReaderFailure): CodehopError {
  if (failure.code === ErrorCodes.INPUT_LIMIT && failure.limit) {
    const err = new InputLimitError(failure.file ?? "", failure.limit, failure.max ?? 0, "");
    err.message = failure.message;
    return err;
  }
  const code = (Object.values(ErrorCodes) as string[]).includes(failure.code ?? "")
    ? (failure.code as CodehopError["code"])
    : ErrorCodes.INPUT_INVALID;
  return new CodehopError(code, failure.message);
}

/**
 * Reads `job` in a reader process (see the module comment). Resolves with the reader's output;
 * rejects with its CodehopError, an INPUT_LIMIT error for time or memory, or `signal`'s reason.
 */
export function readInProcess(
  job: Omit<ReaderJob, "id">,
  signal?: AbortSignal,
  onUsage?: (usage: ReaderUsage) => void,
): Promise<FormatOutput> {
  signal?.throwIfAborted();
  let started = false;
  const run = queue(() => {
    started = true;
    signal?.throwIfAborted();
    return readOnce(job, signal, onUsage);
  });
  if (!signal) return run;
  // Waiting for a process ends with the signal too (the queued read then never starts); a
  // running read ends through its own handler, once its process is killed.
  return new Promise<FormatOutput>((resolve, reject) => {
    const onAbort = () => {
      if (!started) reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    run.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function readOnce(
  job: Omit<ReaderJob, "id">,
  signal?: AbortSignal,
  onUsage?: (usage: ReaderUsage) => void,
): Promise<FormatOutput> {
  const { limits } = job;
  const reader = takeProcess(limits.memoryMb, job.kind);
  const { child } = reader;
  const id = nextId++;
  const sentAt = performance.now();
  const peakKnown = onUsage !== undefined && resetPeak(child.pid!);
  const cleanups: (() => void)[] = [];
  /** The process's CPU time when the read started (its code loaded). */
  let baseCpuMs: number | undefined;
  return new Promise<FormatOutput>((resolve, reject) => {
    let settled = false;
    // Only a machine too loaded to start a process gets here: the file is refused for time.
    let timer = setTimeout(
      () => fail(limitError(job.name, "timeoutMs", LOAD_TIMEOUT_MS, "starting its reader"), true),
      LOAD_TIMEOUT_MS,
    );
    const settle = (kill: boolean) => {
      settled = true;
      for (const cleanup of cleanups.splice(0)) cleanup();
      if (onUsage) {
        const cpuNow = baseCpuMs === undefined ? undefined : usage(child.pid!)?.cpuMs;
        onUsage({
          ...(peakKnown ? { peakRssMb: peakRssMb(child.pid!) } : {}),
          ...(cpuNow !== undefined ? { cpuMs: cpuNow - baseCpuMs! } : {}),
          wallMs: performance.now() - sentAt,
        });
      }
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      child.off("message", onMessage);
      child.off("close", onExit);
      if (kill) {
        reader.kill();
        startSpare(limits.memoryMb, job.kind);
      } else giveBack(reader);
    };
    const fail = (err: unknown, kill: boolean) => {
      if (settled) return;
      settle(kill);
      reject(err);
    };
    const timedOut = () =>
      fail(limitError(job.name, "timeoutMs", limits.timeoutMs, "reading it"), true);
    const tooBig = () =>
      fail(limitError(job.name, "memoryMb", limits.memoryMb, "the memory needed to read it"), true);
    /**
     * Watches the process until the read settles: its resident size against `memoryMb`, its CPU
     * time since now against `timeoutMs`. False when /proc cannot tell (then the deadline is
     * wall time).
     */
    const watch = async (): Promise<boolean> => {
      baseCpuMs = usage(child.pid!)?.cpuMs;
      if (baseCpuMs === undefined) return false;
      while (!settled) {
        await new Promise((r) => setTimeout(r, POLL_MS));
        const now = usage(child.pid!);
        if (settled || now === undefined) return true;
        if (now.rssMb > limits.memoryMb) tooBig();
        else if (now.cpuMs - baseCpuMs > limits.timeoutMs) timedOut();
      }
      return true;
    };
    const onMessage = (reply: ReaderReply) => {
      if (reply.id !== id || settled) return;
      if (reply.type === "loaded") {
        const wall = (ms: number) => {
          clearTimeout(timer);
          if (!settled) timer = setTimeout(timedOut, ms);
        };
        wall(Math.max(WALL_FACTOR * limits.timeoutMs, MIN_WALL_MS));
        void watch().then((watched) => watched || wall(limits.timeoutMs));
      } else if (reply.type === "done") {
        settle(false);
        resolve(reply.result);
      } else fail(fromFailure(reply.error), false);
    };
    const onExit = (code: number | null, sig: NodeJS.Signals | null) => {
      // The V8 heap cap ends a process with a fatal "heap out of memory" (SIGABRT or code 134).
      if (/heap out of memory|allocation failed/i.test(reader.stderrTail)) return tooBig();
      fail(
        new CodehopError(
          ErrorCodes.INPUT_INVALID,
          `${job.name} could not be read: its reader process ended (${sig ?? `code ${code}`}).`,
        ),
        true,
      );
    };
    const onAbort = () => fail(signal!.reason, true);
    signal?.addEventListener("abort", onAbort, { once: true });
    child.on("message", onMessage);
    child.once("close", onExit);
    // A large file goes through a private temporary file, removed once the read settles.
    let message: ReaderJob = { ...job, id };
    if (job.bytes.length >= FILE_HANDOVER_BYTES) {
      const file = join(handoverDir(), `${process.pid}-${id}`);
      writeFileSync(file, job.bytes, { mode: 0o600, flag: "wx" });
      cleanups.push(() => rmSync(file, { force: true }));
      message = { ...message, bytes: new Uint8Array(0), bytesFile: file };
    }
    child.send(message, (err) => {
      if (err)
        fail(
          new CodehopError(
            ErrorCodes.INPUT_INVALID,
            `${job.name} could not be read: its reader process did not take it (${err.message}).`,
          ),
          true,
        );
    });
  });
}
