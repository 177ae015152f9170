import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureDemoCorpus, startDemoModelServer } from "../../src/app/demo.ts";
import { DEMO_ANSWERS, DEMO_QUESTIONS } from "../../src/app/demo-trajectories.ts";
import type { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";

// LangGraph Studio talks to the LangGraph API server; this drives `langgraphjs dev` (what
// `npm run studio` starts) with the SDK, as Studio does. The model is the scripted server.
let server: ScriptedOpenAIServer;
let studio: ChildProcess;
let log = "";
let client: Client;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

beforeAll(async () => {
  const home = mkdtempSync(join(tmpdir(), "codehop-studio-"));
  const corpus = await ensureDemoCorpus(home);
  server = await startDemoModelServer();
  const port = await freePort();
  studio = spawn(
    process.execPath,
    [
      join(process.cwd(), "node_modules/@langchain/langgraph-cli/dist/cli/cli.mjs"),
      "dev",
      "--port",
      String(port),
      "--host",
      "127.0.0.1",
      "--no-browser",
      "--no-reload",
    ],
    {
      cwd: process.cwd(),
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        OPENAI_BASE_URL: server.baseURL,
        OPENAI_API_KEY: "test",
        CODEHOP_MODEL: "scripted",
        CODEHOP_CORPUS: corpus,
        CODEHOP_HOME: home,
      },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    },
  );
  studio.stdout!.on("data", (d) => (log += d));
  studio.stderr!.on("data", (d) => (log += d));
  const apiUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (studio.exitCode !== null) throw new Error(`langgraph dev exited: ${log}`);
    const ok = await fetch(`${apiUrl}/ok`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) throw new Error(`langgraph dev did not start: ${log}`);
    await new Promise((r) => setTimeout(r, 500));
  }
  client = new Client({ apiUrl });
}, 120_000);

afterAll(async () => {
  // The dev server runs workers in its own process group: stop the whole group we started.
  if (studio?.pid && studio.exitCode === null) {
    try {
      process.kill(-studio.pid, "SIGTERM");
    } catch {
      studio.kill("SIGTERM");
    }
  }
  await server?.close();
});

// CLI processes start slowly on a loaded 2-core machine: generous per-test timeout.
describe("Studio (langgraph dev + SDK)", { timeout: 120_000 }, () => {
  it("serves the manager with the nested agents' plan / act / observe nodes", async () => {
    const assistants = await client.assistants.search({ graphId: "manager" });
    expect(assistants.length).toBeGreaterThan(0);
    const drawing = await client.assistants.getGraph(assistants[0].assistant_id, { xray: true });
    const ids = drawing.nodes.map((n) => String(n.id));
    for (const id of [
      "start",
      "plan",
      "observe",
      "act:plan",
      "act:observe",
      "act:act:plan",
      "act:act:act",
      "act:act:observe",
    ]) {
      expect(ids).toContain(id);
    }
    const graphIds = new Set(
      (await client.assistants.search({ limit: 20 })).map((a) => a.graph_id),
    );
    for (const g of ["manager", "wikipedia_search", "page_search", "code_agent"])
      expect(graphIds.has(g)).toBe(true);
  });

  it("answers a question and keeps a readable thread history", async () => {
    const thread = await client.threads.create();
    const values = (await client.runs.wait(thread.thread_id, "manager", {
      input: { question: DEMO_QUESTIONS.plywood },
    })) as Record<string, any>;
    expect(values.answer).toBe(DEMO_ANSWERS.plywood);
    expect(Object.keys(values.usage).sort()).toEqual([
      "manager",
      "page_search",
      "wikipedia_search",
    ]);
    const history = await client.threads.getHistory(thread.thread_id, { limit: 50 });
    expect(history.length).toBeGreaterThan(5);
    expect(history[0].next).toEqual([]);
    expect(history.some((h) => (h.next as string[]).includes("act"))).toBe(true);
  });
});
