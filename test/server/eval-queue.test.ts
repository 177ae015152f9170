import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runEval } from "../../src/eval/runner.ts";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
} from "../../src/testing/scripted-openai-server.ts";
import { type CliRun, cliEnv, runCli, spawnCli } from "../app/cli-helpers.ts";
import {
  agenticRules,
  directRules,
  EVAL_FIXTURES,
  ragRules,
  scriptedEnv,
} from "../eval/scripted-eval.ts";
import { postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";
import { waitForStderr } from "./processes.ts";

// `codehop eval --queue` with two `codehop worker` processes on a throwaway PostgreSQL cluster:
// the coordinator enqueues every question × system pair, the workers answer them (agentic runs
// through the real app, checkpointed in Postgres), and the report built from the shared results
// has the same figures as a local run of the same evaluation. A rerun skips what is finished.

const DATASET = join(EVAL_FIXTURES, "hotpotqa.json");
const tmp = mkdtempSync(join(tmpdir(), "codehop-eval-queue-"));
const cluster = useTestCluster();
let model: ScriptedOpenAIServer;
let databaseUrl = "";
const workers: CliRun[] = [];

const env = (extra: Record<string, string> = {}) =>
  cliEnv({
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "test",
    CODEHOP_MODEL: "scripted-model",
    CODEHOP_MAX_RETRIES: "0",
    CODEHOP_HOME: join(tmp, "home"),
    ...extra,
  });

beforeAll(async () => {
  // 300 ms per direct answer: both workers get a share of the questions.
  model = await ScriptedOpenAIServer.start({
    responder: trajectoryResponder([...agenticRules(), ...ragRules(), ...directRules(300)]),
  });
  if (postgresMissing) return;
  databaseUrl = await cluster().createDatabase("evalq");
  for (const id of ["e1", "e2"]) {
    const run = spawnCli(
      [
        "worker",
        "--worker-id",
        id,
        "--concurrency",
        "1",
        "--database-url",
        databaseUrl,
        "--lease",
        "10",
      ],
      env({ CODEHOP_HOME: join(tmp, `home-${id}`) }),
    );
    workers.push(run);
    await waitForStderr(run, new RegExp(`${id} ready`), `worker ${id}`);
  }
}, 180_000);

afterAll(async () => {
  for (const w of workers) if (w.child.exitCode === null) w.child.kill("SIGTERM");
  await Promise.all(workers.map((w) => w.done));
  await model?.close();
});

describe.skipIf(postgresMissing)("codehop eval --queue (distributed)", { timeout: 240_000 }, () => {
  it("workers answer the queued questions; the report equals a local run's; a rerun skips them all", async () => {
    const out = join(tmp, "distributed");
    const args = [
      "eval",
      "--dataset",
      DATASET,
      "--systems",
      "agentic,rag,direct",
      "--out",
      out,
      "--queue",
      databaseUrl,
      "--no-progress",
    ];
    const res = await runCli(args, env());
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toMatch(/queued 9 question × system pairs/);
    const distributed = JSON.parse(readFileSync(join(out, "report.json"), "utf8"));
    expect(distributed.partial).toBe(false);
    expect(distributed.progress).toEqual({ expected: 9, done: 9 });

    // The same evaluation in this process, without the queue.
    const local = await runEval({
      dataset: DATASET,
      out: join(tmp, "local"),
      env: scriptedEnv(model.baseURL),
      concurrency: 2,
      log: () => undefined,
    });
    const figures = (r: any) =>
      r.systems.map((s: any) => ({
        system: s.system,
        n: s.n,
        em: s.em,
        f1: s.f1,
        coverEm: s.coverEm,
        errors: s.errors,
        avgModelCalls: s.avgModelCalls,
        avgSteps: s.avgSteps,
        perAgent: s.perAgent,
      }));
    expect(figures(distributed)).toEqual(figures(local.report));
    const agentic = distributed.systems.find((s: any) => s.system === "agentic");
    expect(agentic.em).toBeCloseTo(2 / 3, 10);

    // Both workers answered, and the agentic threads are checkpointed in the shared database.
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      const byWorker = await db.query(
        "SELECT worker_id, count(*)::int AS n FROM codehop_eval_results GROUP BY worker_id ORDER BY worker_id",
      );
      expect(byWorker.rows.map((r) => r.worker_id).sort()).toEqual(["e1", "e2"]);
      const threads = await db.query(
        "SELECT count(DISTINCT thread_id)::int AS n FROM linear_steps WHERE thread_id LIKE $1",
        [`${distributed.runId}:agentic:%`],
      );
      expect(threads.rows[0].n).toBe(3);
    } finally {
      await db.end();
    }

    // A rerun finds everything done: nothing is queued and the model is not asked again.
    const before = model.requests.length;
    const again = await runCli(args, env());
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain("9 of 9 question × system results already done");
    expect(model.requests.length).toBe(before);
  });
});
