import { readEnv } from "../config/env.ts";
import type { CodeSandbox } from "../sandbox/contract.ts";

let shared: Promise<CodeSandbox> | undefined;

/** Warm sandbox processes kept by the default sandbox. */
export const DEFAULT_POOL_SIZE = 3;

/**
 * How the default sandbox starts its processes: "warm" keeps {@link DEFAULT_POOL_SIZE} started
 * ahead (growing with the rate of new runs), for a host that keeps starting runs; "on-demand"
 * starts none ahead: each agent run's process starts when its first model call does (the
 * sandbox's `prepare`), which a model's answer takes longer than. A one-shot CLI run exits after
 * one run, so processes started ahead for a next run would only be started and killed.
 */
export type DefaultSandboxMode = "warm" | "on-demand";
let mode: DefaultSandboxMode = "warm";

/** Chooses the default sandbox's {@link DefaultSandboxMode}; no effect once it was created. */
export function setDefaultSandboxMode(next: DefaultSandboxMode): void {
  mode = next;
}

/**
 * The process-wide sandbox used by agents created without one: created on first use (so importing
 * a graph never spawns processes) and closed when the process exits.
 */
export function getDefaultSandbox(): Promise<CodeSandbox> {
  shared ??= (async () => {
    // Loaded lazily: the sandbox pool (child processes) is only needed once an action runs.
    const mod = await import("../sandbox/index.ts");
    // Three warm processes: a parent's action waits in one while two concurrent sub-agents
    // (Promise.all) run theirs, without paying a process spawn per call.
    // Authorized libraries: the operator's environment only (never a run's context).
    const libraries = mod.parseLibrariesSetting(readEnv().sandboxLibraries ?? "");
    // Children through a launcher process once a few runs have started (`launcher: "auto"`): a
    // worker or server starting runs back to back no longer stops its event loop in spawn().
    const poolSize = mode === "warm" ? DEFAULT_POOL_SIZE : 0;
    const sandbox = mod.createSandbox({ poolSize, libraries, launcher: "auto" });
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
