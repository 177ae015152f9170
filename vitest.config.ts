import { chmodSync, mkdtempSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { configDefaults, defineConfig } from "vitest/config";
import { ISOLATED_FILES } from "./test/vitest/isolated-files.ts";
import LongestFirstSequencer from "./test/vitest/sequencer.ts";

// Node's on-disk compile cache (Node >= 22.1; Node 20 ignores the variable) for everything the
// test workers and the processes they start import natively (node_modules is most of a start):
// each of the suite's hundreds of processes compiles the same modules otherwise. The directory
// is the one `codehop` itself uses (bin/codehop.mjs: module.enableCompileCache()).
process.env.NODE_COMPILE_CACHE ??= join(tmpdir(), "node-compile-cache");
// A machine-wide NODE_EXTRA_CA_CERTS (set on the 2-core machines this suite is measured on) makes
// every Node process parse that certificate file at start: ~70 ms of CPU each, and the suite starts
// hundreds (CLIs, servers, workers). No test speaks TLS to anything but its own local servers,
// which never use the system's CAs.
delete process.env.NODE_EXTRA_CA_CERTS;
// Every temporary file and folder of the run — the tests' own (hundreds of mkdtemp folders), the
// PostgreSQL cluster's, those of the processes started with the run's environment — in one folder
// of the system's temp directory, which test/vitest/global-setup.ts removes when the run ends: a
// run leaves no folders of its own in /tmp (the caches of CLIs started with a bare environment,
// codehop-sandbox-<uid> and tsx's, stay there for the next run; so does NODE_COMPILE_CACHE's,
// set above this for that reason). Searchable by others (0711): the cluster's folder inside belongs to the postgres user when
// run as root. Only the process that made it removes it (a vitest started inside a run keeps it).
if (process.env.CODEHOP_TEST_TMP_OWNER === undefined) {
  const runTmp = mkdtempSync(join(tmpdir(), "codehop-test-run-"));
  chmodSync(runTmp, 0o711);
  process.env.CODEHOP_TEST_TMP = runTmp;
  process.env.CODEHOP_TEST_TMP_OWNER = String(process.pid);
  process.env.TMPDIR = runTmp;
}

// One config for the whole suite. Integration tests start real local servers (OpenAI-compatible,
// MediaWiki-like, langgraph dev), so timeouts are generous and files run in forks (the sandbox
// spawns child processes; forks keep a crashing test from taking the runner with it).
// Two projects: "shared" (most files) runs files one after another in a worker process that keeps
// its module cache (`isolate: false`), so the agent stack is imported once per worker rather than
// once per file; "isolated" gives each of the files in test/vitest/isolated-files.ts (they edit
// process.env, fake timers, ...) a fresh process, as vitest does by default.
export default defineConfig({
  // The workspace packages by name, as their sources (as tsconfig.json's paths map them).
  resolve: {
    alias: {
      "@codehop/checkpoint-postgres/official": fileURLToPath(
        new URL("./packages/checkpoint-postgres/src/official.ts", import.meta.url),
      ),
      "@codehop/checkpoint-postgres": fileURLToPath(
        new URL("./packages/checkpoint-postgres/src/index.ts", import.meta.url),
      ),
      "@codehop/checkpoint-sqlite/thread-counts": fileURLToPath(
        new URL("./packages/checkpoint-sqlite/src/thread-counts.ts", import.meta.url),
      ),
      "@codehop/checkpoint-sqlite": fileURLToPath(
        new URL("./packages/checkpoint-sqlite/src/index.ts", import.meta.url),
      ),
    },
  },
  test: {
    pool: "forks",
    // Twice as many files at once as there are cores: most files spend their time waiting on the
    // processes and servers they start (CLIs, sandbox children, PostgreSQL, `codehop serve`), and
    // vitest's default (cores - 1) runs one file at a time on a 2-core machine, leaving a core
    // idle for most of the run. `--maxWorkers=N` overrides it.
    maxWorkers: availableParallelism() * 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // The CLI tests spawn bin/codehop.mjs: the build is brought up to date once, before any file.
    globalSetup: ["./test/vitest/global-setup.ts"],
    // The longest files start first (test/vitest/sequencer.ts); the slowest are listed at the end.
    sequence: { sequencer: LongestFirstSequencer },
    reporters: ["default", "./test/vitest/slowest-files.ts"],
    // In-process runs read the environment too: a developer's .env must not change what tests see.
    env: { CODEHOP_ENV_FILE: "none" },
    projects: [
      { extends: true, test: { name: "isolated", include: [...ISOLATED_FILES], isolate: true } },
      {
        extends: true,
        test: {
          name: "shared",
          include: ["test/**/*.test.ts", "packages/*/test/**/*.test.ts"],
          exclude: [...configDefaults.exclude, ...ISOLATED_FILES],
          isolate: false,
        },
      },
    ],
  },
});
