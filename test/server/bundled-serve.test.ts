/**
 * `codehop serve` and `codehop worker` start from the bundled CLI (dist/bundle, bin/bundle.mjs)
 * when their langgraph.json names only codehop's own graphs, which are compiled into the bundle:
 * no second copy of codehop or LangGraph is loaded from dist/ or node_modules. A langgraph.json
 * naming the operator's own graph runs them from dist/cli instead, so the server and that graph
 * share node_modules' LangGraph (one copy: classes are checked with instanceof). What is asserted
 * is the list of modules each process loaded (test/app/loaded-modules.mjs) and that it serves.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CODEHOP_BIN, type CliRun, cliEnv, spawnCli } from "../app/cli-helpers.ts";
import { postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";
import { waitForStderr } from "./processes.ts";

const ROOT = process.cwd();
const HOOK = join(ROOT, "test/app/loaded-modules.mjs");
const BUNDLE = join(ROOT, "dist/bundle");
const OPERATOR_GRAPHS = join(ROOT, "test/fixtures/server/langgraph.json");

const cluster = useTestCluster();
let home: string;
let databaseUrl: string;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "codehop-bundled-serve-"));
  if (postgresMissing) return;
  databaseUrl = await cluster().createDatabase("bundled_serve");
});
afterAll(() => {
  if (home) rmSync(home, { recursive: true, force: true });
});

/** Starts `codehop <args>` with the module-list hook; `ready` on stderr means it is up. */
async function start(args: string[], ready: RegExp, list: string): Promise<CliRun> {
  const env = cliEnv({
    CODEHOP_HOME: home,
    CODEHOP_DATABASE_URL: databaseUrl,
    CODEHOP_TEST_MODULE_LIST: list,
  });
  const run = spawnCli(args, env, ROOT, undefined, ["--import", HOOK]);
  await waitForStderr(run, ready, args[0]);
  return run;
}

/** Stops a process (SIGTERM: it shuts down and exits) and returns the files it loaded. */
async function stopAndList(run: CliRun, list: string): Promise<string[]> {
  run.child.kill("SIGTERM");
  const { code, stderr } = await run.done;
  expect(code, stderr).toBe(0);
  return readFileSync(list, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((m) => (m.startsWith("file:") ? fileURLToPath(m) : m));
}

/** The modules compiled into the bundle files among `files` (dist/bundle/modules.json). */
function bundledModules(files: string[]): string[] {
  const byFile = JSON.parse(readFileSync(join(BUNDLE, "modules.json"), "utf8")) as Record<
    string,
    string[]
  >;
  return files
    .filter((f) => f.startsWith(`${BUNDLE}/`))
    .flatMap((f) => byFile[f.slice(BUNDLE.length + 1)] ?? []);
}

/** codehop's dist/ files loaded one by one (not from the bundle). */
const unbundledDist = (files: string[]) =>
  files.filter((f) => f.startsWith(join(ROOT, "dist/")) && !f.startsWith(`${BUNDLE}/`));

describe.skipIf(postgresMissing)(
  "serve and worker from the bundled CLI",
  { timeout: 120_000 },
  () => {
    it("codehop's own graphs: serve and worker load the bundle only, and serve the graphs", async () => {
      const serveList = join(home, "serve-own.txt");
      const server = await start(
        ["serve", "--port", "0"],
        /listening on (http:\/\/\S+)/,
        serveList,
      );
      const workerList = join(home, "worker-own.txt");
      const worker = await start(["worker", "--worker-id", "bw1"], /bw1 ready/, workerList);
      const url = /listening on (http:\/\/\S+)/.exec(server.stderr())![1];
      const assistants = await new Client({ apiUrl: url }).assistants.search({ limit: 20 });
      expect(assistants.map((a) => a.graph_id).sort()).toEqual(
        [
          "assistant",
          "chat",
          "code_agent",
          "manager",
          "page_search",
          "researcher",
          "web_search",
          "wikipedia_search",
        ].sort(),
      );
      for (const [run, list, own] of [
        [server, serveList, "dist/server/app.js"],
        [worker, workerList, "dist/server/worker.js"],
      ] as const) {
        const files = await stopAndList(run, list);
        expect(unbundledDist(files)).toEqual([]);
        expect(files.filter((f) => /\/node_modules\/@langchain\/langgraph\//.test(f))).toEqual([]);
        const inside = bundledModules(files);
        expect(inside).toContain(own);
        expect(inside).toContain("dist/graphs/entries.js");
      }
    });

    it("an operator's graph: serve runs from dist/cli, the graph and the server share node_modules' LangGraph", async () => {
      const list = join(home, "serve-operator.txt");
      const server = await start(
        ["serve", "--port", "0", "--graphs", OPERATOR_GRAPHS],
        /listening on (http:\/\/\S+)/,
        list,
      );
      const url = /listening on (http:\/\/\S+)/.exec(server.stderr())![1];
      const assistants = await new Client({ apiUrl: url }).assistants.search({ limit: 20 });
      expect(assistants.map((a) => a.graph_id)).toContain("approval");
      const files = await stopAndList(server, list);
      expect(files).toContain(join(ROOT, "dist/cli/main.js"));
      expect(files).toContain(join(ROOT, "dist/server/app.js"));
      expect(files).toContain(join(ROOT, "test/fixtures/server/approval-graph.ts"));
      // codehop's own graphs of that file come from dist/ too, beside the server, not the bundle.
      expect(files).toContain(join(ROOT, "dist/graphs/entries.js"));
      // From the bundle: the check of the graphs file only (src/cli/server-support.ts).
      const inside = bundledModules(files);
      expect(inside).toContain("dist/server/graphs.js");
      expect(
        inside.filter((m) => /^dist\/(server\/(app|worker|backend)|graphs)\//.test(m)),
      ).toEqual([]);
      // One LangGraph: the copy in node_modules, which the operator's graph imports.
      expect(files.some((f) => f.includes("/node_modules/@langchain/langgraph/dist/"))).toBe(true);
    });
  },
);

describe("a refused serve", { timeout: 60_000 }, () => {
  it("no authentication on a routable address: refused before the server's modules load", () => {
    const list = join(home, "serve-refused.txt");
    const r = spawnSync(
      process.execPath,
      ["--import", HOOK, CODEHOP_BIN, "serve", "--host", "0.0.0.0"],
      {
        env: cliEnv({
          CODEHOP_HOME: home,
          CODEHOP_DATABASE_URL: "postgres://codehop@127.0.0.1:1/none",
          CODEHOP_TEST_MODULE_LIST: list,
        }),
        encoding: "utf8",
      },
    );
    expect(r.stderr).toMatch(/Refusing to listen on 0\.0\.0\.0 without authentication/);
    expect(r.status).toBe(2);
    const files = readFileSync(list, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((m) => (m.startsWith("file:") ? fileURLToPath(m) : m));
    expect(unbundledDist(files)).toEqual([]);
    const inside = bundledModules(files);
    expect(inside).toContain("dist/server/auth-modes.js");
    expect(inside.filter((m) => /^dist\/(server\/(app|backend|worker)|graphs)\//.test(m))).toEqual(
      [],
    );
  });
});
