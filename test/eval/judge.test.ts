import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseVerdict } from "../../src/eval/judge.ts";
import { RESULTS_DB_FILE } from "../../src/eval/results-store.ts";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
  type Responder,
} from "../../src/testing/scripted-openai-server.ts";
import {
  directRules,
  evalTmpDir,
  judgedEnv,
  runScripted,
  scriptedEnv,
  withScriptedServer,
} from "./scripted-eval.ts";

// The judge is a separately configured model: its own server here, so the test proves the
// system's calls and the judge's calls go where they are configured and are counted apart.
const tmp = evalTmpDir("codehop-eval-judge-");
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
    const env = judgedEnv(model.baseURL, judge.baseURL);
    const out = join(tmp, "judged");
    const res = await runScripted(out, env);
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
      runScripted(join(tmp, "nojudge"), scriptedEnv(model.baseURL), { judge: true }),
    ).rejects.toThrow(/CODEHOP_JUDGE_MODEL/);
    expect(existsSync(join(tmp, "nojudge"))).toBe(false); // nothing written before the check
    const before = judge.requests.length;
    const env = judgedEnv(model.baseURL, judge.baseURL);
    const res = await runScripted(join(tmp, "skip"), env, { judge: false });
    expect(judge.requests.length).toBe(before);
    expect(res.report.systems[0].judgeAccuracy).toBeUndefined();
  });
});

describe("judging an earlier run", () => {
  it("a rerun with a judge grades the stored answers without asking the system again", async () => {
    const out = join(tmp, "late-judge");
    await runScripted(out, scriptedEnv(model.baseURL));
    const modelCalls = model.requests.length;
    const judgeCalls = judge.requests.length;
    const env = judgedEnv(model.baseURL, judge.baseURL);
    const res = await runScripted(out, env);
    expect(model.requests.length).toBe(modelCalls);
    expect(judge.requests.length - judgeCalls).toBe(3);
    expect(res.report.systems[0].judgeAccuracy).toBeCloseTo(2 / 3, 10);
    expect(res.report.results.every((r) => r.judge)).toBe(true);
  });
});

describe("results databases from before the judged column", () => {
  it("are read: graded answers are not graded again, ungraded ones are", async () => {
    const out = join(tmp, "old-db");
    const env = judgedEnv(model.baseURL, judge.baseURL);
    const lines: string[] = [];
    const run = () => runScripted(out, env, { log: (l) => lines.push(l) });
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

  it("a graded answer whose judged flag an older codehop left at 0 is flagged, not graded again", async () => {
    const out = join(tmp, "stale-flag");
    const env = judgedEnv(model.baseURL, judge.baseURL);
    const lines: string[] = [];
    const run = () => runScripted(out, env, { log: (l) => lines.push(l) });
    await run();
    // An older codehop writing to a database that has the column leaves it at its default.
    const db = new Database(join(out, RESULTS_DB_FILE));
    db.exec("UPDATE eval_results SET judged = 0 WHERE question_id = 'p2'");
    db.close();
    const judgeCalls = judge.requests.length;
    lines.length = 0;
    await run();
    expect(lines).toContain("grading 1 stored answers with the judge");
    expect(judge.requests.length).toBe(judgeCalls);
    lines.length = 0;
    await run();
    expect(lines.filter((l) => l.startsWith("grading"))).toEqual([]);
    expect(judge.requests.length).toBe(judgeCalls);
  });
});

describe("judge failures", () => {
  it("a failing judge leaves the answer stored (not an error); the next run grades it", async () => {
    let down = true;
    const flakyJudge: Responder = () =>
      down
        ? { status: 503 }
        : { content: "CORRECT", usage: { prompt_tokens: 5, completion_tokens: 1 } };
    await withScriptedServer(flakyJudge, async (flaky) => {
      const out = join(tmp, "judge-down");
      const env = judgedEnv(model.baseURL, flaky.baseURL);
      const lines: string[] = [];
      const modelCalls = model.requests.length;
      const res = await runScripted(out, env, { log: (l) => lines.push(l) });
      expect(res.report.systems[0].errors).toBe(0);
      expect(res.report.systems[0].judgeAccuracy).toBeUndefined();
      expect(lines.filter((l) => l.startsWith("judge failed on direct"))).toHaveLength(3);
      down = false;
      const again = await runScripted(out, env);
      expect(model.requests.length - modelCalls).toBe(3); // answers were not asked again
      expect(again.report.systems[0].judgeAccuracy).toBe(1);
    });
  });
});
