/**
 * How a sandbox child process is started: its spec, the files it may read, and the command line
 * (Node's permission model, the heap limit, RLIMIT_AS through `prlimit`, a parent-death signal
 * through `setpriv`, the SES code cache). The process's life after that is child-process.ts; the
 * pool that decides when to start one is pool.ts.
 */
import { existsSync, realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  CHILD_CODE_CACHE_ARG,
  CHILD_LIBRARIES_ARG,
  CHILD_MAKE_CODE_CACHE_ARG,
  CHILD_PDEATHSIG_ARG,
} from "./child/protocol.mjs";
import { CHILD_BUNDLE_NAME, childBundleFor, childModuleFiles } from "./child-bundle.ts";

/** How a child is started (children are only reused for the same spec). */
export interface ChildSpec {
  heapMb: number;
  /** RLIMIT_AS in MB, or null for none. */
  addressSpaceMb: number | null;
  /**
   * Tests and benchmarks only: another child program speaking the protocol (default:
   * {@link CHILD_PROGRAM}); it may read the child's modules too.
   */
  entry?: string;
  /** The authorized libraries' bundle file the child loads at start (src/sandbox/libraries.ts). */
  libraries?: string;
}

// Real paths: the permission model compares the files the child opens with these.
const CHILD_DIR = realpathSync(fileURLToPath(new URL("./child/", import.meta.url)));
/** The child's ES modules (what a child reads when it does not run the bundle). */
const CHILD_MODULES = childModuleFiles(CHILD_DIR);
/** Their entry: what a child runs without a bundle (and benchmarks as {@link ChildSpec.entry}). */
export const CHILD_MODULES_ENTRY = join(CHILD_DIR, "child.mjs");

/**
 * The bundled child (child-bundle.ts) when one was made from exactly these modules: built, beside
 * them in dist/sandbox/child/; from the sources (tests, tsx), dist/'s, until a child module is
 * edited and not yet built again. Else undefined: children load the modules.
 */
const CHILD_BUNDLE = childBundleFor(CHILD_DIR, [
  join(CHILD_DIR, CHILD_BUNDLE_NAME),
  fileURLToPath(new URL(`../../dist/sandbox/child/${CHILD_BUNDLE_NAME}`, import.meta.url)),
]);

/** The file a child runs (tests: {@link ChildSpec.entry} replaces it): the bundle, else child.mjs. */
export const CHILD_PROGRAM: { readonly entry: string; readonly bundled: boolean } = {
  entry: CHILD_BUNDLE ?? CHILD_MODULES_ENTRY,
  bundled: CHILD_BUNDLE !== undefined,
};
/** The SES bundle the child loads (and the file its code caches are made from). */
export const SES_PATH = realpathSync(createRequire(import.meta.url).resolve("ses"));
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

/** stderr of a child that could not even reserve its startup memory under RLIMIT_AS. */
export const STARTUP_OOM =
  /Failed to reserve|Fatal process OOM|Cannot allocate memory|out of memory/i;
/** The address-space limit is raised at most to this multiple of the configured one. */
export const MAX_ADDRESS_SPACE_FACTOR = 8;

/** True when an OS address-space limit can be applied (prlimit found). */
export const HAS_OS_MEMORY_LIMIT = PRLIMIT !== null;

/**
 * Empty environment: no secrets, no NODE_OPTIONS, no LOCKDOWN_* overrides reach the child. One
 * malloc arena: per-thread arenas reserve 64 MB of address space each, which would count against
 * RLIMIT_AS without being usable by the guest.
 */
export const CHILD_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: "1" };

/**
 * The program and arguments that start a child of `spec`.
 * @param addressSpaceFactor multiplier for the address-space limit actually applied
 * @param codeCache the SES code cache file it may read and load SES with, if any
 * @param makesCodeCache asked to send the host its SES code cache before `ready`
 */
export function childCommand(
  spec: ChildSpec,
  addressSpaceFactor: number,
  codeCache: string | undefined,
  makesCodeCache: boolean,
): { cmd: string; args: string[] } {
  const nodeArgs = [
    `--max-old-space-size=${spec.heapMb}`,
    PERMISSION_FLAG,
    ...[
      ...(spec.entry
        ? [spec.entry, ...CHILD_MODULES]
        : CHILD_PROGRAM.bundled
          ? [CHILD_PROGRAM.entry]
          : CHILD_MODULES),
      SES_PATH,
      ...(codeCache ? [codeCache] : []),
      ...(spec.libraries ? [spec.libraries] : []),
    ]
      // each path once: Node 20 aborts on a path given twice (a test's entry may be child.mjs)
      .filter((f, i, all) => all.indexOf(f) === i)
      .map((f) => `--allow-fs-read=${f}`),
    "--allow-worker", // only for the orphan watchdog thread (see child/child.mjs)
    // (--disable-warning exists from Node 20.11; the warnings only reach our stderr buffer anyway)
    ...(CAN_DISABLE_WARNINGS
      ? ["--disable-warning=ExperimentalWarning", "--disable-warning=SecurityWarning"]
      : []),
    spec.entry ?? CHILD_PROGRAM.entry,
    SES_PATH,
    ...(SETPRIV ? [CHILD_PDEATHSIG_ARG] : []),
    ...(codeCache ? [`${CHILD_CODE_CACHE_ARG}=${codeCache}`] : []),
    ...(makesCodeCache ? [CHILD_MAKE_CODE_CACHE_ARG] : []),
    ...(spec.libraries ? [`${CHILD_LIBRARIES_ARG}=${spec.libraries}`] : []),
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
  return { cmd, args };
}
