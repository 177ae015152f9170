/**
 * The code-action sandbox: `createSandbox()` returns a {@link CodeSandbox} whose `run()` evaluates
 * one model-written JavaScript action in an SES Compartment inside a locked-down child process.
 *
 * This module is the face: options, validation and exports. One action's host side is
 * session.ts, the process pool pool.ts (processes: child-launch.ts, child-process.ts), the wrapper
 * transform.ts, the child child/.
 */
import { CodehopError, ErrorCodes } from "../errors.ts";
import {
  DEFAULT_LIMITS,
  DEFAULT_MAX_ADDRESS_SPACE_MB,
  DEFAULT_MAX_PROCESSES,
  resolveCapabilities,
  resolveLimits,
  type SandboxCapabilities,
} from "./limits.ts";
import { HAS_OS_MEMORY_LIMIT, type ChildSpec } from "./child-launch.ts";
import { ChildPool, DEFAULT_MAX_IDLE, DEFAULT_MAX_POOL_SIZE } from "./pool.ts";
import { runAction } from "./session.ts";
import { librariesCapabilityLine, prepareLibraries, type LibrarySpec } from "./libraries.ts";
import {
  isBindableName,
  RESERVED_GLOBALS,
  type ActionResult,
  type CodeSandbox,
  type RunActionRequest,
  type SandboxLimits,
} from "./contract.ts";

export type * from "./contract.ts";
export {
  RESERVED_GLOBALS,
  isBindableName,
  toolNameProblem,
  GUEST_CAPABILITIES,
} from "./contract.ts";
export {
  DEFAULT_LIMITS,
  DEFAULT_CAPABILITIES,
  DEFAULT_TIMEOUT_MS,
  DEFAULT_MAX_HEAP_MB,
  DEFAULT_MAX_OUTPUT_CHARS,
  DEFAULT_MAX_TOOL_CALLS,
  DEFAULT_MAX_CONCURRENT_TOOL_CALLS,
  DEFAULT_MAX_VALUE_BYTES,
  DEFAULT_MAX_VALUE_DEPTH,
  DEFAULT_MAX_ADDRESS_SPACE_MB,
  DEFAULT_MAX_PROCESSES,
  MAX_NESTING_EXTRA_PROCESSES,
  type SandboxCapabilities,
} from "./limits.ts";
export { HAS_OS_MEMORY_LIMIT } from "./child-launch.ts";
export {
  DEFAULT_LIBRARIES,
  parseLibrariesSetting,
  type LibrarySpec,
  type PreparedLibrary,
} from "./libraries.ts";

/** Options of {@link createSandbox}. */
export interface SandboxOptions {
  /** Limits for every action (per-action overrides go in `run({ limits })`). */
  limits?: Partial<SandboxLimits>;
  /** Idle child processes started ahead of time (default 1). More are spawned on demand for concurrent actions. */
  poolSize?: number;
  /**
   * Most fresh child processes started ahead while new agent runs come quickly one after another
   * (default max(poolSize, 6), at most `maxProcesses`; 0 with `poolSize` 0): the warm pool grows with the observed rate of
   * new runs times the time a process takes to start, and shrinks back to `poolSize` once no run
   * started for 15 s. Each idle child costs ~50 MB RSS. `poolSize` turns the growth off.
   */
  maxPoolSize?: number;
  /**
   * Start children from a small launcher process instead of the host (default false): the host's
   * event loop no longer stops in `spawn()` (a fork of the host: a few ms per agent run, ~20 ms in
   * a 640 MB host, tens of ms on a loaded machine). Children are the same processes with the same
   * limits; their parent is the launcher, which dies with the host and takes them with it
   * (docs/sandbox.md). "auto": through the launcher once the pool has started
   * `AUTO_LAUNCHER_AFTER` (6) children directly, so a one-shot run does not pay the launcher's own
   * start; the default sandbox of agents (src/core/default-sandbox.ts) uses it.
   */
  launcher?: boolean | "auto";
  /**
   * Idle children kept after use (default max(poolSize, 4)): a nested agent run needs one process
   * per in-flight action, and keeping them makes its next step start warm. Each costs ~50 MB RSS.
   */
  maxIdle?: number;
  /** What guest code may use beyond plain ECMAScript (see {@link SandboxCapabilities}). */
  capabilities?: Partial<SandboxCapabilities>;
  /** OS address-space limit per child in MB (prlimit; default 1280; null disables). */
  maxAddressSpaceMb?: number | null;
  /**
   * Child processes alive at once, idle or busy (default 16, at least `poolSize`). Actions beyond it
   * wait for a process (their deadline starts when they get one). Nested actions that would
   * deadlock at the cap get up to MAX_NESTING_EXTRA_PROCESSES extra processes (docs/sandbox.md).
   */
  maxProcesses?: number;
  /**
   * Authorized libraries (operator configuration, off by default): npm packages guest code may use,
   * each as a frozen global and through `import`/`require` (src/sandbox/libraries.ts,
   * docs/sandbox.md). A package that cannot be used throws CODEHOP_SANDBOX_LIBRARY_REFUSED here
   * (the checks on its files) or from `run()` (it reached for I/O while loading).
   */
  libraries?: readonly LibrarySpec[];
}

/** Live figures of a sandbox's pool (tests, benchmarks, monitoring). */
export interface SandboxStats {
  /** Child processes alive now (idle, busy, finishing or dying). */
  readonly processCount: number;
  /** Most child processes alive at once so far. */
  readonly peakProcessCount: number;
  /** Actions waiting for a process (over `maxProcesses`). */
  readonly queuedActions: number;
  /**
   * Actions that waited 1 ms or more for their process (queued at the cap, a process still
   * starting, a spawn on the spot) since the sandbox was created.
   */
  readonly processWaits: number;
  /** Total wall time those actions waited for their process, in ms. */
  readonly processWaitMs: number;
}

export { TOTAL_ARGS_FACTOR } from "./child/protocol.mjs";
export { UNDEFINED_NOTE } from "./transform.ts";
export { emptySnapshot } from "./session.ts";

/**
 * Creates a sandbox backed by a warm pool of child processes. Call `close()` when done; idle
 * children never keep the host process alive, so forgetting it only leaks the processes until the
 * host exits.
 */
export function createSandbox(
  options: SandboxOptions = {},
): CodeSandbox & SandboxStats & Required<Pick<CodeSandbox, "prepare" | "endSession">> {
  const baseLimits = resolveLimits(DEFAULT_LIMITS, options.limits);
  const capabilities = resolveCapabilities(options.capabilities);
  const poolSize = options.poolSize ?? 1;
  if (!Number.isInteger(poolSize) || poolSize < 0 || poolSize > 64) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `poolSize must be an integer between 0 and 64, got ${String(poolSize)}`,
    );
  }
  const addressSpaceMb =
    options.maxAddressSpaceMb === undefined
      ? DEFAULT_MAX_ADDRESS_SPACE_MB
      : options.maxAddressSpaceMb;
  if (addressSpaceMb !== null && (!Number.isInteger(addressSpaceMb) || addressSpaceMb < 512)) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `maxAddressSpaceMb must be an integer >= 512 or null, got ${String(addressSpaceMb)}`,
    );
  }
  const specFor = (limits: SandboxLimits): ChildSpec => ({
    heapMb: limits.maxHeapMb,
    ...(bundle.file ? { libraries: bundle.file } : {}),
    // The address-space limit must leave room for the heap itself.
    addressSpaceMb:
      addressSpaceMb === null || !HAS_OS_MEMORY_LIMIT
        ? null
        : Math.max(addressSpaceMb, limits.maxHeapMb + 1024),
  });
  const maxIdle = options.maxIdle ?? Math.max(poolSize, DEFAULT_MAX_IDLE);
  if (!Number.isInteger(maxIdle) || maxIdle < poolSize || maxIdle > 256) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `maxIdle must be an integer between poolSize and 256, got ${String(maxIdle)}`,
    );
  }
  const maxProcesses = options.maxProcesses ?? Math.max(poolSize, DEFAULT_MAX_PROCESSES);
  if (
    !Number.isInteger(maxProcesses) ||
    maxProcesses < Math.max(1, poolSize) ||
    maxProcesses > 1024
  ) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `maxProcesses must be an integer between max(1, poolSize) and 1024, got ${String(maxProcesses)}`,
    );
  }
  // (poolSize 0 asks for no process started ahead: no growth either, unless asked for.)
  const maxPoolSize =
    options.maxPoolSize ??
    (poolSize === 0 ? 0 : Math.min(maxProcesses, Math.max(poolSize, DEFAULT_MAX_POOL_SIZE)));
  if (!Number.isInteger(maxPoolSize) || maxPoolSize < poolSize || maxPoolSize > maxProcesses) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `maxPoolSize must be an integer between poolSize and maxProcesses, got ${String(maxPoolSize)}`,
    );
  }
  if (
    options.launcher !== undefined &&
    typeof options.launcher !== "boolean" &&
    options.launcher !== "auto"
  ) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `launcher must be true, false or "auto", got ${String(options.launcher)}`,
    );
  }
  // Last of the checks: it writes the bundle file (removed again by close()).
  const bundle = prepareLibraries(options.libraries ?? []);
  const capabilityLine = librariesCapabilityLine(bundle.libraries);
  const libraryGlobals = new Set(
    bundle.libraries.length ? [...bundle.libraries.map((l) => l.global), "require"] : [],
  );
  const pool = new ChildPool(
    specFor(baseLimits),
    poolSize,
    maxIdle,
    maxProcesses,
    maxPoolSize,
    options.launcher === "auto" ? "auto" : options.launcher === true,
  );
  let closed = false;

  return {
    guestCapabilities: capabilityLine ? [capabilityLine] : [],
    get processCount() {
      return pool.size;
    },
    get peakProcessCount() {
      return pool.peakSize;
    },
    get queuedActions() {
      return pool.queued;
    },
    get processWaits() {
      return pool.waits;
    },
    get processWaitMs() {
      return pool.waitMs;
    },
    prepare(session: string) {
      if (!closed && typeof session === "string") pool.prepare(session);
    },
    endSession(session: string) {
      if (typeof session === "string") pool.endSession(session);
    },
    async run(request: RunActionRequest): Promise<ActionResult> {
      if (closed)
        throw new CodehopError(ErrorCodes.SANDBOX_INTERNAL, "The sandbox has been closed");
      const limits = resolveLimits(baseLimits, request.limits);
      const tools = request.tools ?? {};
      for (const [name, fn] of Object.entries(tools)) {
        if (!isBindableName(name) || RESERVED_GLOBALS.has(name) || libraryGlobals.has(name)) {
          throw new CodehopError(
            ErrorCodes.CONFIG_INVALID,
            `"${name}" cannot be used as a tool name in the sandbox`,
          );
        }
        if (typeof fn !== "function")
          throw new CodehopError(ErrorCodes.CONFIG_INVALID, `Tool "${name}" is not a function`);
      }
      return runAction(pool, specFor(limits), request, limits, capabilities, bundle.libraries);
    },
    async close() {
      closed = true;
      await pool.close();
      bundle.dispose();
    },
  };
}
