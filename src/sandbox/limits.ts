/**
 * Sandbox limits and capabilities as named constants. Every limit is enforced outside the guest's
 * reach: wall-clock time and memory by the host / the OS, the rest by trusted code in the child
 * (and re-checked on the host where it matters).
 */
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { SandboxLimits } from "./contract.ts";

/** Wall-clock time per action before the child is SIGKILLed (the default: 30 s). */
export const DEFAULT_TIMEOUT_MS = 30_000;
/** V8 old-space heap per child process, MB (`--max-old-space-size`). */
export const DEFAULT_MAX_HEAP_MB = 256;
/** Captured console output per action, characters; beyond it head and tail are kept. */
export const DEFAULT_MAX_OUTPUT_CHARS = 20_000;
/** Tool calls per action (a runaway `for` loop of calls is refused, not executed). */
export const DEFAULT_MAX_TOOL_CALLS = 200;
/** Tool calls of one action running at the same time; further calls queue in call order. */
export const DEFAULT_MAX_CONCURRENT_TOOL_CALLS = 8;
/** Size of one tool argument list, tool result, final answer or carried-over variable, as JSON bytes. */
export const DEFAULT_MAX_VALUE_BYTES = 1_000_000;
/** Nesting depth of values crossing the boundary. */
export const DEFAULT_MAX_VALUE_DEPTH = 64;
/**
 * OS address-space limit per child (RLIMIT_AS via prlimit), MB. Catches what the V8 heap limit
 * does not: ArrayBuffers and other off-heap allocations. An idle child already maps ~700 MB of
 * address space (V8 reservations; with MALLOC_ARENA_MAX=1), so this is heap + headroom, not
 * physical memory: with the default heap, roughly 300-550 MB remain for off-heap buffers.
 */
export const DEFAULT_MAX_ADDRESS_SPACE_MB = 1_280;
/** Time a child may keep running after its action ended (code after final_answer) before it is replaced. */
export const IDLE_GRACE_MS = 250;
/** Guest source code size accepted per action, characters. */
export const MAX_CODE_CHARS = 200_000;
/**
 * Child processes a sandbox keeps alive at once (idle, busy or finishing), unless configured
 * otherwise (`createSandbox({ maxProcesses })`). Each costs ~50 MB RSS idle and up to its heap limit
 * busy; actions beyond the cap wait for a process, and their deadline starts once they have one.
 * 16 leaves room for the reference app's fan-out (a manager's sub-agents each awaiting their own
 * sub-agents) on a 2-core machine.
 */
export const DEFAULT_MAX_PROCESSES = 16;
/**
 * Processes allowed beyond `maxProcesses` to break a nesting deadlock: when every process is held
 * by an action that waits (through tool calls) for an action still queued, the deepest queued
 * action gets an extra process. Past this many extras it fails with a `SandboxBusyError` instead.
 */
export const MAX_NESTING_EXTRA_PROCESSES = 8;

/** Default limits (see the constants above). */
export const DEFAULT_LIMITS: Readonly<SandboxLimits> = Object.freeze({
  timeoutMs: DEFAULT_TIMEOUT_MS,
  maxHeapMb: DEFAULT_MAX_HEAP_MB,
  maxOutputChars: DEFAULT_MAX_OUTPUT_CHARS,
  maxToolCalls: DEFAULT_MAX_TOOL_CALLS,
  maxConcurrentToolCalls: DEFAULT_MAX_CONCURRENT_TOOL_CALLS,
  maxValueBytes: DEFAULT_MAX_VALUE_BYTES,
  maxValueDepth: DEFAULT_MAX_VALUE_DEPTH,
});

/**
 * What guest code may use beyond plain ECMAScript (the JS counterpart of smolagents' authorized
 * imports). Always present: JSON, Object/Array/String/..., Map/Set/WeakMap, Promise, RegExp, Proxy,
 * Reflect, integer typed arrays, ArrayBuffer, DataView, TextEncoder/TextDecoder, BigInt, Symbol,
 * console.log/print, final_answer and the tools. Never present: require, import(), process, timers,
 * fetch, WebAssembly, SharedArrayBuffer/Atomics, structuredClone.
 */
export interface SandboxCapabilities {
  /** `Math.random()` works (otherwise it throws). Default true. */
  mathRandom: boolean;
  /** `Date.now()` and `new Date()` give the current time (otherwise they throw). Default true. */
  dateNow: boolean;
  /** `Float32Array` / `Float64Array` (SES withholds them by default: NaN bit-pattern side channel). Default true. */
  floatArrays: boolean;
  /** `Intl` (hardened; reveals the host's locale and time zone). Default true. */
  intl: boolean;
}

/** Default capabilities: everything in {@link SandboxCapabilities} enabled. */
export const DEFAULT_CAPABILITIES: Readonly<SandboxCapabilities> = Object.freeze({
  mathRandom: true,
  dateNow: true,
  floatArrays: true,
  intl: true,
});

const LIMIT_BOUNDS: Record<keyof SandboxLimits, [number, number]> = {
  timeoutMs: [1, 3_600_000],
  maxHeapMb: [16, 65_536],
  maxOutputChars: [100, 100_000_000],
  maxToolCalls: [0, 1_000_000],
  maxConcurrentToolCalls: [1, 10_000],
  maxValueBytes: [16, 1_000_000_000],
  maxValueDepth: [1, 10_000],
};

/** Merges overrides into `base`, rejecting unknown keys and out-of-range values (CONFIG_INVALID). */
export function resolveLimits(
  base: SandboxLimits,
  overrides?: Partial<SandboxLimits>,
): SandboxLimits {
  const out: SandboxLimits = { ...base };
  for (const [key, value] of Object.entries(overrides ?? {})) {
    if (value === undefined) continue;
    if (!(key in LIMIT_BOUNDS)) {
      throw new CodehopError(ErrorCodes.CONFIG_INVALID, `Unknown sandbox limit "${key}"`);
    }
    const [min, max] = LIMIT_BOUNDS[key as keyof SandboxLimits];
    if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `Sandbox limit ${key} must be an integer between ${min} and ${max}, got ${String(value)}`,
      );
    }
    out[key as keyof SandboxLimits] = value;
  }
  return out;
}

/** Merges capability overrides into the defaults, rejecting unknown keys. */
export function resolveCapabilities(overrides?: Partial<SandboxCapabilities>): SandboxCapabilities {
  const out: SandboxCapabilities = { ...DEFAULT_CAPABILITIES };
  for (const [key, value] of Object.entries(overrides ?? {})) {
    if (value === undefined) continue;
    if (!(key in DEFAULT_CAPABILITIES) || typeof value !== "boolean") {
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `Unknown or non-boolean sandbox capability "${key}"`,
      );
    }
    out[key as keyof SandboxCapabilities] = value;
  }
  return out;
}
