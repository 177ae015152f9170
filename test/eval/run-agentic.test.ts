import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadDataset } from "../../src/eval/datasets.ts";
import { createChatModel, evalModelSettings } from "../../src/eval/model.ts";
import { EvalRecorder } from "../../src/eval/recorder.ts";
import { runEval } from "../../src/eval/runner.ts";
import { createAgenticSystem } from "../../src/eval/system-agentic.ts";
import { ingestDocuments } from "../../src/ingest/ingest.ts";
import { openKnowledgeSource } from "../../src/store/open.ts";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
  type TrajectoryRule,
} from "../../src/testing/scripted-openai-server.ts";
import {
  agenticRules,
  directRules,
  EVAL_FIXTURES as FIX,
  evalTmpDir,
  FIXTURE_PAGES,
  Q2,
  ragRules,
  runScripted,
  scriptedEnv,
} from "./scripted-eval.ts";

// The agentic system is the real app (ask/resume, real graphs, real sandbox, real corpus search,
// real SQLite checkpoints); only the model is scripted.
const tmp = evalTmpDir("codehop-eval-agentic-");
let server: ScriptedOpenAIServer;
let pageDelayMs = 0;

beforeAll(async () => {
  const rules: TrajectoryRule[] = [...agenticRules(), ...ragRules(), ...directRules()];
  const responder = trajectoryResponder(rules);
  server = await ScriptedOpenAIServer.start({
    responder: async (req, ctx) => {
      const reply: any = await responder(req, ctx);
      // a slow page agent, to interrupt a run while a question is three agents deep
      if (pageDelayMs && req.messages[0]?.content.startsWith("You are the page_search agent"))
        reply.delayMs = pageDelayMs;
      return reply;
    },
  });
});
afterAll(async () => server.close());

const readJsonl = (path: string) =>
  readFileSync(path, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));

describe.each([
  ["hotpotqa.json", ["h1", "h2", "h3"]],
  ["2wiki.json", ["w1", "w2", "w3"]],
  ["musique.jsonl", ["2hop__1", "2hop__2", "2hop__3"]],
  ["plain.jsonl", ["p1", "p2", "p3"]],
] as const)("agentic vs rag vs direct end to end on %s", (file, ids) => {
  it("runs all three systems with the same model and reports what the scripts imply", async () => {
    const out = join(tmp, file);
    // plain JSONL has no paragraphs: retrieval uses the configured corpus
    let extra: Record<string, string> = {};
    if (file === "plain.jsonl") {
      const corpus = join(tmp, "plain-corpus.db");
      await ingestDocuments(corpus, FIXTURE_PAGES);
      extra = { CODEHOP_CORPUS: corpus };
    }
    const res = await runEval({
      dataset: join(FIX, file),
      out,
      env: scriptedEnv(server.baseURL, extra),
      concurrency: 2,
      log: () => undefined,
    });
    expect(res.report.dataset.bad).toHaveLength(1);
    const by = Object.fromEntries(res.report.systems.map((s) => [s.system, s]));
    expect(Object.keys(by)).toEqual(["agentic", "rag", "direct"]);
    expect(by.agentic.errors).toBe(0);
    expect(by.agentic.em).toBeCloseTo(2 / 3, 10);
    expect(by.agentic.f1).toBeCloseTo(2 / 3, 10);
    expect(by.agentic.coverEm).toBe(1);
    expect(by.rag.em).toBeCloseTo(2 / 3, 10);
    expect(by.direct.em).toBeCloseTo(1 / 3, 10);
    // calls per agent: Q1 manager 2 + wiki 2; Q2 manager 3 + wiki 5 + page 2; Q3 manager 1
    expect(by.agentic.avgModelCalls).toBeCloseTo((4 + 10 + 1) / 3, 10);
    expect(by.agentic.perAgent.manager.avgCalls).toBeCloseTo(2, 10);
    expect(by.agentic.perAgent.wikipedia_search.avgCalls).toBeCloseTo(7 / 3, 10);
    expect(by.agentic.perAgent.page_search.avgCalls).toBeCloseTo(2 / 3, 10);
    expect(by.agentic.avgSteps).toBeCloseTo((2 + 3 + 1) / 3, 10);
    const q2 = res.report.results.find((r) => r.system === "agentic" && r.question === Q2)!;
    expect(q2.prediction).toBe("40 metres");
    expect(q2.status).toBe("final_answer");
    expect(q2.sources).toContain("Red Tower");
    if (file !== "plain.jsonl") {
      // supporting pages of Q2: Marek Zelny and Red Tower; the agents opened only the Red Tower page
      expect(q2.sources).toEqual(["Red Tower"]);
      expect(q2.supportRecall).toBe(0.5);
      const agentic = res.report.results.filter((r) => r.system === "agentic");
      expect(by.agentic.supportRecall).toBeCloseTo(
        agentic.reduce((a, r) => a + r.supportRecall!, 0) / 3,
        10,
      );
    } else {
      expect(by.agentic.supportRecall).toBeUndefined(); // plain JSONL marks no supporting pages
    }
    expect(q2.threadId).toBe(`${res.report.runId}:agentic:${ids[1]}`);
    // the agents really searched the dataset's own paragraphs
    expect(
      server
        .requestsFor("page:tower")
        .at(-1)!
        .request.messages.findLast((m) => m.content.startsWith("Observation:"))!.content,
    ).toContain("40-metre observation tower in Porto");
    // transcripts of the correct answers, one file per agent
    const dir = join(out, "trajectories", "agentic");
    expect(res.files.trajectories.filter((f) => f.startsWith(dir)).sort()).toEqual(
      ["manager", "page_search", "wikipedia_search"].map((a) => join(dir, `${a}.jsonl`)),
    );
    const manager = readJsonl(join(dir, "manager.jsonl"));
    expect(manager.map((t) => t.metadata.question_id)).toEqual([ids[0], ids[1]]);
    expect(manager[1].messages[0]).toMatchObject({ role: "system" });
    expect(manager[1].messages[0].content).toMatch(/^You are the manager agent/);
    expect(manager[1].messages.at(-1)).toEqual({
      role: "assistant",
      content: expect.stringContaining('final_answer("40 metres")'),
    });
    // every turn verbatim, even those the agent condensed in its later prompts
    const turns = manager[1].messages;
    expect(turns.map((m: any) => m.role)).toEqual([
      "system",
      "user",
      "assistant",
      "user",
      "assistant",
      "user",
      "assistant",
    ]);
    expect(turns[1].content).toContain(Q2);
    expect(turns[2].content).toContain("First the city.");
    expect(turns[3].content).toContain("Porto");
    expect(turns[4].content).toContain("now the tower there");
    expect(turns[5].content).toContain("The Red Tower in Porto is 40 metres tall.");
    expect(turns[6].content).toContain('final_answer("40 metres")');
    const wiki = readJsonl(join(dir, "wikipedia_search.jsonl"));
    expect(wiki.map((t) => t.metadata.question_id)).toEqual([ids[0], ids[1], ids[1]]);
    expect(
      wiki.every((t) => t.messages[0].content.startsWith("You are the wikipedia_search agent")),
    ).toBe(true);
    const page = readJsonl(join(dir, "page_search.jsonl"));
    expect(page).toHaveLength(1);
    expect(page[0].messages.at(-1).content).toContain("40 metres (a 40-metre observation tower)");
  });
});

describe("agentic system", () => {
  it("the recorder attributes every model call to the right agent, matching the app's own accounting", async () => {
    const corpus = join(tmp, "fixture-corpus.db");
    await ingestDocuments(corpus, FIXTURE_PAGES);
    const source = openKnowledgeSource({ corpus });
    const env = scriptedEnv(server.baseURL);
    const system = createAgenticSystem({
      model: createChatModel(evalModelSettings(env), "test"),
      source,
      home: join(tmp, "recorder"),
    });
    try {
      const ex = loadDataset(join(FIX, "plain.jsonl")).examples[1];
      const recorder = new EvalRecorder("agentic");
      const res = await system.answer(ex, {
        threadId: "recorder-q2",
        recorder,
        signal: new AbortController().signal,
      });
      expect(res.answer).toBe("40 metres");
      expect(recorder.usage).toEqual(res.usage);
      expect(
        Object.fromEntries(Object.entries(recorder.usage).map(([a, u]) => [a, u.calls])),
      ).toEqual({
        manager: 3,
        wikipedia_search: 5,
        page_search: 2,
      });
      expect(recorder.transcripts().map((t) => t.agent)).toEqual([
        "manager",
        "wikipedia_search",
        "wikipedia_search",
        "page_search",
      ]);
    } finally {
      await system.close?.();
      await source.close();
    }
  });

  it("an interrupted agentic question is resumed from its thread on the rerun, without redoing finished sub-agent calls", async () => {
    const out = join(tmp, "resume");
    const env = scriptedEnv(server.baseURL);
    const ac = new AbortController();
    pageDelayMs = 1500;
    const count = (rule: string) => server.requestsFor(rule).length;
    const before = {
      q1: count("manager:q1"),
      zelny: count("wiki:zelny"),
      page: count("page:tower"),
    };
    const timer = setInterval(() => {
      if (count("page:tower") > before.page) ac.abort();
    }, 10);
    let first;
    try {
      first = await runScripted(out, env, {
        dataset: join(FIX, "hotpotqa.json"),
        systems: ["agentic"],
        concurrency: 1,
        signal: ac.signal,
      });
    } finally {
      clearInterval(timer);
      pageDelayMs = 0;
    }
    expect(first.interrupted).toBe(true);
    expect(first.report.results.map((r) => r.questionId)).toEqual(["h1"]);
    const zelnyCalls = count("wiki:zelny");
    expect(zelnyCalls - before.zelny).toBe(2);
    const again = await runScripted(out, env, {
      dataset: join(FIX, "hotpotqa.json"),
      systems: ["agentic"],
      concurrency: 1,
    });
    expect(again.skipped).toBe(1);
    expect(again.ran).toBe(2);
    expect(count("manager:q1") - before.q1).toBe(2); // Q1 was not asked again
    expect(count("wiki:zelny")).toBe(zelnyCalls); // the finished sub-agent call came from the journal
    const q2 = again.report.results.find((r) => r.questionId === "h2")!;
    expect(q2.prediction).toBe("40 metres");
    expect(q2.threadId).toBe(`${again.report.runId}:agentic:h2`);
    expect(again.report.systems[0].em).toBeCloseTo(2 / 3, 10);
    expect(again.report.partial).toBe(false);
  });
  it("an agentic question over --timeout is stored as an error and resumed from its thread by the next run", async () => {
    const out = join(tmp, "agentic-timeout");
    const env = scriptedEnv(server.baseURL);
    const count = (rule: string) => server.requestsFor(rule).length;
    // h2's page agent answers after the question's limit; h1 needs no page agent and must finish
    // within it, on a loaded machine too (at 1.5 s it did not at load 60).
    pageDelayMs = 10_000;
    let first;
    try {
      first = await runScripted(out, env, {
        dataset: join(FIX, "hotpotqa.json"),
        systems: ["agentic"],
        limit: 2,
        concurrency: 1,
        questionTimeoutMs: 8000,
      });
    } finally {
      pageDelayMs = 0;
    }
    const h2 = first.report.results.find((r) => r.questionId === "h2")!;
    expect(h2.error).toBe("timed out after 8 s");
    expect(first.report.results.find((r) => r.questionId === "h1")!.error).toBeUndefined();
    const zelny = count("wiki:zelny");
    const again = await runScripted(out, env, {
      dataset: join(FIX, "hotpotqa.json"),
      systems: ["agentic"],
      limit: 2,
      concurrency: 1,
    });
    expect(again.ran).toBe(1);
    expect(count("wiki:zelny")).toBe(zelny); // resumed: the finished sub-agent call was not repeated
    expect(again.report.results.find((r) => r.questionId === "h2")!.prediction).toBe("40 metres");
  });
});
