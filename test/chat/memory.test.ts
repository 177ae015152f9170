import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { ChatOpenAI } from "@langchain/openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chat } from "../../src/apps/chat/app.ts";
import {
  currentTurn,
  renderConversation,
  roundsOf,
  roundsToSummarize,
  summarize,
} from "../../src/apps/chat/conversation/memory.ts";
import {
  DEMO_ROUNDS,
  SUMMARIZER_MARKER,
  chatResponder,
} from "../../src/apps/chat/demo-trajectories.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";
import { writeDemoDocuments } from "./documents.ts";

const rounds = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ user: `question ${i + 1}`, reply: `answer ${i + 1}` }));

describe("rounds of a conversation", () => {
  it("pair each user message with the assistant text after it", () => {
    const messages = [
      new HumanMessage("hi"),
      new AIMessage({ content: "", tool_calls: [{ id: "1", name: "x", args: {} }] }),
      new ToolMessage({ content: "ok", tool_call_id: "1" }),
      new AIMessage("hello"),
      new HumanMessage({
        content: [
          { type: "text", text: "what is this?" },
          { type: "text", text: "[attached file: a.pdf]" },
        ],
      }),
    ];
    expect(roundsOf(messages)).toEqual([
      { user: "hi", reply: "hello" },
      { user: "what is this?\n[attached file: a.pdf]" },
    ]);
    expect(currentTurn(messages)).toEqual({
      earlier: [{ user: "hi", reply: "hello" }],
      message: "what is this?\n[attached file: a.pdf]",
    });
    expect(currentTurn(messages.slice(0, 4)).message).toBe("");
  });

  it("keep the last N verbatim and fold the older ones into the summary once", () => {
    expect(roundsToSummarize(rounds(6), { text: "", rounds: 0 }, 2)).toEqual(rounds(4));
    expect(roundsToSummarize(rounds(6), { text: "s", rounds: 4 }, 2)).toEqual([]);
    expect(roundsToSummarize(rounds(2), { text: "", rounds: 0 }, 4)).toEqual([]);
    // In batches: nothing until `batch` rounds are beyond the window, then all of them.
    expect(roundsToSummarize(rounds(6), { text: "", rounds: 0 }, 4, 3)).toEqual([]);
    expect(roundsToSummarize(rounds(7), { text: "", rounds: 0 }, 4, 3)).toEqual(rounds(3));
    expect(roundsToSummarize(rounds(9), { text: "s", rounds: 3 }, 4, 3)).toEqual([]);
    expect(roundsToSummarize(rounds(10), { text: "s", rounds: 3 }, 4, 3)).toEqual(
      rounds(6).slice(3),
    );
    const view = renderConversation(rounds(6), { text: "They talked.", rounds: 4 });
    expect(view).toBe(
      "Summary of the earlier conversation:\nThey talked.\n\nRecent conversation:\n" +
        "User: question 5\nAssistant: answer 5\nUser: question 6\nAssistant: answer 6\n\n",
    );
    expect(renderConversation([], { text: "", rounds: 0 })).toBe("");
    // Everything summarized (keepRounds 0): only the summary.
    expect(renderConversation(rounds(2), { text: "S.", rounds: 2 })).toBe(
      "Summary of the earlier conversation:\nS.\n\n",
    );
    expect(renderConversation(rounds(2), { text: "", rounds: 0 })).toBe(
      "The conversation so far:\nUser: question 1\nAssistant: answer 1\nUser: question 2\nAssistant: answer 2\n\n",
    );
  });
});

describe("the summary call", () => {
  let server: ScriptedOpenAIServer;
  let reply = "";
  beforeAll(async () => {
    server = await ScriptedOpenAIServer.start({ responder: () => reply });
  });
  afterAll(async () => {
    await server?.close();
  });
  const model = () =>
    new ChatOpenAI({ model: "s", apiKey: "x", configuration: { baseURL: server.baseURL } });

  it("sends the previous summary and the new exchanges; caps an overlong reply", async () => {
    reply = "word ".repeat(100);
    const out = await summarize(model(), { text: "Earlier.", rounds: 3 }, rounds(2), {
      words: 20,
      agentName: "chat",
    });
    expect(out.summary.rounds).toBe(5);
    expect(out.summary.text.split(/\s+/)).toHaveLength(31); // 30 words and the ellipsis
    const sent = server.requests.at(-1)!.request.messages;
    expect(sent[0].content).toContain("at most 20 words");
    expect(sent[1].content).toContain("Summary so far:\nEarlier.");
    expect(sent[1].content).toContain("User: question 2\nAssistant: answer 2");
    expect(out.usage.calls).toBe(1);
  });

  it("an empty reply falls back to the first sentence of each exchange", async () => {
    reply = "";
    const out = await summarize(
      model(),
      { text: "", rounds: 0 },
      [{ user: "When did the bridge open? And why?", reply: "It opened in 1932. It was needed." }],
      { words: 50, agentName: "chat" },
    );
    expect(out.summary.text).toBe(
      "The user asked: When did the bridge open? The assistant answered: It opened in 1932.",
    );
  });
});

describe("round-based retention in a conversation", () => {
  let model: ScriptedOpenAIServer;
  beforeAll(async () => {
    model = await ScriptedOpenAIServer.start({ responder: chatResponder(DEMO_ROUNDS) });
  });
  afterAll(async () => {
    await model?.close();
  });

  it("with keepRounds 2 and summaryBatch 2, folds two rounds in one call, and shows the rest verbatim", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-memory-"));
    const docs = await writeDemoDocuments(mkdtempSync(join(tmpdir(), "codehop-memory-docs-")));
    const config = { home, baseURL: model.baseURL, apiKey: "x", model: "scripted", models: {} };
    let last;
    for (const round of DEMO_ROUNDS.slice(0, 5)) {
      const files = (round.attach ?? []).map((k) => docs[k as "report" | "budget"]);
      last = await chat("mem", round.message, {
        config,
        files,
        settings: { keepRounds: 2, summaryBatch: 2 },
      });
    }
    const summaries = model.requests.filter((r) =>
      r.request.messages[0].content.includes(SUMMARIZER_MARKER),
    );
    // Round 4 sees rounds 1-3 verbatim (one beyond the window: less than a batch); round 5 folds
    // rounds 1 and 2 in one call.
    expect(summaries).toHaveLength(1);
    expect(summaries[0].request.messages[1].content).toContain(`User: ${DEMO_ROUNDS[1].message}`);
    expect(summaries[0].request.messages[1].content).not.toContain(
      `User: ${DEMO_ROUNDS[2].message}`,
    );
    expect(last!.usage.by_agent.chat_summary.calls).toBe(1);
    const fourth = model
      .requestsFor("chat:round4")[0]
      .request.messages.find((m) => m.role === "user")!.content;
    expect(fourth).toContain(`User: ${DEMO_ROUNDS[0].message}`);
    const task = model
      .requestsFor("chat:round5")[0]
      .request.messages.find((m) => m.role === "user")!.content;
    expect(task).toMatch(/^Summary of the earlier conversation:\nThe user asked: Hi!/);
    expect(task).not.toContain(`User: ${DEMO_ROUNDS[0].message}`);
    expect(task).not.toContain(`User: ${DEMO_ROUNDS[1].message}`);
    expect(task).toContain(`User: ${DEMO_ROUNDS[2].message}`);
    expect(task).toContain(`User: ${DEMO_ROUNDS[3].message}`);
  }, 120_000);
});
