/**
 * Cleanups that run however a benchmark process ends: its normal end, an exception, the runner's
 * timeout (which calls process.exit), or SIGINT / SIGTERM / SIGHUP. Each is synchronous (kill a
 * process group, delete a network namespace): 'exit' handlers cannot wait. A benchmark that
 * starts servers, workers, namespaces must not leave them running on a shared machine.
 */

const cleanups = new Set<() => void>();
let installed = false;

function runAll(): void {
  for (const fn of [...cleanups].reverse()) {
    cleanups.delete(fn);
    try {
      fn();
    } catch {
      // already gone
    }
  }
}

function install(): void {
  if (installed) return;
  installed = true;
  process.on("exit", runAll);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.once(signal, () => {
      runAll();
      // Other handlers (the PostgreSQL cluster's) ran too; end with the signal's usual status.
      process.exit(128 + (signal === "SIGINT" ? 2 : signal === "SIGTERM" ? 15 : 1));
    });
  }
}

/** Registers `fn` to run at exit; returns a function that runs it now (once) and unregisters it. */
export function onExit(fn: () => void): () => void {
  install();
  let done = false;
  const once = () => {
    if (done) return;
    done = true;
    fn();
  };
  cleanups.add(once);
  return () => {
    cleanups.delete(once);
    once();
  };
}

/** Kills process group `pid` (a process spawned `detached`, with every child it started). */
export function killGroup(pid: number | undefined, signal: NodeJS.Signals = "SIGKILL"): void {
  if (!pid) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // the group is gone
  }
}
