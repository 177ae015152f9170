import { describe, expect, it } from "vitest";
import {
  AGENT_MARKERS,
  DEMO_ANSWERS,
  DEMO_QUESTIONS,
  DEMO_SUBTASKS,
  plywoodRules,
} from "../../src/apps/qa/demo-trajectories.ts";
import { openPersistence } from "../../src/persistence/index.ts";
import { observationCount, trajectoryResponder } from "../../src/testing/scripted-openai-server.ts";
import { runCli, spawnCli } from "./cli-helpers.ts";
import { readThread, systemOf, taskOf, useDemoWorld, whileRunning } from "./fixtures.ts";

// Two sub-agents run at once (one Promise.all). The process is killed when the first has
// finished and the second is waiting for its last model reply; the resumed run must take the
// first from the call journal and continue the second from its own checkpoints.
let plywoodDone: () => void;
const plywoodFinished = new Promise<void>((r) => (plywoodDone = r));
let killNow: () => void;
const readyToKill = new Promise<void>((r) => (killNow = r));
let hold = true;

/** Resolves once the CLI process has journaled the manager's call `callIndex` (polls the DB). */
async function journaled(threadId: string, callIndex: number): Promise<void> {
  const p = openPersistence(world.home);
  try {
    for (let i = 0; i < 300; i++) {
      const found = (await p.journal.entries(threadId)).some(
        (e) => e.tool === "wikipedia_search_agent" && e.callIndex === callIndex,
      );
      if (found) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error("the first sub-agent call was never journaled");
  } finally {
    p.close();
  }
}

const isWiki = (system: string) => system.startsWith(AGENT_MARKERS.wikipedia_search);

const world = useDemoWorld("codehop-crash-par-", {
  responder: () => {
    const responder = trajectoryResponder(plywoodRules());
    return async (req, ctx) => {
      const reply = await responder(req, ctx);
      const system = systemOf(req);
      const task = taskOf(req);
      const step = observationCount(req);
      if (isWiki(system) && task.includes(DEMO_SUBTASKS.plywood) && step === 2) plywoodDone();
      if (hold && isWiki(system) && task.includes(DEMO_SUBTASKS.ethanol) && step === 2) {
        await plywoodFinished;
        // Wait until the finished sub-agent's result is in the manager's call journal.
        await journaled("par-1", 0);
        killNow();
        return { ...(reply as object), delayMs: 20_000 } as typeof reply;
      }
      return reply;
    };
  },
});

// CLI processes start slowly on a loaded 2-core machine: generous per-test timeout.
describe("crash during a Promise.all of two sub-agents", { timeout: 120_000 }, () => {
  it("resumes the unfinished sub-agent from its checkpoints and serves the finished one from the journal", async () => {
    const env = world.cliEnv({ CODEHOP_MAX_RETRIES: "0" });
    const run = spawnCli(
      ["ask", DEMO_QUESTIONS.plywood, "--thread", "par-1", "--corpus", world.corpus, "--json"],
      env,
    );
    await whileRunning(run, readyToKill, "the kill point");
    run.child.kill("SIGKILL");
    expect((await run.done).signal).toBe("SIGKILL");
    hold = false;
    const count = (rule: string, step?: number) =>
      world.server.requestsFor(rule).filter((r) => step === undefined || r.step === step).length;
    const before = {
      plywood: count("wiki:plywood"),
      plywoodPage: count("page:plywood"),
      ethanolPage: count("page:ethanol"),
    };
    expect(before).toEqual({ plywood: 3, plywoodPage: 2, ethanolPage: 2 });

    const resumed = await runCli(["resume", "par-1", "--json"], env);
    expect(resumed.code).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({
      answer: DEMO_ANSWERS.plywood,
      thread_id: "par-1",
    });

    // Nothing that had finished ran again: the plywood sub-agent (journal), the ethanol agent's
    // first two steps and its page agent (its own checkpoints); only its last step was re-asked.
    expect(count("wiki:plywood")).toBe(before.plywood);
    expect(count("page:plywood")).toBe(before.plywoodPage);
    expect(count("page:ethanol")).toBe(before.ethanolPage);
    expect([count("wiki:ethanol", 0), count("wiki:ethanol", 1), count("wiki:ethanol", 2)]).toEqual([
      1, 1, 2,
    ]);
    expect(count("manager:plywood", 0)).toBe(1);

    await readThread(world.home, "par-1", (state) => {
      expect(state.steps[0].toolCalls.map((c: any) => [c.callIndex, c.fromJournal])).toEqual([
        [0, true],
        [1, false],
      ]);
      expect(state.steps[0].observation).toContain("Ethanol: Ethanol has a density of 0.789 g/cm³");
    });
  });
});
