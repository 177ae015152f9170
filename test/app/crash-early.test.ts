import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEMO_ANSWERS, DEMO_QUESTIONS } from "../../src/apps/qa/demo-trajectories.ts";
import { cliEnv, runCli, spawnCli, type CliRun } from "./cli-helpers.ts";
import { useDemoWorld } from "./fixtures.ts";

const world = useDemoWorld("codehop-crash-early-");
// An endpoint that never answers: the run is killed while it still waits for the model list.
let silent: Server;
let silentURL: string;

beforeAll(async () => {
  silent = createServer(() => {});
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
  silentURL = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  silent?.closeAllConnections();
  await new Promise((r) => silent?.close(r));
});

/** Resolves once `text` appears on the run's stderr (fails if the process ends first). */
async function waitForStderr(run: CliRun, text: string): Promise<void> {
  let ended = false;
  void run.done.then(() => (ended = true));
  while (!run.stderr().includes(text)) {
    if (ended) throw new Error(`the CLI ended before printing "${text}": ${run.stderr()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("a run killed before anything was checkpointed", { timeout: 120_000 }, () => {
  it("kill -9 while the model endpoint is still being asked, then `resume` answers the recorded question", async () => {
    // No CODEHOP_MODEL: `ask` asks the endpoint for its models first, and it never replies.
    const run = spawnCli(
      ["ask", DEMO_QUESTIONS.towers, "--thread", "early-1", "--corpus", world.corpus, "--json"],
      cliEnv({ OPENAI_BASE_URL: silentURL, OPENAI_API_KEY: "k", CODEHOP_HOME: world.home }),
    );
    // The thread id is announced once the thread is recorded, before any model request.
    await waitForStderr(run, "thread early-1");
    run.child.kill("SIGKILL");
    expect((await run.done).signal).toBe("SIGKILL");

    // A working endpoint now; no --corpus: the thread's recorded knowledge source is used.
    const env = world.cliEnv({ OPENAI_API_KEY: "k" });
    const listed = JSON.parse((await runCli(["threads", "--json"], env)).stdout);
    expect(listed.find((t: any) => t.threadId === "early-1")).toMatchObject({
      status: "interrupted",
      question: DEMO_QUESTIONS.towers,
      checkpoints: 0,
    });
    const resumed = await runCli(["resume", "early-1", "--json"], env);
    expect(resumed.stderr).not.toContain("CODEHOP_THREAD_NOT_FOUND");
    expect(resumed.code).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({
      answer: DEMO_ANSWERS.towers,
      thread_id: "early-1",
      status: "final_answer",
    });
  });
});
