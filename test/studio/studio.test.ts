import { mkdtempSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureDemoCorpus, startDemoModelServer } from "../../src/apps/qa/demo.ts";
import { DEMO_ANSWERS, DEMO_QUESTIONS } from "../../src/apps/qa/demo-trajectories.ts";
import { allDemosResponder, DEMO_RESEARCH } from "../../src/apps/research/demo-trajectories.ts";
import type { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";
import { ROOT, startDevServer, type DevServer } from "./dev-server.ts";

// LangGraph Studio talks to the LangGraph API server that `npm run studio` starts
// (`langgraphjs dev`). The Studio UI itself is hosted online, so this test drives what it calls:
// the real server, started on a free port with our langgraph.json, through @langchain/langgraph-sdk.
// The model is the scripted OpenAI-compatible server; the corpus is the demo corpus.

let model: ScriptedOpenAIServer;
let api: DevServer | undefined;
let client: Client;

beforeAll(async () => {
  const home = mkdtempSync(join(tmpdir(), "codehop-studio-"));
  const corpus = await ensureDemoCorpus(home);
  model = await startDemoModelServer({ responder: allDemosResponder() });
  api = await startDevServer(ROOT, {
    ...process.env,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "scripted",
    CODEHOP_MODEL: "scripted",
    CODEHOP_CORPUS: corpus,
    CODEHOP_HOME: home,
    LANGSMITH_TRACING: "false",
    LANGCHAIN_TRACING_V2: "false",
  });
  client = new Client({ apiUrl: api.url });
}, 120_000);

afterAll(async () => {
  api?.stop();
  await model?.close();
});

describe("LangGraph API server (Studio backend) with langgraph.json", () => {
  it("lists every graph of langgraph.json as an assistant", async () => {
    const assistants = await client.assistants.search({ limit: 50 });
    const graphIds = assistants.map((a) => a.graph_id).sort();
    expect(graphIds).toEqual(
      expect.arrayContaining([
        "chat",
        "code_agent",
        "manager",
        "page_search",
        "wikipedia_search",
        "researcher",
      ]),
    );
  });

  it("draws the manager with the nested agents and their plan/act/observe nodes (xray)", async () => {
    const [manager] = await client.assistants.search({ graphId: "manager" });
    const drawing = await client.assistants.getGraph(manager.assistant_id, { xray: true });
    const ids = drawing.nodes.map((n) => String(n.id));
    // xray replaces an act node that invokes an agent by that agent's nodes, prefixed with the
    // namespace: manager -> act:* (wikipedia_search) -> act:act:* (page_search).
    expect(ids).toEqual(expect.arrayContaining(["plan", "observe", "planning", "final_answer"]));
    expect(ids).toEqual(expect.arrayContaining(["act:plan", "act:observe", "act:planning"]));
    expect(ids).toEqual(expect.arrayContaining(["act:act:plan", "act:act:act", "act:act:observe"]));
  }, 60_000);

  it("answers a question end to end and keeps a readable thread history", async () => {
    const [manager] = await client.assistants.search({ graphId: "manager" });
    const thread = await client.threads.create();
    const before = model.requests.length;
    const values = (await client.runs.wait(thread.thread_id, manager.assistant_id, {
      input: { question: DEMO_QUESTIONS.towers },
    })) as Record<string, any>;
    expect(values.answer).toBe(DEMO_ANSWERS.towers);
    expect(model.requests.length).toBeGreaterThan(before);

    const history = await client.threads.getHistory(thread.thread_id, { limit: 100 });
    expect(history.length).toBeGreaterThan(4);
    // Newest first: the last checkpoint holds the answer; the first one the question only.
    expect((history[0].values as any).answer).toBe(DEMO_ANSWERS.towers);
    expect((history[history.length - 1].values as any).answer ?? null).toBeNull();
    const state = await client.threads.getState(thread.thread_id, undefined, { subgraphs: true });
    expect((state.values as any).question).toBe(DEMO_QUESTIONS.towers);
  }, 120_000);

  it("writes a cited, verified research report with the researcher graph", async () => {
    const [researcher] = await client.assistants.search({ graphId: "researcher" });
    const thread = await client.threads.create();
    const values = (await client.runs.wait(thread.thread_id, researcher.assistant_id, {
      input: { topic: DEMO_RESEARCH.topic },
    })) as Record<string, any>;
    expect(values.status).toBe("final_answer");
    expect(values.answer).toContain(`# ${DEMO_RESEARCH.title}`);
    expect(values.answer).toContain("## References");
    expect(values.citations).toHaveLength(4);
    expect(values.verification).toMatchObject({ checked: 12, supported: 12 });
  }, 120_000);

  it("an empty topic, question or message: CODEHOP_INPUT_INVALID with a readable message, not zod's issue array", async () => {
    const CHAT_SHAPE =
      '{ messages: [{ role: "user", content: "..." }], attach?: [{ path } | { url } | { name, data }] }';
    const before = model.requests.length;
    for (const [graphId, input, expected] of [
      [
        "researcher",
        { topic: "" },
        'Invalid input for the "researcher" graph: topic: the research topic is empty: give a subject to research (expected { topic: string, maxQuestions?: integer }). [CODEHOP_INPUT_INVALID]',
      ],
      [
        "researcher",
        { topic: "Towers", maxQuestions: 40 },
        'Invalid input for the "researcher" graph: maxQuestions: maxQuestions must be from 1 to 12 (expected { topic: string, maxQuestions?: integer }). [CODEHOP_INPUT_INVALID]',
      ],
      [
        "code_agent",
        { task: "" },
        'Invalid input for the "code_agent" graph: task: the task is empty: say what to do (expected { task: string, context?: object }). [CODEHOP_INPUT_INVALID]',
      ],
      [
        "manager",
        { question: "" },
        'Invalid input for the "manager" graph: question: the question is empty: ask something (expected { question: string }). [CODEHOP_INPUT_INVALID]',
      ],
      [
        "chat",
        { messages: [] },
        `The conversation's last message is not a user message with text: there is nothing to answer (send { messages: [{ role: "user", content: "..." }] }). [CODEHOP_INPUT_INVALID]`,
      ],
      [
        "chat",
        { messages: [{ content: "no role" }], attach: "report.pdf" },
        `Invalid input for the "chat" graph: messages.0: not a message (give { role: "user", content: "..." }); attach: expected a list of files or links (expected ${CHAT_SHAPE}). [CODEHOP_INPUT_INVALID]`,
      ],
    ] as const) {
      const [assistant] = await client.assistants.search({ graphId });
      const thread = await client.threads.create();
      const thrown = await client.runs
        .wait(thread.thread_id, assistant.assistant_id, { input } as never)
        .then(
          () => undefined,
          (err: Error) => err,
        );
      // The API server reports the failed run as { error, message } (the SDK throws it as JSON).
      const sent = JSON.parse(String(thrown?.message).replace(/^Error: /, ""));
      expect(sent.error, graphId).toBe("CodehopError");
      expect(sent.message).toBe(expected);
      const state = await client.threads.getState(thread.thread_id);
      const failed = (state as { tasks?: { error?: unknown }[] }).tasks?.find((t) => t.error);
      if (failed) expect(String(failed.error)).not.toContain("too_small");
    }
    // Refused before any model call.
    expect(model.requests.length).toBe(before);
  }, 120_000);

  it("a client cannot send the runs to its own model endpoint: refused, naming the key, and no request reaches it", async () => {
    // The client's "model": it would receive the operator's API key and answer with its own code.
    let reached = 0;
    const listener = createHttpServer((_req, res) => {
      reached++;
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
    await new Promise<void>((ok) => listener.listen(0, "127.0.0.1", ok));
    const clientURL = `http://127.0.0.1:${(listener.address() as { port: number }).port}/v1`;
    try {
      const [manager] = await client.assistants.search({ graphId: "manager" });
      for (const [where, key, settings] of [
        [
          "context",
          "context.modelSettings.baseURL",
          { context: { modelSettings: { baseURL: clientURL } } },
        ],
        [
          "configurable",
          "config.configurable.modelSettings.baseURL",
          { config: { configurable: { modelSettings: { baseURL: clientURL } } } },
        ],
        ["context", "context.corpus", { context: { corpus: "/etc/hosts" } }],
      ] as const) {
        const thread = await client.threads.create();
        const before = model.requests.length;
        // The API server reports the failed run as { error, message } (the SDK throws it as JSON).
        const thrown = await client.runs
          .wait(thread.thread_id, manager.assistant_id, {
            input: { question: DEMO_QUESTIONS.towers },
            ...settings,
          } as never)
          .then(
            () => undefined,
            (err: Error) => err,
          );
        const sent = JSON.parse(String(thrown?.message).replace(/^Error: /, ""));
        expect(sent.message, where).toContain(`\`${key}\` is an operator setting`);
        expect(sent.message).toContain("CODEHOP_CLIENT_SETTING_REFUSED");
        expect(model.requests.length).toBe(before);
      }
      expect(reached).toBe(0);
    } finally {
      await new Promise((ok) => listener.close(ok));
    }
  }, 120_000);
});
