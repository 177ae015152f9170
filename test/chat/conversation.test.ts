import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chat, chatHistory, threadFiles, type ChatResult } from "../../src/apps/chat/app.ts";
import {
  DEMO_FILES,
  DEMO_ROUNDS,
  chatResponder,
  newMessageOf,
} from "../../src/apps/chat/demo-trajectories.ts";
import { deleteThread } from "../../src/apps/index.ts";
import { openPersistence } from "../../src/persistence/index.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";
import { writeDemoDocuments } from "./documents.ts";

// A five-round conversation over two attached files the test generates with real libraries (a PDF
// made with pdfkit, a DOCX made with docx): ChatOpenAI talks HTTP to the scripted model, the agent's
// code runs in the sandbox, search_files reads the real per-thread index, and every round is
// checkpointed. Only the model's replies are scripted.

const ROUNDS = DEMO_ROUNDS.slice(0, 5);
let model: ScriptedOpenAIServer;
let home: string;
let docs: { report: string; budget: string };
const results: ChatResult[] = [];
const THREAD = "five-rounds";

const config = () => ({
  home,
  baseURL: model.baseURL,
  apiKey: "scripted",
  model: "scripted",
  models: {},
});

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "codehop-chat-"));
  docs = await writeDemoDocuments(mkdtempSync(join(tmpdir(), "codehop-chat-docs-")));
  model = await ScriptedOpenAIServer.start({ responder: chatResponder(ROUNDS) });
  for (const round of ROUNDS) {
    const files = (round.attach ?? []).map((k) => docs[k as "report" | "budget"]);
    results.push(await chat(THREAD, round.message, { config: config(), files }));
  }
}, 180_000);

afterAll(async () => {
  await model?.close();
});

describe("a five-round conversation with a PDF and a DOCX", () => {
  it("indexes both files in the thread's knowledge base, the PDF by page", () => {
    const [first] = results;
    expect(first.attachments.map((a) => [a.name, a.ok])).toEqual([
      [DEMO_FILES.report, true],
      [DEMO_FILES.budget, true],
    ]);
    const files = threadFiles(THREAD, { config: config() });
    expect(files.map((f) => [f.name, f.kind, f.pages ?? null])).toEqual([
      [DEMO_FILES.report, "pdf", 3],
      [DEMO_FILES.budget, "docx", null],
    ]);
    expect(files.every((f) => f.passages >= 3)).toBe(true);
  });

  it.each(ROUNDS.map((r, i) => [i + 1, r] as const))(
    "round %i answers from the files and cites file and page or section",
    (n, round) => {
      const result = results[n - 1];
      expect(result.round).toBe(n);
      expect(result.status).toBe("done");
      expect(result.reply).toContain(round.expect.reply);
      expect(result.citations.map((c) => c.cite).sort()).toEqual([...round.expect.cites].sort());
      for (const cite of round.expect.cites) expect(result.reply).toContain(`[${cite}]`);
    },
  );

  it("cites the PDF by page number and the DOCX by section", () => {
    const third = results[2].citations;
    expect(third).toContainEqual(
      expect.objectContaining({ file: DEMO_FILES.report, page: 2, section: "p. 2" }),
    );
    expect(third).toContainEqual(
      expect.objectContaining({ file: DEMO_FILES.budget, section: "Budget" }),
    );
  });

  it("shows the agent the passages the real search found, under their labels", () => {
    const observation = model.requests.find((r) => r.rule === "chat:round2" && r.step === 1)!
      .request.messages;
    const text = observation.map((m) => m.content).join("\n");
    expect(text).toMatch(/\[harbor-bridge-report\.pdf, p\. 1\][^\n]*main span is 503 metres/);
  });

  it("gives each round the earlier rounds verbatim and its own message last", () => {
    const fifth = model.requests.find((r) => r.rule === "chat:round5")!.request;
    const task = fifth.messages.find((m) => m.role === "user")!.content;
    expect(newMessageOf(fifth)).toBe(ROUNDS[4].message);
    for (const round of ROUNDS.slice(0, 4)) expect(task).toContain(`User: ${round.message}`);
    expect(task).toContain(`Assistant: ${results[3].reply}`);
    expect(task).not.toContain("Summary of the earlier conversation");
  });

  it("asks the model exactly the scripted steps: nothing is run twice", () => {
    ROUNDS.forEach((round, i) => {
      expect(model.requestsFor(`chat:round${i + 1}`)).toHaveLength(round.steps.length);
    });
    // Four rounds fit the default verbatim window (4): no summary was needed.
    expect(model.requests.every((r) => r.rule?.startsWith("chat:round"))).toBe(true);
  });

  it("keeps the conversation in the thread: messages, history, registry", async () => {
    const history = await chatHistory(THREAD, { config: config() });
    expect(history.map((r) => r.user)).toEqual(ROUNDS.map((r) => r.message));
    expect(history.map((r) => r.reply)).toEqual(results.map((r) => r.reply));
    const p = openPersistence(home);
    try {
      const record = await p.threads.get(THREAD);
      expect(record?.status).toBe("done");
      expect(record?.question).toBe(ROUNDS[0].message);
      expect(record?.answer).toBe(results[4].reply);
      expect(record?.options.app).toBe("chat");
    } finally {
      p.close();
    }
  });

  it("sums usage over the rounds under the chat agent", () => {
    const last = results[results.length - 1].usage.by_agent.chat;
    const steps = ROUNDS.reduce((n, r) => n + r.steps.length, 0);
    expect(last.calls).toBe(steps);
    expect(last.input_tokens).toBeGreaterThan(0);
  });

  it("deleting the thread deletes its files' index with it", async () => {
    expect(threadFiles(THREAD, { config: config() })).toHaveLength(2);
    expect(await deleteThread(THREAD, { config: config() })).toBe(true);
    expect(threadFiles(THREAD, { config: config() })).toEqual([]);
    expect(await chatHistory(THREAD, { config: config() })).toEqual([]);
  });
});

describe("chatHistory", () => {
  it("is empty where nothing ran yet, and reports a database it cannot read", async () => {
    expect(
      await chatHistory("t", { config: { home: join(tmpdir(), "codehop-nothing-here") } }),
    ).toEqual([]);
    const home = mkdtempSync(join(tmpdir(), "codehop-history-broken-"));
    writeFileSync(join(home, "checkpoints.db"), "this is not a SQLite database ".repeat(200));
    await expect(chatHistory("t", { config: { home } })).rejects.toMatchObject({
      code: "CODEHOP_DB_INVALID",
    });
  });
});
