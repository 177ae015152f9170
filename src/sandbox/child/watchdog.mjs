// @ts-check
/**
 * Orphan watchdog: if the host dies without closing us (SIGKILL, crash) while guest code spins,
 * nobody would ever kill this process. A worker thread keeps running while the main thread is
 * busy; it kills the whole process once the parent is gone (we get re-parented). Started right
 * after `ready` (child.mjs), so its ~40 ms of startup overlap the first action instead of delaying
 * readiness. Not needed when the host started us with a parent-death signal (`setpriv --pdeathsig
 * KILL`, argument "pdeathsig"): the kernel then kills us the moment the host dies (strictly: the
 * host thread that spawned us ends, e.g. a worker_threads Worker that created the sandbox).
 *
 * Imported by child.mjs before lockdown.mjs: node:worker_threads (and the stream modules it pulls
 * in, ~4 ms) is loaded only when the watchdog will run, and then before the realm is locked down.
 */
import { createRequire } from "node:module";
import { process } from "./commons.mjs";
import { CHILD_PDEATHSIG_ARG, childArg } from "./protocol.mjs";

const KILLED_WITH_HOST = childArg(process.argv, CHILD_PDEATHSIG_ARG) === true;
/** @type {typeof import("node:worker_threads").Worker | undefined} */
const Worker = KILLED_WITH_HOST
  ? undefined
  : // (a built-in resolves from any file: the entry, child.mjs or the bundle child.cjs)
    createRequire(process.argv[1])("node:worker_threads").Worker;

/** Starts the watchdog thread, unless the kernel kills us with the host. */
export function startWatchdog() {
  if (!Worker) return;
  const hostPid = process.ppid;
  const watchdog = new Worker(
    `const { workerData } = require("node:worker_threads");
     setInterval(() => { if (process.ppid !== workerData.hostPid) process.kill(process.pid, "SIGKILL"); }, 500);`,
    {
      eval: true,
      workerData: { hostPid },
      env: {},
      // Small: each isolate otherwise reserves hundreds of MB of address space, which would eat into
      // the RLIMIT_AS meant for guest allocations (see also MALLOC_ARENA_MAX in child-launch.ts).
      resourceLimits: {
        maxOldGenerationSizeMb: 8,
        maxYoungGenerationSizeMb: 1,
        codeRangeSizeMb: 4,
        stackSizeMb: 1,
      },
    },
  );
  watchdog.unref();
}
