import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { action } from "../../src/apps/qa/demo-trajectories.ts";
import { openPostgresMemoryStore } from "../../src/memory/postgres-store.ts";
import { ScriptedOpenAIServer, type Responder } from "../../src/testing/scripted-openai-server.ts";
import { type CliRun, cliEnv, spawnCli } from "../app/cli-helpers.ts";
import { postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";
import { waitForStderr } from "../server/processes.ts";

// Memory in served runs: `codehop serve` + a `codehop worker` with CODEHOP_MEMORY=1, driven with
// the LangGraph SDK. The worker gives the chat agent its memory tools and the PostgreSQL store
// (LangGraph's config.store): a fact remembered in one thread is recalled in another; a client
// that tries to choose whose memories a run uses is refused.

const cluster = useTestCluster();
let model: ScriptedOpenAIServer;
let server: CliRun | undefined;
let worker: CliRun | undefined;
let client: Client;
let databaseUrl: string;

const task = (req: any) => req.messages.find((m: any) => m.role === "user")?.content ?? "";
const responder: Responder = (req) => {
  const t = task(req);
  const step = req.messages.filter((m: any) => m.role === "user").length - 1;
  if (t.includes("I'm Grace")) {
    return step === 0
      ? action("Remember.", 'remember("The user is Grace, a navy admiral.", "who")')
      : action("Greet.", 'final_answer("Hello Grace!")');
  }
  if (t.includes("about me, the user?")) {
    const known = /remember about the user[\s\S]*user is (\w+)/.exec(t)?.[1];
    return action(
      "Answer.",
      `final_answer(${JSON.stringify(known ? `You are ${known}.` : "I don't know.")})`,
    );
  }
  return action("?", 'final_answer("?")');
};

beforeAll(async () => {
  if (postgresMissing) return;
  databaseUrl = await cluster().createDatabase("memory_served");
  model = await ScriptedOpenAIServer.start({ responder });
  const env = (home: string) =>
    cliEnv({
      OPENAI_BASE_URL: model.baseURL,
      OPENAI_API_KEY: "scripted",
      CODEHOP_MODEL: "scripted",
      CODEHOP_MAX_RETRIES: "0",
      CODEHOP_DATABASE_URL: databaseUrl,
      CODEHOP_HOME: home,
      CODEHOP_MEMORY: "1",
    });
  // The chat graph from the build (vitest's global setup keeps dist/ current): codehop's own
  // langgraph.json names the TypeScript sources, which a CLI running from dist/ cannot load.
  const graphs = join(mkdtempSync(join(tmpdir(), "codehop-mem-graphs-")), "langgraph.json");
  writeFileSync(
    graphs,
    JSON.stringify({ graphs: { chat: `${join(process.cwd(), "dist/graphs/entries.js")}:chat` } }),
  );
  server = spawnCli(
    ["serve", "--port", "0", "--graphs", graphs],
    env(mkdtempSync(join(tmpdir(), "codehop-mem-serve-"))),
  );
  const url = (await waitForStderr(server, /listening on (http:\/\/\S+)/, "codehop serve"))[1];
  worker = spawnCli(
    ["worker", "--worker-id", "mw1", "--concurrency", "1", "--graphs", graphs],
    env(mkdtempSync(join(tmpdir(), "codehop-mem-worker-"))),
  );
  await waitForStderr(worker, /mw1 ready/, "codehop worker");
  client = new Client({ apiUrl: url });
}, 180_000);

afterAll(async () => {
  const all = [worker, server].filter((r): r is CliRun => !!r);
  for (const run of all) if (run.child.exitCode === null) run.child.kill("SIGKILL");
  await Promise.all(all.map((r) => r.done));
  await model?.close();
});

const say = async (text: string) => {
  const thread = await client.threads.create();
  const out = (await client.runs.wait(thread.thread_id, "chat", {
    input: { messages: [{ role: "user", content: text }] },
  })) as any;
  return { thread: thread.thread_id, reply: out.messages.at(-1).content as string };
};

describe.skipIf(postgresMissing)(
  "memory in runs served by codehop worker",
  { timeout: 180_000 },
  () => {
    it("remembers in one thread, recalls in another, through the worker's PostgreSQL store", async () => {
      const hello = await say("Hi, I'm Grace.");
      expect(hello.reply).toContain("Hello Grace!");
      const store = await openPostgresMemoryStore({ url: databaseUrl });
      try {
        expect((await store.get(["local", "memories"], "who"))?.value).toMatchObject({
          text: "The user is Grace, a navy admiral.",
          agent: "chat",
          thread_id: hello.thread,
        });
      } finally {
        await store.close();
      }
      // Lexical recall (no embeddings configured): the message shares words with the fact.
      expect((await say("What do you remember about me, the user?")).reply).toContain(
        "You are Grace.",
      );
    });

    it("a client cannot choose whose memories a run uses", async () => {
      const thread = await client.threads.create();
      await expect(
        client.runs.wait(thread.thread_id, "chat", {
          input: { messages: [{ role: "user", content: "Who am I?" }] },
          context: { memory: { user: "someone-else" } } as never,
        }),
      ).rejects.toThrow(/memory/);
    });
  },
);
