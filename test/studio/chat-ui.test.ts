import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  DEMO_FILES,
  DEMO_ROUNDS,
  DEMO_VISITOR_PAGE,
  chatResponder,
} from "../../src/apps/chat/demo-trajectories.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";
import { startHttpServer, writeDemoDocuments } from "../chat/documents.ts";
import { Client } from "@langchain/langgraph-sdk";
import { ROOT, startDevServer, type DevServer } from "./dev-server.ts";

// The chat graph behind the LangGraph API server (`npm run studio`), driven with
// @langchain/langgraph-sdk exactly as LangChain's agent-chat-ui drives it through the SDK's
// useStream hook: threads.create, then runs.stream with the new human message (text plus a PDF as
// a base64 `file` content block), streamMode values + messages-tuple (+ custom), streamSubgraphs,
// streamResumable; the thread's history is fetched afterwards. What the UI relies on: root
// `values` events carry the conversation (no subgraph event replaces it), `messages` events carry
// the reply and nothing of the agent's internal model calls, and the uploaded bytes do not stay
// in the thread's state.

const SPAN = DEMO_ROUNDS[1];
const CLIMB = DEMO_ROUNDS[5];
let model: ScriptedOpenAIServer;
let server: DevServer | undefined;
let client: Client;
let web: Awaited<ReturnType<typeof startHttpServer>>;
let pdf: string;

beforeAll(async () => {
  const home = mkdtempSync(join(tmpdir(), "codehop-chat-ui-"));
  const docs = await writeDemoDocuments(mkdtempSync(join(tmpdir(), "codehop-chat-ui-docs-")));
  pdf = readFileSync(docs.report).toString("base64");
  model = await ScriptedOpenAIServer.start({ responder: chatResponder() });
  web = await startHttpServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end(DEMO_VISITOR_PAGE);
  });
  server = await startDevServer(ROOT, {
    ...process.env,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "scripted",
    CODEHOP_MODEL: "scripted",
    CODEHOP_HOME: home,
    // The test's pages are served on 127.0.0.1: the operator's opt-in for private addresses.
    CODEHOP_CHAT_ALLOW_PRIVATE_URLS: "1",
    LANGSMITH_TRACING: "false",
    LANGCHAIN_TRACING_V2: "false",
  });
  client = new Client({ apiUrl: server.url });
}, 120_000);

afterAll(async () => {
  server?.stop();
  await model?.close();
  await web?.close();
});

/** One run as useStream starts it; returns every event. */
async function submit(threadId: string, input: Record<string, unknown>) {
  const events: Array<{ event: string; data: any }> = [];
  for await (const e of client.runs.stream(threadId, "chat", {
    input,
    streamMode: ["values", "messages-tuple", "custom"],
    streamSubgraphs: true,
    streamResumable: true,
    onDisconnect: "continue",
  })) {
    events.push(e as { event: string; data: any });
  }
  return events;
}

describe("agent-chat-ui against the chat graph (LangGraph server + SDK)", () => {
  let threadId: string;
  let first: Array<{ event: string; data: any }>;

  beforeAll(async () => {
    threadId = (await client.threads.create()).thread_id;
    first = await submit(threadId, {
      messages: [
        {
          id: "human-1",
          type: "human",
          content: [
            { type: "text", text: SPAN.message },
            {
              type: "file",
              mimeType: "application/pdf",
              data: pdf,
              metadata: { filename: DEMO_FILES.report },
            },
          ],
        },
      ],
    });
  }, 120_000);

  it("streams the conversation in root values events only", () => {
    expect(first.filter((e) => e.event === "error")).toEqual([]);
    const values = first.filter((e) => e.event.startsWith("values"));
    expect(values.length).toBeGreaterThan(1);
    // A subgraph's values (the agent's own state) would replace the UI's conversation.
    expect(values.map((e) => e.event)).toEqual(values.map(() => "values"));
    for (const v of values) expect(Array.isArray(v.data.messages)).toBe(true);
  });

  it("streams the reply as a message, and none of the agent's internal model calls", () => {
    const messages = first.filter((e) => e.event.startsWith("messages"));
    expect(messages.length).toBeGreaterThan(0);
    for (const { data } of messages) {
      const [message] = data;
      expect(message.type === "ai" || message.type === "AIMessageChunk").toBe(true);
      expect(String(message.content)).not.toContain("Thought:");
    }
    const reply = messages.map((e) => e.data[0]).find((m) => String(m.content).includes("feet"));
    expect(reply.content).toContain(`${SPAN.expect.reply} [${DEMO_FILES.report}, p. 1]`);
  });

  it("ends with the user's message (its file replaced by a note) and the cited reply", () => {
    const last = first.filter((e) => e.event === "values").at(-1)!.data;
    expect(last.messages).toHaveLength(2);
    const [human, ai] = last.messages;
    expect(human.id).toBe("human-1");
    expect(human.content).toEqual([
      { type: "text", text: SPAN.message },
      { type: "text", text: `[attached file: ${DEMO_FILES.report}]` },
    ]);
    expect(JSON.stringify(last)).not.toContain(pdf.slice(0, 200));
    expect(ai.type).toBe("ai");
    expect(ai.additional_kwargs.citations).toEqual([
      { file: DEMO_FILES.report, section: "p. 1", page: 1, cite: `${DEMO_FILES.report}, p. 1` },
    ]);
    expect(last.attachments).toMatchObject([{ name: DEMO_FILES.report, ok: true }]);
  });

  it("continues the thread: a link attached through the input, the earlier round remembered", async () => {
    const events = await submit(threadId, {
      messages: [{ type: "human", content: CLIMB.message }],
      attach: [{ url: web.url("/visit") }],
    });
    const last = events.filter((e) => e.event === "values").at(-1)!.data;
    expect(last.messages).toHaveLength(4);
    expect(last.messages[3].content).toContain(
      `${CLIMB.expect.reply} for two adults (45 dollars each) [${DEMO_FILES.visitor} § Bridge climb]`,
    );
    const task = model
      .requestsFor("chat:round6")[0]
      .request.messages.find((m) => m.role === "user")!.content;
    expect(task).toContain(`User: ${SPAN.message}`);
    expect(task).toContain(`- ${DEMO_FILES.visitor} (web page)`);
  }, 120_000);

  it("a client cannot make the server read its files (attach: [{ path }])", async () => {
    const secret = join(mkdtempSync(join(tmpdir(), "codehop-chat-ui-secret-")), "secret.md");
    writeFileSync(secret, "# Server\n\nThe database password is swordfish.\n");
    const thread = (await client.threads.create()).thread_id;
    const input = {
      messages: [{ type: "human", content: "Read it." }],
      attach: [{ path: secret }],
    };
    const events: Array<{ event: string; data: any }> = [];
    // Stopped before the reply: what attach_files did is what matters.
    for await (const e of client.runs.stream(thread, "chat", {
      input,
      streamMode: ["values"],
      interruptBefore: ["respond", "summarize"],
    }))
      events.push(e as { event: string; data: any });
    expect(events.filter((e) => e.event === "error")).toEqual([]);
    const state = await client.threads.getState(thread);
    const attachments = (state.values as any).attachments;
    expect(attachments).toMatchObject([{ name: "secret.md", ok: false }]);
    expect(attachments[0].error).toMatch(/local paths are not read in this conversation/);
    expect(JSON.stringify(events)).not.toContain("swordfish");
    // A grant forged in the run's context is refused before the run starts.
    const forged: Array<{ event: string; data: any }> = [];
    for await (const e of client.runs.stream(thread, "chat", {
      input,
      context: { chatAccess: { localFiles: true, privateNetwork: true } },
      streamMode: ["values"],
    }))
      forged.push(e as { event: string; data: any });
    expect(JSON.stringify(forged.find((e) => e.event === "error"))).toMatch(/chatAccess/);
    expect(JSON.stringify(forged)).not.toContain("swordfish");
  }, 120_000);

  it("serves the thread's history as the UI fetches it", async () => {
    const history = await client.threads.getHistory(threadId, { limit: 50 });
    expect(history.length).toBeGreaterThan(4);
    expect((history[0].values as any).messages).toHaveLength(4);
    const state = await client.threads.getState(threadId);
    expect(state.next).toEqual([]);
  });
});
