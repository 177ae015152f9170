import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseVerdict } from "../../src/eval/judge.ts";
import { RESULTS_DB_FILE } from "../../src/eval/results-store.ts";
import { runEval } from "../../src/eval/runner.ts";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
} from "../../src/testing/scripted-openai-server.ts";
import { directRules, scriptedEnv } from "./scripted-eval.ts";

// The judge is a separately configured model: its own server here, so the test proves the
// system's calls and the judge's calls go where they are configured and are counted apart.
const FIX = join(import.meta.dirname, "../fixtures/eval");
const tmp = mkdtempSync(join(tmpdir(), "codehop-eval-judge-"));
let model: ScriptedOpenAIServer;
let judge: ScriptedOpenAIServer;

beforeAll(async () => {
  model = await ScriptedOpenAIServer.start({ responder: trajectoryResponder(directRules()) });
  // The judge accepts "The tower is 40 metres tall." (EM 0) and rejects "Yes" for "no".
  judge = await ScriptedOpenAIServer.start({
    responder: (req) => {
      const user = req.messages.at(-1)!.content;
      const verdict = /Predicted answer: "(Norway|The tower is 40 metres tall\.)"/.test(user)
        ? "CORRECT"
        : "INCORRECT";
      return { content: verdict, usage: { prompt_tokens: 50, completion_tokens: 1 } };
    },
  });
});
afterAll(async () => {
  await model.close();
  await judge.close();
});

describe("LLM-as-judge", () => {
  it("parses verdicts strictly", () => {
    expect(parseVerdict("CORRECT")).toBe(true);
    expect(parseVerdict("incorrect.")).toBe(false);
    expect(parseVerdict("<think>is it correct? maybe</think>INCORRECT")).toBe(false);
    expect(parseVerdict("Verdict: Correct")).toBe(true);
    expect(parseVerdict("I cannot tell")).toBe(false);
  });

  it("grades with the separately configured judge model; its tokens are not the system's", async () => {
    const env = scriptedEnv(model.baseURL, {
      CODEHOP_JUDGE_MODEL: "judge-model",
      CODEHOP_JUDGE_BASE_URL: judge.baseURL,
    });
    const out = join(tmp, "judged");
    const res = await runEval({
      dataset: join(FIX, "plain.jsonl"),
      systems: ["direct"],
      out,
      env,
      log: () => undefined,
    });
    expect(judge.requests).toHaveLength(3);
    expect(judge.requests[0].request.model).toBe("judge-model");
    expect(model.requests.every((r) => r.request.model === "scripted-model")).toBe(true);
    const s = res.report.systems[0];
    expect(s.judgeAccuracy).toBeCloseTo(2 / 3, 10);
    expect(s.em).toBeCloseTo(1 / 3, 10);
    expect(s.avgInputTokens).toBe(100); // the judge's 50 tokens are not added
    const q2 = res.report.results.find((r) => r.questionId === "p2")!;
    expect(q2.judge).toMatchObject({
      correct: true,
      raw: "CORRECT",
      inputTokens: 50,
      outputTokens: 1,
    });
    expect((res.report.config as any).judge).toEqual({
      model: "judge-model",
      baseURL: judge.baseURL,
    });
    // with a judge, "correct" for the trajectory export follows the judge
    const lines = readFileSync(join(out, "trajectories/direct/direct.jsonl"), "utf8")
      .trim()
      .split("\n");
    expect(lines.map((l) => JSON.parse(l).metadata.question_id)).toEqual(["p1", "p2"]);
    expect(readFileSync(res.files.md, "utf8")).toContain("| judge % |");
  });

  it("--judge without CODEHOP_JUDGE_MODEL is a configuration error; --no-judge skips it", async () => {
    await expect(
      runEval({
        dataset: join(FIX, "plain.jsonl"),
        systems: ["direct"],
        out: join(tmp, "nojudge"),
        env: scriptedEnv(model.baseURL),
        judge: true,
        log: () => undefined,
      }),
    ).rejects.toThrow(/CODEHOP_JUDGE_MODEL/);
    expect(existsSync(join(tmp, "nojudge"))).toBe(false); // nothing written before the check
    const before = judge.requests.length;
    const env = scriptedEnv(model.baseURL, {
      CODEHOP_JUDGE_MODEL: "judge-model",
      CODEHOP_JUDGE_BASE_URL: judge.baseURL,
    });
    const res = await runEval({
      dataset: join(FIX, "plain.jsonl"),
      systems: ["direct"],
      out: join(tmp, "skip"),
      env,
      judge: false,
      log: () => undefined,
    });
    expect(judge.requests.length).toBe(before);
    expect(res.report.systems[0].judgeAccuracy).toBeUndefined();
  });
});

describe("judging an earlier run", () => {
  it("a rerun with a judge grades the stored answers without asking the system again", async () => {
    const out = join(tmp, "late-judge");
    await runEval({
      dataset: join(FIX, "plain.jsonl"),
      systems: ["direct"],
      out,
      env: scriptedEnv(model.baseURL),
      log: () => undefined,
    });
    const modelCalls = model.requests.length;
    const judgeCalls = judge.requests.length;
    const env = scriptedEnv(model.baseURL, {
      CODEHOP_JUDGE_MODEL: "judge-model",
      CODEHOP_JUDGE_BASE_URL: judge.baseURL,
    });
    const res = await runEval({
      dataset: join(FIX, "plain.jsonl"),
      systems: ["direct"],
      out,
      env,
      log: () => undefined,
    });
    expect(model.requests.length).toBe(modelCalls);
    expect(judge.requests.length - judgeCalls).toBe(3);
    expect(res.report.systems[0].judgeAccuracy).toBeCloseTo(2 / 3, 10);
    expect(res.report.results.every((r) => r.judge)).toBe(true);
  });
});

describe("results databases from before the judged column", () => {
  it("are read: graded answers are not graded again, ungraded ones are", async () => {
    const out = join(tmp, "old-db");
    const env = scriptedEnv(model.baseURL, {
      CODEHOP_JUDGE_MODEL: "judge-model",
      CODEHOP_JUDGE_BASE_URL: judge.baseURL,
    });
    const lines: string[] = [];
    const run = () =>
      runEval({
        dataset: join(FIX, "plain.jsonl"),
        systems: ["direct"],
        out,
        env,
        log: (l) => lines.push(l),
      });
    const first = await run();
    // Back to the schema of earlier codehop versions, with one answer stored ungraded.
    const db = new Database(join(out, RESULTS_DB_FILE));
    db.exec("ALTER TABLE eval_results DROP COLUMN judged");
    db.prepare(
      "UPDATE eval_results SET result_json = json_remove(result_json, '$.judge') WHERE question_id = 'p2'",
    ).run();
    db.close();
    const modelCalls = model.requests.length;
    const judgeCalls = judge.requests.length;
    lines.length = 0;
    const again = await run();
    // Which answers lack a verdict is known without reading them: only p2 is queued.
    expect(lines).toContain("grading 1 stored answers with the judge");
    expect(model.requests.length).toBe(modelCalls);
    expect(judge.requests.length - judgeCalls).toBe(1);
    expect(again.report.results.map((r) => r.judge)).toEqual(
      first.report.results.map((r) => r.judge),
    );
    const third = await run();
    expect(judge.requests.length - judgeCalls).toBe(1);
    expect(third.report.systems[0].judgeAccuracy).toBeCloseTo(2 / 3, 10);
  });
});

describe("judge failures", () => {
  it("a failing judge leaves the answer stored (not an error); the next run grades it", async () => {
    let down = true;
    const flaky = await ScriptedOpenAIServer.start({
      responder: () =>
        down
          ? { status: 503 }
          : { content: "CORRECT", usage: { prompt_tokens: 5, completion_tokens: 1 } },
    });
    try {
      const out = join(tmp, "judge-down");
      const env = scriptedEnv(model.baseURL, {
        CODEHOP_JUDGE_MODEL: "judge-model",
        CODEHOP_JUDGE_BASE_URL: flaky.baseURL,
      });
      const lines: string[] = [];
      const modelCalls = model.requests.length;
      const res = await runEval({
        dataset: join(FIX, "plain.jsonl"),
        systems: ["direct"],
        out,
        env,
        log: (l) => lines.push(l),
      });
      expect(res.report.systems[0].errors).toBe(0);
      expect(res.report.systems[0].judgeAccuracy).toBeUndefined();
      expect(lines.filter((l) => l.startsWith("judge failed on direct"))).toHaveLength(3);
      down = false;
      const again = await runEval({
        dataset: join(FIX, "plain.jsonl"),
        systems: ["direct"],
        out,
        env,
        log: () => undefined,
      });
      expect(model.requests.length - modelCalls).toBe(3); // answers were not asked again
      expect(again.report.systems[0].judgeAccuracy).toBe(1);
    } finally {
      await flaky.close();
    }
  });
});
