import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  DEMO_ANSWERS,
  DEMO_QUESTIONS,
  DEMO_SUBTASKS,
  demoRules,
} from "../../src/apps/qa/demo-trajectories.ts";
import { chatRules, DEMO_FILES, DEMO_ROUNDS } from "../../src/apps/chat/demo-trajectories.ts";
import { type Responder, trajectoryResponder } from "../../src/testing/scripted-openai-server.ts";
import { writeDemoDocuments } from "../chat/documents.ts";
import { type CliRun, spawnCli } from "../app/cli-helpers.ts";
import { taskOf, useDemoWorld } from "../app/fixtures.ts";
import { waitForStderr } from "./processes.ts";
import { postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";

// `codehop serve` and two `codehop worker` processes on a throwaway PostgreSQL cluster, driven
// with @langchain/langgraph-sdk over real HTTP; the model is the scripted OpenAI-compatible server
// (demo trajectories), the knowledge source the demo corpus. Sub-agent requests can be held to
// kill or cancel a run in the middle of a sub-agent call.

const GRAPHS = join(import.meta.dirname, "../fixtures/server/langgraph.json");
const API_KEY = "test-key-123";
const LEASE = 10;

/** Sub-agent tasks whose first model request is held (answered only after a long delay). */
const held = new Map<string, { arrived: () => void; reached: Promise<void> }>();
function hold(task: string): Promise<void> {
  let arrived!: () => void;
  const reached = new Promise<void>((r) => (arrived = r));
  held.set(task, { arrived, reached });
  return reached;
}
const release = (task: string) => held.delete(task);
const approvalAction = (id: string) =>
  `Thought: go\nCode:\n\`\`\`js\nconst words = await count_note("${id}");\nlet r;\ntry { r = await delete_note("${id}"); } catch (e) { r = "refused: " + e.message; }\nfinal_answer(r + " (" + words + " words)");\n\`\`\`<end_action>`;
const holdingResponder = (): Responder => {
  const inner = trajectoryResponder([
    ...demoRules(),
    ...chatRules(),
    ...["a", "b"].map((id) => ({
      name: `delete:${id}`,
      task: `Delete note ${id}.`,
      steps: [approvalAction(id)],
    })),
  ]);
  return async (req, ctx) => {
    const reply = await inner(req, ctx);
    for (const [task, h] of held) {
      if (taskOf(req).includes(task)) {
        h.arrived();
        return { ...(reply as object), delayMs: 60_000 } as typeof reply;
      }
    }
    return reply;
  };
};

const world = useDemoWorld("codehop-serve-", { responder: holdingResponder });
const cluster = useTestCluster();
let databaseUrl = "";
let db: pg.Pool;
let server: CliRun | undefined;
let serverUrl = "";
const workers = new Map<string, CliRun>();
let client: Client;

const env = () =>
  world.cliEnv({
    CODEHOP_DATABASE_URL: databaseUrl,
    CODEHOP_CORPUS: world.corpus,
    CODEHOP_MAX_RETRIES: "0",
  });

async function startWorkerProcess(id: string): Promise<void> {
  const run = spawnCli(
    [
      "worker",
      "--worker-id",
      id,
      "--concurrency",
      "1",
      "--graphs",
      GRAPHS,
      "--lease",
      String(LEASE),
    ],
    env(),
  );
  workers.set(id, run);
  await waitForStderr(run, new RegExp(`${id} ready`), `worker ${id}`);
}

/** The worker holding a run, from the runs table. */
async function runRow(runId: string) {
  const { rows } = await db.query("SELECT * FROM codehop_runs WHERE run_id = $1", [runId]);
  return rows[0] as { worker_id: string; attempt: number; status: string };
}

async function waitFor<T>(read: () => Promise<T>, ok: (v: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

beforeAll(async () => {
  if (postgresMissing) return;
  databaseUrl = await cluster().createDatabase("serve");
  db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  server = spawnCli(
    ["serve", "--port", "0", "--graphs", GRAPHS, "--api-key", API_KEY, "--lease", String(LEASE)],
    env(),
  );
  serverUrl = (await waitForStderr(server, /listening on (http:\/\/\S+)/, "codehop serve"))[1];
  await Promise.all([startWorkerProcess("w1"), startWorkerProcess("w2")]);
  client = new Client({ apiUrl: serverUrl, apiKey: API_KEY });
}, 180_000);

afterAll(async () => {
  const all = [...workers.values(), ...(server ? [server] : [])];
  for (const run of all) if (run.child.exitCode === null) run.child.kill("SIGKILL");
  await Promise.all(all.map((r) => r.done));
  await db?.end();
});

describe.skipIf(postgresMissing)(
  "codehop serve + 2 workers (LangGraph SDK)",
  { timeout: 180_000 },
  () => {
    it("requires the API key", async () => {
      const res = await fetch(`${serverUrl}/assistants/search`, { method: "POST", body: "{}" });
      expect(res.status).toBe(401);
      const wrong = new Client({
        apiUrl: serverUrl,
        apiKey: "nope",
        callerOptions: { maxRetries: 0 },
      });
      await expect(wrong.assistants.search()).rejects.toThrow(/401|Unauthorized/);
      expect((await fetch(`${serverUrl}/ok`)).status).toBe(200);
    });

    it("lists the graphs as assistants and draws the manager with its nested agents", async () => {
      const assistants = await client.assistants.search({ limit: 50 });
      expect(assistants.map((a) => a.graph_id).sort()).toEqual([
        "approval",
        "approval_agent",
        "chat",
        "code_agent",
        "manager",
        "researcher",
      ]);
      const [manager] = await client.assistants.search({ graphId: "manager" });
      const drawing = await client.assistants.getGraph(manager.assistant_id, { xray: true });
      const ids = drawing.nodes.map((n) => String(n.id));
      expect(ids).toEqual(expect.arrayContaining(["plan", "act:plan", "act:act:plan"]));
    });

    it("runs.wait answers on a worker; state, history and the thread list read it back", async () => {
      const thread = await client.threads.create({ metadata: { user: "ada" } });
      const values = (await client.runs.wait(thread.thread_id, "manager", {
        input: { question: DEMO_QUESTIONS.towers },
      })) as Record<string, any>;
      expect(values.answer).toBe(DEMO_ANSWERS.towers);
      const state = await client.threads.getState(thread.thread_id);
      expect((state.values as any).answer).toBe(DEMO_ANSWERS.towers);
      expect(state.next).toEqual([]);
      const history = await client.threads.getHistory(thread.thread_id, { limit: 100 });
      expect(history.length).toBeGreaterThan(4);
      expect((history[history.length - 1].values as any).answer ?? null).toBeNull();
      expect((await client.threads.get(thread.thread_id)).status).toBe("idle");
      const mine = await client.threads.search({ metadata: { user: "ada" } });
      expect(mine.map((t) => t.thread_id)).toEqual([thread.thread_id]);
      const runs = await client.runs.list(thread.thread_id);
      expect(runs).toHaveLength(1);
      expect(runs[0].status).toBe("success");
    });

    it("runs.stream streams values and nested agents' updates from the worker", async () => {
      const thread = await client.threads.create();
      const events: Array<{ event: string; data: any }> = [];
      for await (const chunk of client.runs.stream(thread.thread_id, "manager", {
        input: { question: DEMO_QUESTIONS.towers },
        streamMode: ["values", "updates"],
        streamSubgraphs: true,
      }))
        events.push(chunk as { event: string; data: any });
      expect(events[0]).toMatchObject({ event: "metadata", data: { attempt: 1 } });
      const names = events.map((e) => e.event);

      expect(names).toContain("updates");
      expect(names.some((n) => /^updates\|act:/.test(n))).toBe(true);
      expect(names.some((n) => /^updates\|act:[^|]+(\|\d+)?\|act:/.test(n))).toBe(true);
      const lastValues = events.filter((e) => e.event === "values").at(-1)!;
      expect(lastValues.data.answer).toBe(DEMO_ANSWERS.towers);
    });

    it("an empty or malformed input to the manager, researcher or chat graph: the run's error is CODEHOP_INPUT_INVALID in one readable line, before any model call", async () => {
      const before = world.server.requests.length;
      for (const [graphId, input, says] of [
        [
          "manager",
          { question: "" },
          'Invalid input for the "manager" graph: question: the question is empty',
        ],
        [
          "researcher",
          { topic: "" },
          'Invalid input for the "researcher" graph: topic: the research topic is empty',
        ],
        [
          "researcher",
          { topic: "Towers", maxQuestions: 0 },
          "maxQuestions: maxQuestions must be from 1 to 12",
        ],
        [
          "chat",
          { messages: [{ content: "no role" }] },
          'Invalid input for the "chat" graph: messages.0: not a message',
        ],
        ["chat", { messages: [] }, "there is nothing to answer"],
      ] as const) {
        const thread = await client.threads.create();
        // The run's result carries the error with its stable code ...
        const result = (await client.runs.wait(thread.thread_id, graphId, {
          input,
          raiseError: false,
        } as never)) as { __error__?: Record<string, string> };
        const sent = result.__error__!;
        expect(sent, graphId).toMatchObject({
          error: "CodehopError",
          code: "CODEHOP_INPUT_INVALID",
        });
        // ... and the SDK, which throws `${error}: ${message}`, shows the code too.
        await expect(
          client.runs.wait(thread.thread_id, graphId, { input } as never),
        ).rejects.toThrow(/^CodehopError: .*\[CODEHOP_INPUT_INVALID\]$/);
        expect(sent.message).toContain(says);
        expect(sent.message).toMatch(/\[CODEHOP_INPUT_INVALID\]$/);
        // Not zod's issue array nor a reducer's TypeError.
        expect(sent.message).not.toMatch(/^\[|too_small|Unable to coerce/);
        expect((await client.threads.get(thread.thread_id)).status).toBe("error");
      }
      expect(world.server.requests.length).toBe(before);
    });

    it("the chat graph streamed as agent-chat-ui streams it: root values carry the conversation, messages the reply and none of the agent's own model calls", async () => {
      const span = DEMO_ROUNDS[1];
      const docs = await writeDemoDocuments(mkdtempSync(join(tmpdir(), "codehop-serve-docs-")));
      const thread = await client.threads.create();
      const events: Array<{ event: string; data: any }> = [];
      for await (const e of client.runs.stream(thread.thread_id, "chat", {
        input: {
          messages: [{ id: "human-1", type: "human", content: span.message }],
          attach: [{ path: docs.report }],
        },
        streamMode: ["values", "messages-tuple", "custom"],
        streamSubgraphs: true,
        streamResumable: true,
        onDisconnect: "continue",
      }))
        events.push(e as { event: string; data: any });
      expect(events.filter((e) => e.event === "error")).toEqual([]);
      const values = events.filter((e) => e.event.startsWith("values"));
      expect(values.length).toBeGreaterThan(1);
      expect(values.map((e) => e.event)).toEqual(values.map(() => "values"));
      const messages = events.filter((e) => e.event.startsWith("messages"));
      expect(messages.length).toBeGreaterThan(0);
      for (const { data } of messages) {
        expect(["ai", "AIMessageChunk"]).toContain(data[0].type);
        expect(String(data[0].content)).not.toContain("Thought:");
      }
      const last = values.at(-1)!.data;
      expect(last.messages.map((m: any) => m.type)).toEqual(["human", "ai"]);
      expect(last.messages[1].content).toContain(
        `${span.expect.reply} [${DEMO_FILES.report}, p. 1]`,
      );
      const history = await client.threads.getHistory(thread.thread_id, { limit: 50 });
      expect((history[0].values as any).messages).toHaveLength(2);
    });

    it("a stateless run (no thread) waits for its answer too", async () => {
      const values = (await client.runs.wait(null, "manager", {
        input: { question: DEMO_QUESTIONS.plywood },
      })) as Record<string, any>;
      expect(values.answer).toBe(DEMO_ANSWERS.plywood);
    });

    it("cancel stops a run on the worker running it; the thread continues later from its checkpoint", async () => {
      const reached = hold(DEMO_SUBTASKS.constantinople);
      const thread = await client.threads.create();
      const run = await client.runs.create(thread.thread_id, "manager", {
        input: { question: DEMO_QUESTIONS.ming },
      });
      await reached;
      const holder = (await runRow(run.run_id)).worker_id;
      // A second run on the busy thread is refused (multitask strategy "reject").
      await expect(
        client.runs.create(thread.thread_id, "manager", { input: null }),
      ).rejects.toThrow(/already running/);
      await client.runs.cancel(thread.thread_id, run.run_id, true);
      const before = world.server.requests.length;
      expect((await client.runs.get(thread.thread_id, run.run_id)).status).toBe("interrupted");
      expect((await runRow(run.run_id)).worker_id).toBe(holder);
      expect((await client.threads.get(thread.thread_id)).status).toBe("idle");
      await new Promise((r) => setTimeout(r, 1000));
      // Nothing more was asked of the model once the cancel returned.
      expect(world.server.requests.length).toBe(before);
      release(DEMO_SUBTASKS.constantinople);
      const values = (await client.runs.wait(thread.thread_id, "manager", {
        input: null,
      })) as Record<string, any>;
      expect(values.answer).toBe(DEMO_ANSWERS.ming);
    });

    it("kill -9 of the worker mid-run: the other worker takes the run after the lease and finishes it without re-running the finished sub-agent call", async () => {
      const reached = hold(DEMO_SUBTASKS.empire);
      const thread = await client.threads.create();
      const eiffelBefore = world.server.requestsFor("wiki:eiffel").length;
      const managerBefore = world.server.requestsFor("manager:towers").length;
      const run = await client.runs.create(thread.thread_id, "manager", {
        input: { question: DEMO_QUESTIONS.towers },
      });
      await reached;
      const first = await runRow(run.run_id);
      expect(first.attempt).toBe(1);
      const victim = workers.get(first.worker_id)!;
      victim.child.kill("SIGKILL");
      expect((await victim.done).signal).toBe("SIGKILL");
      release(DEMO_SUBTASKS.empire);
      // The Eiffel Tower call finished before the kill (2 model requests).
      expect(world.server.requestsFor("wiki:eiffel").length - eiffelBefore).toBe(2);
      const values = (await client.runs.join(thread.thread_id, run.run_id)) as Record<string, any>;
      expect(values.answer).toBe(DEMO_ANSWERS.towers);
      const second = await runRow(run.run_id);
      expect(second).toMatchObject({ attempt: 2, status: "success" });
      expect(second.worker_id).not.toBe(first.worker_id);
      // Served from the call journal on the second worker, not asked again.
      expect(world.server.requestsFor("wiki:eiffel").length - eiffelBefore).toBe(2);
      // The manager's first action was checkpointed: one more manager request (its final answer).
      expect(world.server.requestsFor("manager:towers").length - managerBefore).toBe(2);
      await startWorkerProcess(first.worker_id);
    });

    it("interrupt() stops a run for input; Command({ resume }) continues it on another worker", async () => {
      const thread = await client.threads.create();
      const values = (await client.runs.wait(thread.thread_id, "approval", {
        input: { request: "deploy" },
      })) as Record<string, any>;
      expect(values.outcome).toBeUndefined();
      const t = await client.threads.get(thread.thread_id);
      expect(t.status).toBe("interrupted");
      const interrupts = Object.values(t.interrupts ?? {}).flat() as Array<{ value: unknown }>;
      expect(interrupts.map((i) => i.value)).toEqual([{ question: 'Approve "deploy"?' }]);
      const state = await client.threads.getState(thread.thread_id);
      expect(state.next).toEqual(["ask"]);
      const [firstRun] = await client.runs.list(thread.thread_id);
      const stopped = (await runRow(firstRun.run_id)).worker_id;
      // The worker that stopped goes away: the resume can only run on the other one.
      const leaving = workers.get(stopped)!;
      leaving.child.kill("SIGTERM");
      await leaving.done;
      const resumed = (await client.runs.wait(thread.thread_id, "approval", {
        command: { resume: "yes" },
      })) as Record<string, any>;
      expect(resumed).toMatchObject({ decision: "yes", outcome: "did deploy" });
      const runs = await client.runs.list(thread.thread_id);
      const resumeRun = runs.find((r) => r.run_id !== firstRun.run_id)!;
      expect((await runRow(resumeRun.run_id)).worker_id).not.toBe(stopped);
      expect((await client.threads.get(thread.thread_id)).status).toBe("idle");
      await startWorkerProcess(stopped);
    });

    it("two runs on different threads run at once on the two workers", async () => {
      const reached = hold(DEMO_SUBTASKS.empire);
      const [a, b] = await Promise.all([client.threads.create(), client.threads.create()]);
      const runA = await client.runs.create(a.thread_id, "manager", {
        input: { question: DEMO_QUESTIONS.towers },
      });
      await reached;
      const holder = (await runRow(runA.run_id)).worker_id;
      // The holder runs one run at a time (--concurrency 1): the other worker answers this one.
      const values = (await client.runs.wait(b.thread_id, "manager", {
        input: { question: DEMO_QUESTIONS.plywood },
      })) as Record<string, any>;
      expect(values.answer).toBe(DEMO_ANSWERS.plywood);
      const [runB] = await client.runs.list(b.thread_id);
      expect((await runRow(runB.run_id)).worker_id).not.toBe(holder);
      release(DEMO_SUBTASKS.empire);
      await client.runs.cancel(a.thread_id, runA.run_id, true);
      await waitFor(
        () => runRow(runA.run_id),
        (r) => r.status === "interrupted",
        "the cancel",
      );
    });

    it("a tool approval pauses the run; approve and reject resume it on another worker, finished calls not repeated", async () => {
      const calls = () =>
        existsSync(join(world.home, "calls.log"))
          ? readFileSync(join(world.home, "calls.log"), "utf8").trim().split("\n")
          : [];
      for (const [id, resume, answer] of [
        ["a", { decision: "approve" }, "deleted a (3 words)"],
        [
          "b",
          { decision: "reject", reason: "keep b" },
          "refused: The user rejected this call to delete_note(): keep b (3 words)",
        ],
      ] as const) {
        const thread = await client.threads.create();
        const paused = (await client.runs.wait(thread.thread_id, "approval_agent", {
          input: { task: `Delete note ${id}.` },
        })) as Record<string, any>;
        const state = await client.threads.getState(thread.thread_id);
        const [request] = state.tasks.flatMap((t: any) =>
          (t.interrupts ?? []).map((i: any) => i.value),
        );
        expect(request).toMatchObject({
          type: "codehop.approval",
          agent: "approval_agent",
          tool: "delete_note",
          args: { id },
        });
        expect(paused.__interrupt__?.[0]?.value?.approvalId).toBe(request.approvalId);
        expect((await client.threads.get(thread.thread_id)).status).toBe("interrupted");
        const [pausedRun] = await client.runs.list(thread.thread_id);
        const stopped = (await runRow(pausedRun.run_id)).worker_id;
        // The worker that paused goes away: the decision is carried out by the other one.
        const leaving = workers.get(stopped)!;
        leaving.child.kill("SIGTERM");
        await leaving.done;
        const done = (await client.runs.wait(thread.thread_id, "approval_agent", {
          command: { resume: { approvalId: request.approvalId, ...resume } },
        })) as Record<string, any>;
        expect(done.answer).toBe(answer);
        const resumedRun = (await client.runs.list(thread.thread_id)).find(
          (r) => r.run_id !== pausedRun.run_id,
        )!;
        expect((await runRow(resumedRun.run_id)).worker_id).not.toBe(stopped);
        // One model request per task: the resumed action was not planned again.
        expect(world.server.requestsFor(`delete:${id}`)).toHaveLength(1);
        await startWorkerProcess(stopped);
      }
      // The approved call ran once, the rejected one never; count_note, finished before each
      // pause, was served from the Postgres call journal on the other worker, not run again.
      expect(calls()).toEqual(["count a", "delete a", "count b"]);
    });
  },
);
