import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { RESULTS_DB_FILE, ResultsStore, resultKey } from "../../src/eval/results-store.ts";
import type { JudgeVerdict, QuestionResult } from "../../src/eval/types.ts";
import { evalTmpDir, syntheticResult } from "./scripted-eval.ts";

const verdict: JudgeVerdict = { correct: true, raw: "CORRECT", inputTokens: 5, outputTokens: 1 };

/** A result with its transcripts, as the runner stores it. */
function result(questionId: string, extra: Partial<QuestionResult> = {}): QuestionResult {
  return {
    ...syntheticResult(Number(questionId.slice(1)), extra),
    transcripts: [{ agent: "direct", messages: [{ role: "user", content: `${questionId}?` }] }],
  };
}

let store: ResultsStore | undefined;
afterEach(() => store?.close());

describe("the eval results database", () => {
  it("knows which finished answers the judge has not graded, and grading leaves transcripts alone", () => {
    store = new ResultsStore(evalTmpDir("codehop-results-"));
    store.put(result("q1", { judge: verdict }));
    store.put(result("q2"));
    store.put(result("q3", { error: "boom", prediction: "" }));
    expect(store.finishedKeys()).toEqual(
      new Set([resultKey("direct", "q1"), resultKey("direct", "q2")]),
    );
    expect(store.finishedKeys({ unjudged: true })).toEqual(new Set([resultKey("direct", "q2")]));

    store.setJudge("direct", "q2", verdict);
    expect(store.finishedKeys({ unjudged: true }).size).toBe(0);
    expect(store.result("direct", "q2")).toMatchObject({ questionId: "q2", judge: verdict });
    expect(store.result("direct", "q2")).not.toHaveProperty("transcripts");
    expect(store.get("direct", "q2")).toEqual({ ...result("q2"), judge: verdict });
  });

  it("opens a database of the first schema (no transcripts or judged column) and reads its verdicts", () => {
    const dir = evalTmpDir("codehop-results-old-");
    const old = new Database(join(dir, RESULTS_DB_FILE));
    old.exec(`
CREATE TABLE eval_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE eval_results (
  system TEXT NOT NULL,
  question_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  ok INTEGER NOT NULL,
  result_json TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  PRIMARY KEY (system, question_id)
);`);
    const insert = old.prepare(
      "INSERT INTO eval_results (system, question_id, idx, ok, result_json, finished_at) VALUES (?, ?, ?, 1, ?, '')",
    );
    insert.run("direct", "q1", 1, JSON.stringify(result("q1", { judge: verdict })));
    insert.run("direct", "q2", 2, JSON.stringify(result("q2")));
    old.close();

    store = new ResultsStore(dir);
    expect(store.finishedKeys().size).toBe(2);
    expect(store.finishedKeys({ unjudged: true })).toEqual(new Set([resultKey("direct", "q2")]));
    // Transcripts were stored inside the result then: results are read without them.
    expect(store.all().map((r) => [r.questionId, "transcripts" in r, r.judge])).toEqual([
      ["q1", false, verdict],
      ["q2", false, undefined],
    ]);
  });
});
