import { describe, expect, it } from "vitest";
import {
  DEMO_ANSWERS,
  DEMO_QUESTIONS,
  DEMO_SUBTASKS,
  towersRules,
} from "../../src/apps/qa/demo-trajectories.ts";
import { runCli, spawnCli } from "./cli-helpers.ts";
import { holdingSubtask, readThread, useDemoWorld, whileRunning } from "./fixtures.ts";

// The CLI's second sub-agent call (Empire State Building) is held until the test stops the run.
const second = holdingSubtask(towersRules, DEMO_SUBTASKS.empire);
const world = useDemoWorld("codehop-ctrl-c-", { responder: second.responder });

const env = () => world.cliEnv({ CODEHOP_MAX_RETRIES: "0" });

describe("Ctrl-C through the CLI", { timeout: 120_000 }, () => {
  it("one Ctrl-C stops `ask` cleanly (exit 2, RUN_INTERRUPTED); `resume` finishes without repeating the finished call, and again serves the stored result", async () => {
    const run = spawnCli(
      ["ask", DEMO_QUESTIONS.towers, "--thread", "ctrl-c-1", "--corpus", world.corpus, "--json"],
      env(),
    );
    await whileRunning(run, second.reached, "the second sub-agent call");
    run.child.kill("SIGINT");
    const stopped = await run.done;
    expect(stopped.code).toBe(2);
    expect(JSON.parse(stopped.stdout)).toMatchObject({
      error: { code: "CODEHOP_RUN_INTERRUPTED" },
      thread_id: "ctrl-c-1",
    });
    await readThread(world.home, "ctrl-c-1", async (_state, p) => {
      // Stopped by its user: interrupted, not failed (and resumable).
      expect(await p.threads.get("ctrl-c-1")).toMatchObject({ status: "interrupted" });
      expect((await p.threads.get("ctrl-c-1"))?.error).toMatch(/Ctrl-C/);
      // The interrupted sub-agent call was cut short, not finished: nothing journaled for it.
      const journaled = (await p.journal.entries("ctrl-c-1")).map((e) => e.tool);
      expect(journaled.filter((t) => t === "wikipedia_search_agent")).toHaveLength(1);
    });
    second.release();
    const eiffel = world.server.requestsFor("wiki:eiffel").length;

    const resumed = await runCli(["resume", "ctrl-c-1", "--json"], env());
    expect(resumed.code).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({
      answer: DEMO_ANSWERS.towers,
      status: "final_answer",
    });
    // The Eiffel Tower call had finished before Ctrl-C: served from the journal, not re-run.
    expect(world.server.requestsFor("wiki:eiffel")).toHaveLength(eiffel);

    // Resuming a finished thread prints its stored result and asks the model nothing.
    const requests = world.server.requests.length;
    const again = await runCli(["resume", "ctrl-c-1", "--json"], env());
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout).answer).toBe(DEMO_ANSWERS.towers);
    expect(world.server.requests.length).toBe(requests);
  });
});
