import { describe, expect, it } from "vitest";
import {
  DEMO_ANSWERS,
  DEMO_QUESTIONS,
  DEMO_SUBTASKS,
  towersRules,
} from "../../src/apps/qa/demo-trajectories.ts";
import { trace } from "../../src/apps/qa/app.ts";
import { runCli, spawnCli } from "./cli-helpers.ts";
import { holdingSubtask, readThread, useDemoWorld, whileRunning } from "./fixtures.ts";
import { foldVariables } from "../../src/core/variables.ts";

// The CLI's second sub-agent call (Empire State Building) is held until the test stops the run.
const second = holdingSubtask(towersRules, DEMO_SUBTASKS.empire);
const world = useDemoWorld("codehop-crash-", { responder: second.responder });

const cliEnvFor = () => world.cliEnv({ CODEHOP_MAX_RETRIES: "0" });

// CLI processes start slowly on a loaded 2-core machine: generous per-test timeout.
describe("crash and resume through the CLI", { timeout: 120_000 }, () => {
  it("kill -9 during the second sub-agent call, then `codehop resume` finishes without repeating the first", async () => {
    const env = cliEnvFor();
    const run = spawnCli(
      ["ask", DEMO_QUESTIONS.towers, "--thread", "crash-1", "--corpus", world.corpus, "--json"],
      env,
    );
    await whileRunning(run, second.reached, "the second sub-agent call");
    // The thread id was shown as soon as the run started.
    expect(run.stderr()).toContain("thread crash-1");
    run.child.kill("SIGKILL");
    const killed = await run.done;
    expect(killed.signal).toBe("SIGKILL");
    second.release();
    // `codehop threads` tells a killed run from a running one.
    const listed = await runCli(["threads", "--json"], cliEnvFor());
    expect(JSON.parse(listed.stdout).find((t: any) => t.threadId === "crash-1")).toMatchObject({
      status: "interrupted",
    });

    const before = {
      manager: world.server.requestsFor("manager:towers").length,
      eiffel: world.server.requestsFor("wiki:eiffel").length,
    };
    expect(before).toEqual({ manager: 1, eiffel: 2 });

    const resumed = await runCli(["resume", "crash-1", "--json"], env);
    expect(resumed.stderr).not.toContain("Error:");
    expect(resumed.code).toBe(0);
    const result = JSON.parse(resumed.stdout);
    expect(result).toMatchObject({
      answer: DEMO_ANSWERS.towers,
      thread_id: "crash-1",
      status: "final_answer",
    });
    expect(result.usage.by_agent.manager.calls).toBeGreaterThanOrEqual(2);

    // The finished sub-agent call (Eiffel Tower: 2 model requests) was served from the call
    // journal, not re-run; the manager's first action was not re-planned either.
    expect(world.server.requestsFor("wiki:eiffel")).toHaveLength(2);
    expect(world.server.requestsFor("manager:towers")).toHaveLength(2);
    // The interrupted call ran again to completion.
    expect(world.server.requestsFor("page:empire").length).toBeGreaterThanOrEqual(2);

    await readThread(world.home, "crash-1", async (state, p) => {
      // Each call got its own answer back (the re-run call must not pick up the first call's
      // finished sub-agent checkpoints).
      expect(state.steps[0].observation).toContain(
        "Empire State Building: Construction of the Empire State Building began in 1930",
      );
      const calls = state.steps[0].toolCalls;
      expect(calls.map((c: any) => [c.callIndex, c.fromJournal])).toEqual([
        [0, true],
        [1, false],
      ]);
      // The sandbox variables were restored: the final action used `completed` from code.
      expect(foldVariables(state.variables)!.values).toMatchObject({
        completed: 1889,
        started: 1930,
        years: 41,
      });
      expect(await p.threads.get("crash-1")).toMatchObject({
        status: "done",
        question: DEMO_QUESTIONS.towers,
      });
      // The tree rebuilt from the checkpoints holds both calls: the one finished before the kill
      // and the one re-run after it.
      const tree = await trace("crash-1", { persistence: p });
      const answers = tree.root!.steps[0].children.map((c) => c.answer ?? "");
      expect(answers.some((a) => a.includes("1889"))).toBe(true);
      expect(answers.some((a) => a.includes("began in 1930"))).toBe(true);
    });
  });
});
