/**
 * What each CLI command loads (issue 27): a command that only reads or lists (`--help`,
 * `threads`, `show`, `history`, `check`) must not load the model libraries (@langchain/openai,
 * openai), the sandbox, MCP or apps it does not need; they are most of a start's CPU (docs/
 * performance.md, "CLI start"). The built CLI runs with a loader hook that lists every module it
 * loads (test/app/loaded-modules.mjs): what is asserted is the list, never a time.
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CODEHOP_BIN, cliEnv } from "./cli-helpers.ts";

const HOOK = join(process.cwd(), "test/app/loaded-modules.mjs");
/** A QA thread written by an earlier codehop (test/fixtures/old-checkpoints/README.md). */
const FIXTURE = join(process.cwd(), "test/fixtures/old-checkpoints/incremental-first");

/** Modules no reading command may load, by what they are. */
const HEAVY: Record<string, RegExp> = {
  "the OpenAI model library": /\/node_modules\/(@langchain\/openai|openai)\//,
  "a provider's model library": /\/node_modules\/@langchain\/(classic|anthropic|google-genai)\//,
  "the sandbox (SES, its child processes)":
    /\/node_modules\/ses\/|\/(src|dist)\/sandbox\/(?!contract\.)/,
  MCP: /\/node_modules\/@modelcontextprotocol\//,
  "the code agent": /\/(src|dist)\/(core\/runtime|framework\/code-agent|nodes\/)/,
  // Loaded by the web tools and document readers when they fetch or convert, not by every command
  // that loads an app naming them (~2 MB: undici alone is ~80 ms of CPU per start).
  "the web client and HTML readers":
    /\/node_modules\/(undici|turndown|htmlparser2|@mixmark-io\/domino|dom-serializer)\//,
};

/** The modules (paths) a run of the built CLI loaded, and its result. */
function loadedBy(home: string, args: string[]) {
  const list = join(home, `modules-${args[0].replace(/\W/g, "")}.txt`);
  rmSync(list, { force: true });
  const r = spawnSync(process.execPath, ["--import", HOOK, CODEHOP_BIN, ...args], {
    env: cliEnv({ CODEHOP_HOME: home, CODEHOP_TEST_MODULE_LIST: list }),
    encoding: "utf8",
  });
  const files = readFileSync(list, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((m) => (m.startsWith("file:") ? fileURLToPath(m) : m));
  const bundleFiles = files.filter((f) => f.startsWith(`${BUNDLE}/`)).length;
  return { ...r, bundleFiles, modules: [...new Set(files.flatMap(bundled))] };
}

/** dist/bundle's list of the modules compiled into each of its files (bin/bundle.mjs). */
const BUNDLE = join(process.cwd(), "dist/bundle");
let bundleModules: Record<string, string[]> | undefined;

/** A file of the bundled CLI stands for the modules compiled into it; any other for itself. */
function bundled(file: string): string[] {
  if (!file.startsWith(`${BUNDLE}/`)) return [file];
  bundleModules ??= JSON.parse(readFileSync(join(BUNDLE, "modules.json"), "utf8")) as Record<
    string,
    string[]
  >;
  const inputs = bundleModules[file.slice(BUNDLE.length + 1)];
  if (!inputs) throw new Error(`${file} is not listed in dist/bundle/modules.json`);
  return inputs.map((m) => join(process.cwd(), m));
}

/** The Postgres driver and codehop's Postgres checkpointer, as module paths. */
const POSTGRES_DRIVER = /\/node_modules\/(pg|pg-pool|pg-protocol)\/|checkpoint-postgres/;

/** The modules of `modules` matching each of `kinds`, by kind (empty when none). */
function offending(modules: string[], kinds: Record<string, RegExp>): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [kind, re] of Object.entries(kinds)) {
    const hits = modules.filter((m) => re.test(m));
    if (hits.length) out[kind] = hits.slice(0, 5);
  }
  return out;
}

describe("a reading command loads only what it needs", { timeout: 120_000 }, () => {
  let home: string;
  beforeAll(() => {
    home = mkdtempSync(join(tmpdir(), "codehop-cli-modules-"));
    copyFileSync(join(FIXTURE, "checkpoints.db"), join(home, "checkpoints.db"));
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  // Light app modules: the registry, thread inspection, a recorded verification and the demo's
  // question names (data, for `demo --help`).
  const apps =
    /\/(src|dist)\/apps\/(?!registry\.|inspect\.|qa\/verification-record\.|qa\/demo-trajectories\.)/;

  it.each([
    [["--help"], "Usage: codehop"],
    [["history", "--help"], "Usage: codehop history"],
    [["threads"], "old-done"],
    [["show", "old-done"], "manager: Does birch plywood float in ethanol?"],
    [["check"], "0 damaged"],
  ])("codehop %j: no models, sandbox, MCP, agents, apps or LangGraph", (args, expected) => {
    const r = loadedBy(home, args);
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain(expected);
    expect(r.status).toBe(0);
    expect(
      offending(r.modules, {
        ...HEAVY,
        apps,
        LangGraph: /\/node_modules\/@langchain\/langgraph\//,
        // The threads are in SQLite (check.ts leaves PostgreSQL to check-postgres.ts).
        "the Postgres driver": POSTGRES_DRIVER,
      }),
    ).toEqual({});
  });

  it("codehop history loads the thread's app graph (LangGraph reads states through it), no other app and no model", () => {
    const r = loadedBy(home, ["history", "old-done"]);
    expect(r.stderr).toBe("");
    // From the bundled CLI (bin/bundle.mjs): the modules below are what its files hold.
    expect(r.bundleFiles).toBeGreaterThan(0);
    expect(r.stdout).toMatch(/^checkpoint .* summary$/m);
    expect(r.stdout).toContain("answer: Yes. Birch plywood");
    expect(r.status).toBe(0);
    // The hook sees modules loaded lazily, inside a command's action: the QA app is listed.
    expect(r.modules.some((m) => /\/(src|dist)\/apps\/qa\/app\.(ts|js)$/.test(m))).toBe(true);
    expect(r.modules.some((m) => /\/node_modules\/@langchain\/langgraph\//.test(m))).toBe(true);
    const { "the code agent": _agent, ...heavy } = HEAVY;
    expect(
      offending(r.modules, {
        ...heavy,
        "another app": /\/(src|dist)\/apps\/(research|chat|assistant)\//,
        // The thread is in SQLite: the Postgres adapter is loaded only for a postgres:// URL.
        "the Postgres driver": POSTGRES_DRIVER,
      }),
    ).toEqual({});
  });
});
