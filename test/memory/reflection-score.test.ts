import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { ensureDemoCorpus } from "../../src/apps/qa/demo.ts";
import { action } from "../../src/apps/qa/demo-trajectories.ts";
import { readEnv } from "../../src/config/env.ts";
import { memorySettingsOf } from "../../src/runs/memory.ts";
import { runEval } from "../../src/eval/runner.ts";
import { MEMORY_DB_FILE, openSqliteMemoryStore } from "../../src/memory/sqlite-store.ts";
import {
  type ChatRequest,
  type Responder,
  ScriptedOpenAIServer,
} from "../../src/testing/scripted-openai-server.ts";

// The reflection step after a LOW-SCORED run: the eval harness scores an answer the agent gave
// without failing (a final answer, just wrong); below CODEHOP_REFLECTION_MIN_SCORE the root
// agent's model writes a lesson, and the next similar question is shown it and answered right.

const task = (req: ChatRequest) => req.messages.find((m) => m.role === "user")?.content ?? "";
const checksum = (w: string) => [...w].reduce((s, c) => s + c.charCodeAt(0), 0) % 256;
const LESSON =
  "The checksum of a word is the sum of its character codes modulo 256, not its length.";

/** Without the lesson the agent answers the word's length (a final answer, scored 0). */
const model: Responder = (req) => {
  const t = task(req);
  if (t.startsWith("An agent attempted a task and failed")) return `Lesson: ${LESSON}`;
  const word = /checksum of the word (\w+)/.exec(t)?.[1];
  if (!word) return action("?", 'final_answer("?")');
  if (t.includes("Lessons from your earlier attempts") && t.includes(LESSON))
    return action(
      "Follow the lesson.",
      `final_answer(String([..."${word}"].reduce((s, c) => s + c.charCodeAt(0), 0) % 256))`,
    );
  return action("The checksum is the length.", `final_answer(String("${word}".length))`);
};

let server: ScriptedOpenAIServer;
let tmp: string;
let corpus: string;
let dataset: string;
beforeAll(async () => {
  server = await ScriptedOpenAIServer.start({ responder: (req, ctx) => model(req, ctx) });
  tmp = mkdtempSync(join(tmpdir(), "codehop-reflect-score-"));
  corpus = await ensureDemoCorpus(join(tmp, "corpus-home"));
  dataset = join(tmp, "checksums.jsonl");
  writeFileSync(
    dataset,
    ["codehop", "langgraph"]
      .map((w, i) =>
        JSON.stringify({
          id: `c${i + 1}`,
          question: `Compute the checksum of the word ${w}.`,
          answer: String(checksum(w)),
        }),
      )
      .join("\n"),
  );
});
afterAll(() => server.close());
afterEach(() => vi.unstubAllEnvs());

/** The agentic system on the two questions, one at a time (a lesson can help the second). */
const evaluate = (out: string) =>
  runEval({
    dataset,
    systems: ["agentic"],
    out,
    concurrency: 1,
    env: readEnv({
      OPENAI_BASE_URL: server.baseURL,
      OPENAI_API_KEY: "test",
      CODEHOP_MODEL: "scripted-model",
      CODEHOP_MAX_RETRIES: "0",
      CODEHOP_CORPUS: corpus,
    }),
    log: () => undefined,
  });

const lessonsIn = async (out: string) => {
  const store = openSqliteMemoryStore(join(out, MEMORY_DB_FILE));
  try {
    return (await store.search(["local", "lessons", "qa"], { limit: 10 })).map((i) => i.value);
  } finally {
    await store.close();
  }
};

describe("reflection after a low-scored run (CODEHOP_REFLECTION=1)", { timeout: 240_000 }, () => {
  it("an eval answer scored below the threshold leaves a lesson; the similar next question is answered right", async () => {
    vi.stubEnv("CODEHOP_ENV_FILE", "none");
    vi.stubEnv("CODEHOP_USER", "");

    // Reflection off: both answers are final answers, both wrong.
    vi.stubEnv("CODEHOP_REFLECTION", "0");
    const off = await evaluate(join(tmp, "off"));
    expect(off.report.results.map((r) => [r.questionId, r.status, r.em])).toEqual([
      ["c1", "final_answer", 0],
      ["c2", "final_answer", 0],
    ]);
    expect(await lessonsIn(join(tmp, "off"))).toEqual([]);

    // Reflection on: the first answer scores 0 (no failure), a lesson is written, the second succeeds.
    vi.stubEnv("CODEHOP_REFLECTION", "1");
    const on = await evaluate(join(tmp, "on"));
    expect(on.report.results.map((r) => [r.questionId, r.status, r.em])).toEqual([
      ["c1", "final_answer", 0],
      ["c2", "final_answer", 1],
    ]);
    expect(on.report.results[1].prediction).toBe(String(checksum("langgraph")));
    const lessons = await lessonsIn(join(tmp, "on"));
    expect(lessons).toHaveLength(1);
    expect(lessons[0]).toMatchObject({
      lesson: LESSON,
      task: "Compute the checksum of the word codehop.",
    });
    expect(lessons[0].outcome).toMatch(
      /scored low: the final answer "7" got 0\.00 from the eval's F1 score \(below 0\.5\)/,
    );
    // The reflection prompt saw the score and the trajectory.
    const reflection = server.requests.find((r) =>
      task(r.request).startsWith("An agent attempted"),
    );
    expect(task(reflection!.request)).toContain("scored low");
    expect(task(reflection!.request)).toContain('"codehop".length');
  });

  it("a score at or above CODEHOP_REFLECTION_MIN_SCORE writes no lesson", async () => {
    vi.stubEnv("CODEHOP_ENV_FILE", "none");
    vi.stubEnv("CODEHOP_USER", "");
    vi.stubEnv("CODEHOP_REFLECTION", "1");
    vi.stubEnv("CODEHOP_REFLECTION_MIN_SCORE", "0");
    const out = join(tmp, "threshold-0");
    const run = await evaluate(out);
    expect(run.report.results.map((r) => r.em)).toEqual([0, 0]);
    expect(await lessonsIn(out)).toEqual([]);
  });

  it("a threshold outside 0..1 is a configuration error naming the variable", () => {
    for (const bad of ["1.5", "-0.1"])
      expect(() =>
        memorySettingsOf(readEnv({ CODEHOP_REFLECTION: "1", CODEHOP_REFLECTION_MIN_SCORE: bad })),
      ).toThrow(/CODEHOP_REFLECTION_MIN_SCORE must be a score from 0 to 1/);
    expect(
      memorySettingsOf(readEnv({ CODEHOP_REFLECTION: "1", CODEHOP_REFLECTION_MIN_SCORE: "0.8" }))
        ?.minScore,
    ).toBe(0.8);
    expect(memorySettingsOf(readEnv({ CODEHOP_REFLECTION: "1" }))?.minScore).toBe(0.5);
  });
});
