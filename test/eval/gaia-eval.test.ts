import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  GAIA_MINI_TASKS,
  gaiaMiniResponder,
  writeGaiaMiniSet,
} from "../../src/apps/assistant/demo-gaia.ts";
import { demoSite } from "../../src/apps/assistant/demo-trajectories.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";
import { WebTestServer } from "../../src/testing/web-test-server.ts";
import { type CliRun, cliEnv, spawnCli } from "../app/cli-helpers.ts";
import { postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";
import { waitForStderr } from "../server/processes.ts";

// A GAIA-format mini set with attachments (a PDF and a spreadsheet made here) run end to end by the
// real `codehop eval --format gaia` binary: the assistant (web agent on a local site with SearxNG
// search, inspect_file on the attachments) beside the direct baseline, scored with GAIA's rules.
const ROOT = join(import.meta.dirname, "../..");
const tmp = mkdtempSync(join(tmpdir(), "codehop-gaia-"));
let web: WebTestServer;
let model: ScriptedOpenAIServer;
let dataset: string;

beforeAll(async () => {
  web = await WebTestServer.start(demoSite());
  model = await ScriptedOpenAIServer.start({ responder: gaiaMiniResponder(web.origin) });
  dataset = writeGaiaMiniSet(join(tmp, "gaia-validation"));
});
afterAll(async () => {
  await model?.close();
  await web?.close();
});

/** What the eval coordinator and its workers are given: the scripted model and the local web. */
function evalEnv(home: string): Record<string, string> {
  return {
    PATH: process.env.PATH!,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "test",
    CODEHOP_MODEL: "scripted-model",
    CODEHOP_MAX_RETRIES: "0",
    CODEHOP_HOME: home,
    CODEHOP_SEARCH_URL: web.url("/searxng"),
    CODEHOP_WAYBACK_URL: web.url("/wayback/available"),
    CODEHOP_BROWSER: "text",
  };
}

function evalCli(args: string[]) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [join(ROOT, "bin/codehop.mjs"), "eval", ...args], {
      cwd: tmp,
      env: evalEnv(join(tmp, "home")),
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("codehop eval --format gaia", () => {
  it("runs the assistant beside direct and prints accuracy per level, tokens and time per task", async () => {
    const out = join(tmp, "out");
    const res = await evalCli([
      "--dataset",
      dataset,
      "--format",
      "gaia",
      "--out",
      out,
      "--no-progress",
    ]);
    expect(res.stderr).not.toMatch(/failed/);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain("GAIA accuracy by level (GAIA's scorer):");
    const report = JSON.parse(readFileSync(join(out, "report.json"), "utf8"));
    expect(report.dataset.format).toBe("gaia");
    expect(report.systems.map((s: { system: string }) => s.system)).toEqual([
      "assistant",
      "direct",
    ]);
    const byId = (system: string) =>
      Object.fromEntries(
        report.results
          .filter((r: { system: string }) => r.system === system)
          .map((r: { questionId: string; em: number; kind: string }) => [
            r.questionId,
            [r.em, r.kind],
          ]),
      );
    expect(byId("assistant")).toEqual({
      "mini-1": [1, "1"],
      "mini-2": [1, "2"],
      "mini-3": [1, "1"],
      "mini-4": [0, "3"],
    });
    expect(byId("direct")["mini-4"]).toEqual([1, "3"]);
    const assistant = report.results.filter((r: { system: string }) => r.system === "assistant");
    expect(
      assistant.every(
        (r: { inputTokens: number; wallMs: number }) => r.inputTokens > 0 && r.wallMs > 0,
      ),
    ).toBe(true);
    // The per-level table: assistant 100% at levels 1 and 2, 0% at 3, 75% overall.
    const lines = res.stdout.split("\n");
    const row = (system: string, level: string) =>
      lines
        .find((l) => new RegExp(`^${system}\\s+${level}\\s`).test(l))
        ?.trim()
        .split(/\s+/);
    expect(row("assistant", "1")?.slice(2, 4)).toEqual(["2", "100.0"]);
    expect(row("assistant", "2")?.slice(2, 4)).toEqual(["1", "100.0"]);
    expect(row("assistant", "3")?.slice(2, 4)).toEqual(["1", "0.0"]);
    expect(row("assistant", "all")?.slice(2, 4)).toEqual(["4", "75.0"]);
    expect(row("direct", "all")?.slice(2, 4)).toEqual(["4", "25.0"]);
    expect(readFileSync(join(out, "report.md"), "utf8")).toContain("## GAIA accuracy by level");
    expect(GAIA_MINI_TASKS).toHaveLength(4);
  }, 300_000);
});

// Distributed, as for QA: the coordinator queues every task x system pair on PostgreSQL and a
// `codehop worker` answers them (the attachments at the same path on the worker's machine).
const cluster = useTestCluster();
describe.skipIf(postgresMissing)("codehop eval --format gaia --queue", () => {
  let worker: CliRun | undefined;
  afterAll(async () => {
    if (worker && worker.child.exitCode === null) worker.child.kill("SIGTERM");
    await worker?.done;
  });

  it("a worker answers the queued GAIA tasks; the report scores them as a local run does", async () => {
    const databaseUrl = await cluster().createDatabase("gaiaq");
    worker = spawnCli(
      ["worker", "--worker-id", "g1", "--concurrency", "2", "--database-url", databaseUrl],
      cliEnv(evalEnv(join(tmp, "home-worker"))),
    );
    await waitForStderr(worker, /g1 ready/, "worker g1");
    const out = join(tmp, "queued");
    const res = await evalCli([
      "--dataset",
      dataset,
      "--format",
      "gaia",
      "--out",
      out,
      "--queue",
      databaseUrl,
      "--no-progress",
    ]);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toMatch(/queued 8 question × system pairs/);
    const report = JSON.parse(readFileSync(join(out, "report.json"), "utf8"));
    expect(report.partial).toBe(false);
    expect(report.dataset.format).toBe("gaia");
    const em = (system: string) =>
      Object.fromEntries(
        report.results
          .filter((r: { system: string }) => r.system === system)
          .map((r: { questionId: string; em: number }) => [r.questionId, r.em]),
      );
    expect(em("assistant")).toEqual({ "mini-1": 1, "mini-2": 1, "mini-3": 1, "mini-4": 0 });
    expect(em("direct")["mini-4"]).toBe(1);
    expect(res.stdout).toContain("GAIA accuracy by level (GAIA's scorer):");
  }, 300_000);
});
