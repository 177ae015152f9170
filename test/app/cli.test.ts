import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DEMO_ANSWERS, DEMO_QUESTIONS } from "../../src/apps/qa/demo-trajectories.ts";
import { cliEnv, runCli } from "./cli-helpers.ts";
import { useDemoWorld } from "./fixtures.ts";

const world = useDemoWorld("codehop-cli-ok-");

// CLI processes start slowly on a loaded 2-core machine: generous per-test timeout.
describe("codehop CLI", { timeout: 120_000 }, () => {
  /**
   * `ask --json` on a new thread, run once for the file (by whichever test asks first): one test
   * checks its output, another asks again on its thread.
   */
  let plywoodRun: ReturnType<typeof runCli> | undefined;
  const askPlywood = () =>
    (plywoodRun ??= runCli(
      ["ask", DEMO_QUESTIONS.plywood, "--json"],
      world.cliEnv({ OPENAI_API_KEY: "k", CODEHOP_CORPUS: world.corpus }),
    ));

  it("ask --json prints one JSON object; threads and history read the thread back", async () => {
    const env = world.cliEnv({ OPENAI_API_KEY: "k", CODEHOP_CORPUS: world.corpus });
    const asked = await askPlywood();
    expect(asked.code).toBe(0);
    const lines = asked.stdout.trim().split("\n");
    expect(lines).toHaveLength(1);
    const result = JSON.parse(lines[0]);
    expect(result.answer).toBe(DEMO_ANSWERS.plywood);
    expect(result.thread_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(result.usage.by_agent.manager.calls).toBe(2);
    expect(result.usage.total.calls).toBe(12);
    // The generated thread id was announced on stderr before the answer.
    expect(asked.stderr).toContain(`thread ${result.thread_id}`);

    const [threads, history] = await Promise.all([
      runCli(["threads", "--json"], env),
      runCli(["history", result.thread_id, "--json"], env),
    ]);
    const listed = JSON.parse(threads.stdout);
    expect(listed[0]).toMatchObject({
      threadId: result.thread_id,
      status: "done",
      question: DEMO_QUESTIONS.plywood,
    });
    const checkpoints = JSON.parse(history.stdout);
    expect(checkpoints[0]).toMatchObject({ checkpoint_id: result.checkpoint_id, next: [] });
    expect(checkpoints.length).toBeGreaterThan(5);
  });

  it("ask piped: the live tree's lines name the manager (the root) and each sub-agent, never [agent]", async () => {
    const env = world.cliEnv({ OPENAI_API_KEY: "k", CODEHOP_CORPUS: world.corpus });
    const asked = await runCli(["ask", DEMO_QUESTIONS.plywood, "--thread", "piped-tree"], env);
    expect(asked.code).toBe(0);
    const lines = asked.stderr.split("\n");
    expect(lines.some((l) => l.startsWith("[manager] started: "))).toBe(true);
    expect(lines.some((l) => /^\[manager\] step 1\b/.test(l))).toBe(true);
    expect(lines.some((l) => /^\s+\[wikipedia_search\] started/.test(l))).toBe(true);
    expect(asked.stderr).not.toContain("[agent]");
  });

  it("ask of the same question on a finished thread prints the stored result; another question is refused", async () => {
    const env = world.cliEnv({ OPENAI_API_KEY: "k", CODEHOP_CORPUS: world.corpus });
    // The finished thread: the file's `ask --json` run (a new thread, its id generated).
    const first = await askPlywood();
    expect(first.code).toBe(0);
    const thread = JSON.parse(first.stdout).thread_id;
    const requests = world.server.requests.length;
    const again = await runCli(["ask", DEMO_QUESTIONS.plywood, "--thread", thread, "--json"], env);
    expect(again.stderr).not.toContain("already holds");
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual(JSON.parse(first.stdout));
    // Served from the checkpoints: no model call.
    expect(world.server.requests.length).toBe(requests);

    const other = await runCli(["ask", DEMO_QUESTIONS.towers, "--thread", thread], env);
    expect(other.code).toBe(2);
    expect(other.stderr).toContain(`Thread "${thread}" already holds a run`);
    expect(other.stderr).toContain("[CODEHOP_CONFIG_INVALID]");
  });

  it("ask works with only OPENAI_BASE_URL: the model is the first one the endpoint lists", async () => {
    const env = cliEnv({
      OPENAI_BASE_URL: world.server.baseURL,
      CODEHOP_HOME: world.home,
      CODEHOP_CORPUS: world.corpus,
    });
    const before = world.server.requests.length;
    const asked = await runCli(
      ["ask", DEMO_QUESTIONS.towers, "--json", "--thread", "no-model-var"],
      env,
    );
    expect(asked.code).toBe(0);
    expect(JSON.parse(asked.stdout).answer).toBe(DEMO_ANSWERS.towers);
    expect(new Set(world.server.requests.slice(before).map((r) => r.request.model))).toEqual(
      new Set(["scripted"]),
    );
  });

  it("demo answers over the demo corpus with the scripted model and says so", async () => {
    const demoHome = mkdtempSync(join(tmpdir(), "codehop-demo-"));
    // No model variables at all: the demo brings its own scripted server.
    const demo = await runCli(
      ["demo", "--question", "towers", "--delay", "0"],
      cliEnv({ CODEHOP_HOME: demoHome }),
    );
    expect(demo.code).toBe(0);
    expect(demo.stdout).toContain(`Answer: ${DEMO_ANSWERS.towers}`);
    expect(demo.stderr).toContain("the model in this demo is SCRIPTED");
    expect(demo.stderr).toContain("OPENAI_BASE_URL");
    expect(demo.stderr).toContain(join(demoHome, "checkpoints.db"));
    expect(demo.stderr).toContain("codehop history <thread>");
    // The scripted note once, before the first question; how to use a real model once, at the end.
    const count = (text: string) => demo.stderr.split(text).length - 1;
    expect(count("the model in this demo is SCRIPTED")).toBe(1);
    expect(count("To use a real model")).toBe(1);
    expect(count("export OPENAI_BASE_URL")).toBe(1);
    expect(demo.stderr.indexOf("SCRIPTED")).toBeLessThan(demo.stderr.indexOf("Question:"));
    expect(demo.stderr.indexOf("To use a real model")).toBeGreaterThan(
      demo.stderr.indexOf("Checkpoints and the call journal"),
    );
  });
});
