import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEMO_FILES, DEMO_ROUNDS, chatResponder } from "../../src/apps/chat/demo-trajectories.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";
import { type CliRun, cliEnv, runCli, spawnCli } from "../app/cli-helpers.ts";
import { messageWithPdf, writeDemoDocuments } from "../chat/documents.ts";
import { postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";
import { waitForStderr } from "./processes.ts";

// The chat graph behind `codehop serve` + a `codehop worker` (codehop's own langgraph.json, on a
// throwaway PostgreSQL cluster), driven with @langchain/langgraph-sdk as agent-chat-ui drives it:
// a round with a PDF uploaded as a base64 `file` block, then the thread's state and history as
// the UI reads them. The UI renders plain message dicts ({ type, content, id, ... }), as the
// LangGraph API server returns them, not LangChain's constructor JSON ({ lc: 1, ... }).

const SPAN = DEMO_ROUNDS[1];
const cluster = useTestCluster();
let model: ScriptedOpenAIServer;
let server: CliRun | undefined;
let worker: CliRun | undefined;
let client: Client;
let pdf: string;
let db: pg.Pool;
let workerHome: string;
let databaseUrl: string;

beforeAll(async () => {
  if (postgresMissing) return;
  databaseUrl = await cluster().createDatabase("chat_serve");
  db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  model = await ScriptedOpenAIServer.start({ responder: chatResponder() });
  const docs = await writeDemoDocuments(mkdtempSync(join(tmpdir(), "codehop-chat-serve-docs-")));
  pdf = readFileSync(docs.report).toString("base64");
  workerHome = mkdtempSync(join(tmpdir(), "codehop-chat-serve-worker-"));
  const env = (home: string) =>
    cliEnv({
      OPENAI_BASE_URL: model.baseURL,
      OPENAI_API_KEY: "scripted",
      CODEHOP_MODEL: "scripted",
      CODEHOP_MAX_RETRIES: "0",
      CODEHOP_DATABASE_URL: databaseUrl,
      // The server and its worker do not share a data directory.
      CODEHOP_HOME: home,
    });
  server = spawnCli(
    ["serve", "--port", "0"],
    env(mkdtempSync(join(tmpdir(), "codehop-chat-serve-server-"))),
  );
  const url = (await waitForStderr(server, /listening on (http:\/\/\S+)/, "codehop serve"))[1];
  worker = spawnCli(["worker", "--worker-id", "cw1", "--concurrency", "1"], env(workerHome));
  await waitForStderr(worker, /cw1 ready/, "codehop worker");
  client = new Client({ apiUrl: url });
}, 180_000);

afterAll(async () => {
  const all = [worker, server].filter((r): r is CliRun => !!r);
  for (const run of all) if (run.child.exitCode === null) run.child.kill("SIGKILL");
  await Promise.all(all.map((r) => r.done));
  await model?.close();
  await db?.end();
});

/** Every object in `value` that carries LangChain's serialization marker. */
function constructorJson(value: unknown): unknown[] {
  const found: unknown[] = [];
  JSON.stringify(value, (key, v) => {
    if (v && typeof v === "object" && "lc" in v && (v as { type?: unknown }).type === "constructor")
      found.push(v);
    return v;
  });
  return found;
}

describe.skipIf(postgresMissing)("the chat graph on codehop serve (LangGraph SDK)", () => {
  let threadId: string;
  let events: Array<{ event: string; data: any }>;

  beforeAll(async () => {
    threadId = (await client.threads.create()).thread_id;
    events = [];
    for await (const e of client.runs.stream(threadId, "chat", {
      input: {
        messages: [messageWithPdf("human-1", SPAN.message, pdf, DEMO_FILES.report)],
      },
      streamMode: ["values", "messages-tuple"],
    }))
      events.push(e as { event: string; data: any });
  }, 180_000);

  /** The conversation as a chat UI shows it: plain dicts, the file replaced by a note. */
  function expectPlainConversation(messages: any[]) {
    expect(messages).toHaveLength(2);
    const [human, ai] = messages;
    expect(human).toMatchObject({
      type: "human",
      id: "human-1",
      content: [
        { type: "text", text: SPAN.message },
        { type: "text", text: `[attached file: ${DEMO_FILES.report}]` },
      ],
    });
    expect(ai.type).toBe("ai");
    expect(typeof ai.id).toBe("string");
    expect(ai.content).toContain(`${SPAN.expect.reply} [${DEMO_FILES.report}, p. 1]`);
    expect(constructorJson(messages)).toEqual([]);
  }

  it("streams the round", () => {
    expect(events.filter((e) => e.event === "error")).toEqual([]);
    expectPlainConversation(events.filter((e) => e.event === "values").at(-1)!.data.messages);
  });

  it("serves the thread's state, history and values as plain message dicts", async () => {
    const state = await client.threads.getState(threadId);
    expect(state.next).toEqual([]);
    expectPlainConversation((state.values as any).messages);
    const history = await client.threads.getHistory(threadId, { limit: 50 });
    expect(history.length).toBeGreaterThan(2);
    expectPlainConversation((history[0].values as any).messages);
    expect(constructorJson(history)).toEqual([]);
    const thread = await client.threads.get(threadId);
    expectPlainConversation((thread.values as any).messages);
  });

  it("keeps the uploaded file once, outside the run's input, events and checkpoints", async () => {
    const bytes = Buffer.from(pdf, "base64");
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    const { rows: stored } = await db.query(
      "SELECT thread_id, bytes FROM codehop_uploads WHERE sha256 = $1",
      [sha256],
    );
    expect(stored).toHaveLength(1);
    expect(stored[0].thread_id).toBe(threadId);
    expect(Buffer.compare(stored[0].bytes, bytes)).toBe(0);
    // Every other table of the database, as text (bytea as hex): no piece of the file.
    const base64Piece = pdf.slice(1000, 1200);
    const pieces = [
      base64Piece,
      Buffer.from(base64Piece).toString("hex"),
      bytes.subarray(600, 700).toString("hex"),
    ];
    const { rows: tables } = await db.query(
      `SELECT table_schema, table_name FROM information_schema.tables
       WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')
         AND table_name <> 'codehop_uploads'`,
    );
    expect(tables.map((t) => t.table_name)).toEqual(
      expect.arrayContaining(["codehop_runs", "codehop_run_events", "linear_steps"]),
    );
    for (const { table_schema, table_name } of tables) {
      const { rows } = await db.query(
        `SELECT t::text AS row FROM "${table_schema}"."${table_name}" t`,
      );
      const text = rows.map((r) => r.row).join("\n");
      for (const piece of pieces)
        expect(text.includes(piece), `${table_name} holds the file`).toBe(false);
    }
  });

  it("a run refused because its thread is busy leaves no upload behind", async () => {
    const busy = (await client.threads.create()).thread_id;
    // A run that waits a minute before starting keeps the thread busy.
    const first = await client.runs.create(busy, "chat", {
      input: { messages: [{ id: "h-wait", type: "human", content: "hello" }] },
      afterSeconds: 60,
    });
    const other = Buffer.concat([Buffer.from(pdf, "base64"), Buffer.from("refused")]);
    const sha256 = createHash("sha256").update(other).digest("hex");
    await expect(
      client.runs.create(busy, "chat", {
        input: {
          messages: [messageWithPdf("h-refused", "read it", other.toString("base64"), "x.pdf")],
        },
        multitaskStrategy: "reject",
      }),
    ).rejects.toThrow(/422|already running/);
    const { rows } = await db.query(
      "SELECT count(*)::int AS n FROM codehop_uploads WHERE sha256 = $1",
      [sha256],
    );
    expect(rows[0].n).toBe(0);
    await client.runs.cancel(busy, first.run_id);
    await client.threads.delete(busy);
  });

  it("a refused input keeps the conversation's title, status and rounds (codehop threads)", async () => {
    // A message without a role or type: the chat graph refuses it before any node runs.
    const run = await client.runs.create(threadId, "chat", {
      input: { messages: [{ content: "x" }] },
    });
    await client.runs.join(threadId, run.run_id);
    expect((await client.runs.get(threadId, run.run_id)).status).toBe("error");
    const listed = await runCli(
      ["threads", "--json"],
      cliEnv({ CODEHOP_DATABASE_URL: databaseUrl, CODEHOP_HOME: workerHome }),
    );
    expect(listed.code, listed.stderr).toBe(0);
    const row = JSON.parse(listed.stdout).find((t: any) => t.thread_id === threadId);
    // The first round's message is the title (not the input as JSON), the status the last
    // answered round's.
    expect(row).toMatchObject({ question: SPAN.message, status: "done", error: null });
    expectPlainConversation(((await client.threads.getState(threadId)).values as any).messages);
  });

  it("deleting the thread through the server drops the worker's file index and the uploads", async () => {
    const filesDir = join(workerHome, "chat-files");
    const indexOf = () => readdirSync(filesDir).filter((f) => f.includes(threadId));
    expect(indexOf().length).toBeGreaterThan(0);
    await client.threads.delete(threadId);
    const deadline = Date.now() + 60_000;
    while (indexOf().length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect(indexOf()).toEqual([]);
    expect(existsSync(filesDir)).toBe(true);
    const { rows } = await db.query(
      "SELECT count(*)::int AS n FROM codehop_uploads WHERE thread_id = $1",
      [threadId],
    );
    expect(rows[0].n).toBe(0);
  });
});
