import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runEval } from "../../src/eval/runner.ts";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
  type Responder,
} from "../../src/testing/scripted-openai-server.ts";
import {
  directRules,
  EVAL_FIXTURES as FIX,
  evalTmpDir,
  runScripted,
  scriptedEnv,
  syntheticReport,
  withScriptedServer,
} from "./scripted-eval.ts";

/** A model reply that takes a minute: what a cancelled or timed-out call must not wait for. */
const SLOW_REPLY_MS = 60_000;

let server: ScriptedOpenAIServer;
const tmp = evalTmpDir("codehop-eval-");
const quiet = () => undefined;

beforeAll(async () => {
  server = await ScriptedOpenAIServer.start({ responder: trajectoryResponder(directRules()) });
});
afterAll(async () => server.close());

describe.each([
  ["hotpotqa.json", "hotpotqa", ["h1", "h2", "h3"]],
  ["2wiki.json", "2wiki", ["w1", "w2", "w3"]],
  ["musique.jsonl", "musique", ["2hop__1", "2hop__2", "2hop__3"]],
  ["plain.jsonl", "jsonl", ["p1", "p2", "p3"]],
] as const)("direct system end to end on %s", (file, format, ids) => {
  it("reports the figures the scripted answers imply", async () => {
    const out = join(tmp, `direct-${format}`);
    const before = server.requests.length;
    const res = await runEval({
      dataset: join(FIX, file),
      systems: ["direct"],
      out,
      env: scriptedEnv(server.baseURL),
      concurrency: 2,
      log: quiet,
    });
    expect(server.requests.length - before).toBe(3);
    const r = res.report;
    expect(r.dataset.format).toBe(format);
    expect(r.dataset.bad).toHaveLength(1);
    expect(r.partial).toBe(false);
    const s = r.systems[0];
    expect(s.system).toBe("direct");
    expect(s.questions).toBe(3);
    expect(s.em).toBeCloseTo(1 / 3, 10);
    expect(s.f1).toBeCloseTo((1 + 4 / 7 + 0) / 3, 10);
    expect(s.coverEm).toBeCloseTo(2 / 3, 10);
    expect(s.avgModelCalls).toBe(1);
    expect(s.avgInputTokens).toBe(100);
    expect(s.avgOutputTokens).toBe(5);
    expect(s.perAgent).toEqual({
      direct: { avgCalls: 1, avgInputTokens: 100, avgOutputTokens: 5 },
    });
    expect(s.errors).toBe(0);
    expect(r.results.map((q) => [q.questionId, q.prediction, q.em])).toEqual([
      [ids[0], "Norway", 1],
      [ids[1], "The tower is 40 metres tall.", 0],
      [ids[2], "Yes", 0],
    ]);
    expect(r.results[0].threadId).toBe(`${r.runId}:direct:${ids[0]}`);
    // the same figures are in every report file
    const json = JSON.parse(readFileSync(res.files.json, "utf8"));
    expect(json.systems[0].em).toBeCloseTo(1 / 3, 10);
    const md = readFileSync(res.files.md, "utf8");
    expect(md).toContain("| direct | 3 | 33.3 | 52.4 | 66.7 |");
    expect(md).toMatch(/- record \d+ \(line \d+\): /);
    const html = readFileSync(res.files.html, "utf8");
    // (booleans, so a failure does not print 200 KB of inlined Chart.js)
    expect(html.includes("Chart.js v4")).toBe(true); // inlined, not fetched
    expect(/<script[^>]+src=/.test(html)).toBe(false);
    expect(html.includes(`${r.runId}:direct:${ids[0]}`)).toBe(true);
    // the only correct answer is exported as a chat transcript
    expect(res.files.trajectories).toEqual([join(out, "trajectories", "direct", "direct.jsonl")]);
    const lines = readFileSync(res.files.trajectories[0], "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1);
    expect(lines[0].messages.map((m: any) => m.role)).toEqual(["system", "user", "assistant"]);
    expect(lines[0].messages[1].content).toContain("Blue Pavilion");
    expect(lines[0].messages[2].content).toBe("Norway");
    expect(lines[0].metadata).toMatchObject({
      system: "direct",
      agent: "direct",
      question_id: ids[0],
    });
  });
});

describe("resuming", () => {
  it("a rerun into the same --out skips finished questions and keeps the run id", async () => {
    const out = join(tmp, "resume");
    const env = scriptedEnv(server.baseURL);
    const first = await runScripted(out, env, { limit: 2 });
    expect(first.ran).toBe(2);
    const before = server.requests.length;
    const second = await runScripted(out, env);
    expect(second.skipped).toBe(2);
    expect(second.ran).toBe(1);
    expect(server.requests.length - before).toBe(1);
    expect(server.requests.at(-1)!.request.messages[1].content).toContain("same city");
    expect(second.report.runId).toBe(first.report.runId);
    expect(second.report.systems[0].questions).toBe(3);
    expect(second.report.systems[0].em).toBeCloseTo(1 / 3, 10);
  });

  it("refuses to mix results of a different model into the same output directory", async () => {
    const out = join(tmp, "mix");
    await runScripted(out, scriptedEnv(server.baseURL), { limit: 1 });
    await expect(
      runScripted(out, scriptedEnv(server.baseURL, { CODEHOP_MODEL: "other" })),
    ).rejects.toThrow(/different settings/);
  });
});

describe("failures", () => {
  it("an endpoint error on one question is recorded as an error (scored wrong), the others finish, and a rerun retries it", async () => {
    let failQ2 = true;
    const rules = directRules();
    const failing: Responder = async (req, ctx) => {
      if (failQ2 && req.messages[1]?.content.includes("Marek Zelny"))
        return { status: 500, body: '{"error":{"message":"boom"}}' };
      return trajectoryResponder(rules)(req, ctx);
    };
    await withScriptedServer(failing, async (flaky) => {
      const out = join(tmp, "errors");
      const env = scriptedEnv(flaky.baseURL);
      const res = await runScripted(out, env);
      const s = res.report.systems[0];
      expect(s.questions).toBe(3);
      expect(s.errors).toBe(1);
      expect(s.em).toBeCloseTo(1 / 3, 10);
      const failed = res.report.results.find((r) => r.questionId === "p2")!;
      expect(failed.error).toMatch(/boom|500/);
      expect(failed.prediction).toBe("");
      expect(failed.modelCalls).toBe(1);
      failQ2 = false;
      const again = await runScripted(out, env);
      expect(again.ran).toBe(1);
      expect(again.report.systems[0].errors).toBe(0);
      expect(again.report.results.find((r) => r.questionId === "p2")!.prediction).toBe(
        "The tower is 40 metres tall.",
      );
    });
  });

  it("Ctrl-C (abort) keeps finished questions, writes a partial report, and the rerun completes it", async () => {
    // q2's first reply takes a minute: an abort that waited for it would take that long (a bound
    // far from what a loaded machine adds, unlike a sub-second one).
    const slowOnQ2: Responder = async (req, ctx) => {
      const reply: any = await trajectoryResponder(directRules())(req, ctx);
      if (ctx.index === 1) reply.delayMs = SLOW_REPLY_MS;
      return reply;
    };
    await withScriptedServer(slowOnQ2, async (slow) => {
      const out = join(tmp, "abort");
      const env = scriptedEnv(slow.baseURL);
      const ac = new AbortController();
      const lines: string[] = [];
      // concurrency 1: abort as soon as q2's request arrives (q1 is then stored, q2 in flight)
      let abortedAt = 0;
      const timer = setInterval(() => {
        if (slow.requests.length >= 2) {
          clearInterval(timer);
          abortedAt = Date.now();
          ac.abort();
        }
      }, 5);
      const res = await runScripted(out, env, {
        concurrency: 1,
        signal: ac.signal,
        log: (l) => lines.push(l),
      });
      clearInterval(timer);
      // the in-flight call (a minute) was cancelled, not awaited
      expect(abortedAt).toBeGreaterThan(0);
      expect(Date.now() - abortedAt).toBeLessThan(SLOW_REPLY_MS / 4);
      expect(res.interrupted).toBe(true);
      expect(res.report.partial).toBe(true);
      expect(res.report.progress).toEqual({ expected: 3, done: 1 });
      expect(res.report.results.map((r) => r.questionId)).toEqual(["p1"]);
      expect(JSON.parse(readFileSync(res.files.json, "utf8")).partial).toBe(true);
      expect(readFileSync(res.files.md, "utf8")).toContain("(partial)");
      expect(lines.join("\n")).toMatch(/interrupted/);
      const again = await runScripted(out, env);
      expect(again.skipped).toBe(1);
      expect(again.ran).toBe(2);
      expect(again.report.partial).toBe(false);
    });
  });

  it("fails fast with a clear error when no model is configured", async () => {
    await expect(
      runScripted(
        join(tmp, "nomodel"),
        scriptedEnv(server.baseURL, { CODEHOP_MODEL: "", OPENAI_BASE_URL: "" }),
      ),
    ).rejects.toThrow(/CODEHOP_MODEL/);
    expect(existsSync(join(tmp, "nomodel"))).toBe(false);
  });

  it("without CODEHOP_MODEL uses the first model the endpoint lists (like codehop ask)", async () => {
    const res = await runScripted(
      join(tmp, "detected"),
      scriptedEnv(server.baseURL, { CODEHOP_MODEL: "" }),
    );
    expect((res.report.config as any).model.model).toBe("scripted");
    expect(server.requests.at(-1)!.request.model).toBe("scripted");
    expect(res.report.systems[0].em).toBeCloseTo(1 / 3, 10);
  });
});

describe("report page size", () => {
  it("embeds transcripts up to a budget and says where the rest are", async () => {
    const { htmlReport } = await import("../../src/eval/html.ts");
    const report = syntheticReport(3, {
      runId: "r",
      question: (i) => `Q${i}?`,
      threadId: (i) => `t${i}`,
    });
    const transcript = (i: number) => [
      {
        agent: "direct",
        messages: [{ role: "user" as const, content: `MARKER-${i}-${"x".repeat(100)}` }],
      },
    ];
    const html = htmlReport(report, (r) => transcript(r.index), { transcriptBudget: 150 });
    expect(html.includes("MARKER-0-")).toBe(true);
    expect(html.includes("MARKER-1-")).toBe(true); // the budget is checked before each question
    expect(html.includes("MARKER-2-")).toBe(false);
    expect(html.includes('"transcriptsOmitted":true')).toBe(true);
  });
});

describe("many bad records", () => {
  it("names the first 20 on the console, counts the rest, and lists them all in report.md", async () => {
    const { writeFileSync } = await import("node:fs");
    const path = join(tmp, "many-bad.jsonl");
    const lines = Array.from({ length: 25 }, (_, i) =>
      JSON.stringify({ id: `b${i}`, answer: "x" }),
    );
    lines.push(
      JSON.stringify({
        id: "ok",
        question: "Which country was the architect of the Blue Pavilion born in?",
        answer: "Norway",
      }),
    );
    writeFileSync(path, lines.join("\n"));
    const logged: string[] = [];
    const res = await runEval({
      dataset: path,
      systems: ["direct"],
      out: join(tmp, "many-bad"),
      env: scriptedEnv(server.baseURL),
      log: (l) => logged.push(l),
    });
    expect(logged.filter((l) => l.startsWith("skipped record"))).toHaveLength(20);
    expect(logged).toContain("... and 5 more skipped records (all listed in report.md)");
    expect(res.report.dataset.bad).toHaveLength(25);
    expect(readFileSync(res.files.md, "utf8")).toContain(
      "- record 24 (line 25): missing or empty `question`",
    );
    expect(res.report.systems[0].em).toBe(1);
  });
});

describe("library defaults", () => {
  it("reads the model configuration from the environment when no env is given", async () => {
    const saved = { ...process.env };
    Object.assign(process.env, {
      OPENAI_BASE_URL: server.baseURL,
      OPENAI_API_KEY: "test",
      CODEHOP_MODEL: "scripted-model",
      CODEHOP_MAX_RETRIES: "0",
    });
    try {
      const res = await runEval({
        dataset: join(FIX, "plain.jsonl"),
        systems: ["direct"],
        out: join(tmp, "from-env"),
        log: quiet,
      });
      expect(res.report.systems[0].em).toBeCloseTo(1 / 3, 10);
      expect((res.report.config as any).model).toMatchObject({
        model: "scripted-model",
        baseURL: server.baseURL,
        maxTokens: 1024,
      });
    } finally {
      for (const k of [
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "CODEHOP_MODEL",
        "CODEHOP_MAX_RETRIES",
      ]) {
        if (saved[k] === undefined) delete process.env[k];
        else process.env[k] = saved[k];
      }
    }
  });
});

describe("results database", () => {
  it("is a DB_INVALID error when the output directory holds something that is not a results database", async () => {
    const { mkdirSync, writeFileSync } = await import("node:fs");
    const out = join(tmp, "not-a-db");
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, "eval.db"), "this is not sqlite");
    await expect(runScripted(out, scriptedEnv(server.baseURL))).rejects.toMatchObject({
      code: "CODEHOP_DB_INVALID",
    });
  });
});

describe("per-question time limit", () => {
  it("stores a question over the limit as an error, keeps the others, and the next run retries it", async () => {
    // q2's first reply takes a minute; the limit (5 s) is far above what the other questions
    // take even on a loaded machine, and far below the reply.
    let q2Asked = 0;
    const slowOnQ2: Responder = async (req, ctx) => {
      const reply: any = await trajectoryResponder(directRules())(req, ctx);
      if (req.messages[1]?.content.includes("Marek Zelny") && q2Asked++ === 0)
        reply.delayMs = SLOW_REPLY_MS;
      return reply;
    };
    await withScriptedServer(slowOnQ2, async (slowQ2) => {
      const out = join(tmp, "timeout");
      const env = scriptedEnv(slowQ2.baseURL);
      const res = await runScripted(out, env, { questionTimeoutMs: 5_000 });
      const q2 = res.report.results.find((r) => r.questionId === "p2")!;
      expect(q2.error).toBe("timed out after 5 s");
      expect(q2.wallMs).toBeLessThan(SLOW_REPLY_MS / 4);
      expect(res.report.systems[0].errors).toBe(1);
      expect(res.interrupted).toBe(false);
      const again = await runScripted(out, env);
      expect(again.ran).toBe(1);
      expect(again.report.systems[0].errors).toBe(0);
    });
  });
});
