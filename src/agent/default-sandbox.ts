import type { CodeSandbox } from "../sandbox/types.ts";

let shared: Promise<CodeSandbox> | undefined;

/**
 * The process-wide sandbox used by agents created without one: created on first use (so importing
 * a graph never spawns processes) and closed when the process exits.
 */
export function getDefaultSandbox(): Promise<CodeSandbox> {
  shared ??= (async () => {
    // Loaded lazily: the sandbox pool (child processes) is only needed once an action runs.
    const mod = await import("../sandbox/index.ts");
    const sandbox = await mod.createSandbox();
    const close = () => void sandbox.close().catch(() => {});
    process.once("beforeExit", close);
    process.once("exit", close);
    return sandbox;
  })();
  shared.catch(() => {
    shared = undefined;
  });
  return shared;
}

/** Closes the default sandbox if it was created (tests, CLI shutdown). */
export async function closeDefaultSandbox(): Promise<void> {
  const current = shared;
  shared = undefined;
  if (current) await (await current.catch(() => undefined))?.close();
}
