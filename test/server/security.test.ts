import { writeFileSync } from "node:fs";
import { createServer as createHttpServer, type Server } from "node:http";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEMO_ANSWERS, DEMO_QUESTIONS } from "../../src/apps/qa/demo-trajectories.ts";
import { type CliRun, spawnCli } from "../app/cli-helpers.ts";
import { useDemoWorld } from "../app/fixtures.ts";
import { postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";
import { waitForStderr } from "./processes.ts";

// `codehop serve` + a `codehop worker` on a throwaway PostgreSQL, attacked through the official
// SDK and raw HTTP as a hostile client would. Every leak of issue 21 is attempted; a listener
// stands where the client would like the worker's requests to go, and must hear nothing.

const GRAPHS = join(import.meta.dirname, "../fixtures/server/langgraph.json");
const OPERATOR_MAX_TOKENS = 300;

const world = useDemoWorld("codehop-security-");
const cluster = useTestCluster();
let databaseUrl = "";
let db: pg.Pool;
let server: CliRun | undefined;
let worker: CliRun | undefined;
let serverUrl = "";
let client: Client;

/** Where a client would like the worker's model requests to go: it must never be reached. */
let listener: Server;
let listenerUrl = "";
const reached: string[] = [];

beforeAll(async () => {
  listener = createHttpServer((req, res) => {
    reached.push(`${req.method} ${req.url} ${req.headers.authorization ?? ""}`);
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{}");
  });
  await new Promise<void>((ok) => listener.listen(0, "127.0.0.1", ok));
  listenerUrl = `http://127.0.0.1:${(listener.address() as { port: number }).port}/v1`;
  if (postgresMissing) return;
  databaseUrl = await cluster().createDatabase("security");
  db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  // The operator's registry of knowledge sources: clients choose by name, never by path.
  const config = join(world.home, "codehop.config.json");
  writeFileSync(config, JSON.stringify({ knowledgeSources: { demo: { corpus: world.corpus } } }));
  const env = world.cliEnv({
    CODEHOP_DATABASE_URL: databaseUrl,
    CODEHOP_CORPUS: world.corpus,
    CODEHOP_MAX_RETRIES: "0",
    CODEHOP_MAX_TOKENS: String(OPERATOR_MAX_TOKENS),
    CODEHOP_CONFIG: config,
    OPENAI_API_KEY: "operator-secret-key",
  });
  server = spawnCli(["serve", "--port", "0", "--graphs", GRAPHS], env);
  serverUrl = (await waitForStderr(server, /listening on (http:\/\/\S+)/, "codehop serve"))[1];
  worker = spawnCli(
    ["worker", "--worker-id", "sw1", "--concurrency", "2", "--graphs", GRAPHS],
    env,
  );
  await waitForStderr(worker, /sw1 ready/, "codehop worker");
  client = new Client({ apiUrl: serverUrl, callerOptions: { maxRetries: 0 } });
}, 180_000);

afterAll(async () => {
  const all = [worker, server].filter((r): r is CliRun => !!r);
  for (const run of all) if (run.child.exitCode === null) run.child.kill("SIGKILL");
  await Promise.all(all.map((r) => r.done));
  await db?.end();
  await new Promise((ok) => listener?.close(ok));
});

/** The HTTP status and parsed body of an SDK call that must fail. */
async function failure(call: Promise<unknown>): Promise<{ status: number; body: any }> {
  const err = (await call.then(
    () => undefined,
    (e: unknown) => e,
  )) as { status?: number; text?: string } | undefined;
  if (!err) throw new Error("the call succeeded");
  let body: any = err.text;
  try {
    body = JSON.parse(err.text ?? "");
  } catch {
    // not JSON
  }
  return { status: err.status ?? 0, body };
}

describe.skipIf(postgresMissing)(
  "operator-only settings on codehop serve",
  { timeout: 120_000 },
  () => {
    it("a client's model endpoint, in context or configurable, on every run route: 403 naming the key; nothing reaches it", async () => {
      const thread = await client.threads.create();
      const endpoint = { modelSettings: { baseURL: listenerUrl, apiKey: "mine" } };
      const attempts: Array<[string, () => Promise<unknown>]> = [
        [
          "create (context)",
          () =>
            client.runs.create(thread.thread_id, "manager", {
              input: { question: "q" },
              context: endpoint,
            } as never),
        ],
        [
          "create (configurable)",
          () =>
            client.runs.create(thread.thread_id, "manager", {
              input: { question: "q" },
              config: { configurable: endpoint },
            }),
        ],
        [
          "wait",
          () =>
            client.runs.wait(thread.thread_id, "manager", {
              input: { question: "q" },
              context: endpoint,
            } as never),
        ],
        [
          "stateless wait",
          () =>
            client.runs.wait(null, "manager", {
              input: { question: "q" },
              config: { configurable: endpoint },
            }),
        ],
        [
          "stream",
          async () => {
            for await (const _ of client.runs.stream(thread.thread_id, "code_agent", {
              input: { task: "t" },
              context: endpoint,
            } as never))
              void _;
          },
        ],
      ];
      for (const [what, attempt] of attempts) {
        const { status, body } = await failure(attempt());
        expect(status, what).toBe(403);
        expect(body.code).toBe("CODEHOP_CLIENT_SETTING_REFUSED");
        expect(body.key).toMatch(/^(context|config\.configurable)\.modelSettings\.baseURL$/);
        expect(body.message).toContain("is an operator setting");
      }
      // Nothing was queued, nothing ran.
      expect(await client.runs.list(thread.thread_id)).toEqual([]);
      expect(reached).toEqual([]);
    });

    it("another thread's files by path (the corpus key): 403; the operator's sources are chosen by name", async () => {
      const thread = await client.threads.create();
      const victim = join(world.home, "chat-files", "victim-thread.db");
      for (const settings of [
        { context: { corpus: victim } },
        { config: { configurable: { corpus: victim } } },
      ]) {
        const { status, body } = await failure(
          client.runs.create(thread.thread_id, "manager", {
            input: { question: "q" },
            ...settings,
          } as never),
        );
        expect(status).toBe(403);
        expect(body.key).toMatch(/\.corpus$/);
      }
      const unknown = await failure(
        client.runs.create(thread.thread_id, "manager", {
          input: { question: "q" },
          context: { source: "victim" },
        } as never),
      );
      expect(unknown.status).toBe(403);
      expect(unknown.body.message).toContain('"demo"');
      const values = (await client.runs.wait(thread.thread_id, "manager", {
        input: { question: DEMO_QUESTIONS.towers },
        context: { source: "demo" },
      } as never)) as Record<string, unknown>;
      expect(values.answer).toBe(DEMO_ANSWERS.towers);
    });

    it("limits a client may set are lowered to the operator's; a model name off the allow-list is refused", async () => {
      const thread = await client.threads.create();
      const before = world.server.requests.length;
      const values = (await client.runs.wait(thread.thread_id, "manager", {
        input: { question: DEMO_QUESTIONS.towers },
        context: { modelSettings: { maxTokens: 1e9, maxRetries: 1e6, timeoutMs: 1e12 } },
        config: { recursion_limit: 1e6 },
      } as never)) as Record<string, unknown>;
      expect(values.answer).toBe(DEMO_ANSWERS.towers);
      const sent = world.server.requests.slice(before).map((r) => r.request.maxTokens);
      expect(sent.length).toBeGreaterThan(0);
      expect(new Set(sent)).toEqual(new Set([OPERATOR_MAX_TOKENS]));
      const [run] = await client.runs.list(thread.thread_id);
      expect(((run as any).kwargs as any).context.modelSettings).toEqual({
        maxTokens: OPERATOR_MAX_TOKENS,
        maxRetries: 0,
        timeoutMs: 120_000,
      });
      expect(((run as any).kwargs as any).config.recursion_limit).toBeLessThan(1e6);
      const model = await failure(
        client.runs.create(thread.thread_id, "manager", {
          input: { question: "q" },
          context: { model: "gpt-4o" },
        } as never),
      );
      expect(model.status).toBe(403);
      expect(model.body.key).toBe("context.model");
      expect(model.body.message).toContain("CODEHOP_CLIENT_MODELS");
    });

    it("unknown keys, LangGraph's private keys and server keys: refused by name, never dropped", async () => {
      const thread = await client.threads.create();
      const cases: Array<[Record<string, unknown>, number, string]> = [
        [{ context: { modelz: "x" } }, 422, "context.modelz"],
        [
          { config: { configurable: { langgraph_auth_user: { identity: "admin" } } } },
          403,
          "config.configurable.langgraph_auth_user",
        ],
        [
          { config: { configurable: { __pregel_checkpointer: {} } } },
          403,
          "config.configurable.__pregel_checkpointer",
        ],
        [{ context: { chat: { filesRetentionDays: 0 } } }, 422, "context.chat"],
        [{ context: { sandbox: { run: "x" } } }, 403, "context.sandbox"],
      ];
      for (const [settings, status, key] of cases) {
        const got = await failure(
          client.runs.create(thread.thread_id, "manager", {
            input: { question: "q" },
            ...settings,
          } as never),
        );
        expect(got.status, key).toBe(status);
        if (got.body.key) expect(got.body.key).toBe(key);
      }
      const pregel = await failure(
        client.runs.create(thread.thread_id, "manager", {
          input: { question: "q" },
          checkpoint: { checkpoint_id: "x", __pregel_checkpointer: {} },
        } as never),
      );
      expect(pregel.status).toBe(422);
      expect(pregel.body.message).toContain("checkpoint.__pregel_checkpointer");
      const chat = await failure(
        client.runs.create(thread.thread_id, "chat", {
          input: { messages: [{ type: "human", content: "hi" }] },
          context: { chat: { filesRetentionDays: 0 } },
        } as never),
      );
      expect(chat.status).toBe(403);
      expect(chat.body.key).toBe("context.chat.filesRetentionDays");
      expect(reached).toEqual([]);
    });
  },
);
