import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
} from "../../src/testing/scripted-openai-server.ts";
import { type CliRun, cliEnv, spawnCli } from "../app/cli-helpers.ts";
import { postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";
import { type DevServer, ROOT, startDevServer } from "../studio/dev-server.ts";
import { waitForStderr } from "./processes.ts";

// One `Auth` file (test/fixtures/auth/auth.ts, the official API of @langchain/langgraph-sdk/auth),
// named by langgraph.json's `auth.path`, under both `codehop serve` (+ a worker, on PostgreSQL) and
// `langgraph dev`: the same users, the same owner filters, the same user handed to the graph's
// tools. Driven with the official SDK.

const FIXTURE = join(ROOT, "test/fixtures/auth");
const action = (code: string) => `Thought: go\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;
const cluster = useTestCluster();
let model: ScriptedOpenAIServer;
let server: CliRun | undefined;
let worker: CliRun | undefined;
let dev: DevServer | undefined;
const urls: Record<string, string> = {};

beforeAll(async () => {
  model = await ScriptedOpenAIServer.start({
    responder: trajectoryResponder([
      { name: "whoami", task: "Who am I?", steps: [action("final_answer(await whoami())")] },
    ]),
  });
  const home = mkdtempSync(join(tmpdir(), "codehop-auth-file-"));
  const modelEnv = {
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "scripted",
    CODEHOP_MODEL: "scripted",
    CODEHOP_HOME: home,
  };
  const starting: Array<Promise<void>> = [
    startDevServer(FIXTURE, {
      ...process.env,
      ...modelEnv,
      LANGSMITH_TRACING: "false",
      LANGCHAIN_TRACING_V2: "false",
    }).then((d) => {
      dev = d;
      urls["langgraph dev"] = d.url;
    }),
  ];
  if (!postgresMissing) {
    const databaseUrl = await cluster().createDatabase("auth_file");
    const env = cliEnv({ ...modelEnv, CODEHOP_DATABASE_URL: databaseUrl });
    const graphs = join(FIXTURE, "langgraph.json");
    server = spawnCli(["serve", "--port", "0", "--graphs", graphs], env);
    starting.push(
      (async () => {
        urls["codehop serve"] = (
          await waitForStderr(server!, /listening on (http:\/\/\S+)/, "codehop serve")
        )[1];
      })(),
    );
    worker = spawnCli(["worker", "--worker-id", "aw1", "--graphs", graphs], env);
    starting.push(waitForStderr(worker, /aw1 ready/, "codehop worker").then(() => undefined));
  }
  await Promise.all(starting);
}, 180_000);

afterAll(async () => {
  dev?.stop();
  const all = [worker, server].filter((r): r is CliRun => !!r);
  for (const run of all) if (run.child.exitCode === null) run.child.kill("SIGKILL");
  await Promise.all(all.map((r) => r.done));
  await model?.close();
});

const clientFor = (url: string, token?: string) =>
  new Client({
    apiUrl: url,
    defaultHeaders: token ? { authorization: `Bearer ${token}` } : {},
    callerOptions: { maxRetries: 0 },
  });

async function status(call: Promise<unknown>): Promise<number> {
  return call.then(
    () => 200,
    (err: { status?: number }) => err.status ?? 0,
  );
}

describe.each(["codehop serve", "langgraph dev"])("langgraph.json's auth.path under %s", (name) => {
  const skip = name === "codehop serve" && postgresMissing;

  it.skipIf(skip)("authenticates with the file's handler: unknown tokens get 401", async () => {
    const url = urls[name];
    expect(await status(clientFor(url).threads.search())).toBe(401);
    expect(await status(clientFor(url, "token-eve").threads.search())).toBe(401);
    expect(await status(clientFor(url, "token-alice").threads.search())).toBe(200);
    if (name === "codehop serve") {
      // LangGraph's Studio shortcut header is no way in on codehop serve.
      const res = await fetch(`${url}/threads/search`, {
        method: "POST",
        headers: { "x-auth-scheme": "langsmith", "content-type": "application/json" },
        body: "{}",
      });
      expect(res.status).toBe(401);
    }
  });

  it.skipIf(skip)("its owner filters: another user's thread is not found, nor listed", async () => {
    const url = urls[name];
    const alice = clientFor(url, "token-alice");
    const bob = clientFor(url, "token-bob");
    const thread = await alice.threads.create({ metadata: { topic: "secret" } });
    expect(thread.metadata?.owner).toBe("alice");
    expect(await status(bob.threads.get(thread.thread_id))).toBe(404);
    expect(await status(bob.threads.getState(thread.thread_id))).toBe(404);
    expect(await status(bob.threads.delete(thread.thread_id))).toBe(404);
    const listed = await bob.threads.search({ metadata: { topic: "secret" } });
    expect(listed).toEqual([]);
    expect((await alice.threads.search({ metadata: { topic: "secret" } })).length).toBe(1);
  });

  it.skipIf(skip)(
    "hands the file's user to the graph's tools (langgraph_auth_user)",
    async () => {
      const url = urls[name];
      for (const [token, who] of [
        ["token-alice", "alice"],
        ["token-bob", "bob"],
      ]) {
        const c = clientFor(url, token);
        const thread = await c.threads.create();
        const values = (await c.runs.wait(thread.thread_id, "whoami", {
          input: { task: "Who am I?" },
        })) as Record<string, unknown>;
        expect(values.answer).toBe(`${who} [threads:write]`);
      }
    },
    120_000,
  );
});
