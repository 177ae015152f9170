import { describe, expect, it } from "vitest";
import { DEMO_RESEARCH, researchResponder } from "../../src/apps/research/demo-trajectories.ts";
import { openPersistence } from "../../src/persistence/index.ts";
import type { Responder } from "../../src/testing/scripted-openai-server.ts";
import { runCli, spawnCli } from "../app/cli-helpers.ts";
import { taskOf, useDemoWorld, whileRunning } from "../app/fixtures.ts";

// A research run killed (kill -9) while its third sub-question is being researched, then resumed:
// the two sub-questions that had finished are served from the call journal — their researchers,
// page readers and condensations are not asked again (request counts prove it).

const [Q1, Q2, Q3] = DEMO_RESEARCH.questions;
let arrived!: () => void;
const reached = new Promise<void>((r) => (arrived = r));
let held = true;
const responder = (): Responder => {
  const inner = researchResponder();
  return async (req, ctx) => {
    const reply = await inner(req, ctx);
    // The third researcher's first request is held (longer than the test waits) until the kill.
    if (
      held &&
      taskOf(req).includes(Q3) &&
      req.messages[0].content.startsWith("You are the researcher agent")
    ) {
      arrived();
      return { ...(reply as object), delayMs: 30_000 } as typeof reply;
    }
    return reply;
  };
};
const world = useDemoWorld("codehop-research-resume-", { responder });

/** Journaled `research` calls of the thread (the sub-questions that finished). */
async function researchCalls(home: string, threadId: string): Promise<number> {
  const p = openPersistence(home);
  try {
    return (await p.journal.entries(threadId)).filter((e) => e.tool === "research").length;
  } finally {
    p.close();
  }
}

async function until(check: () => Promise<boolean>, what: string, ms = 60_000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const count = (rule: string, question?: string) =>
  world.server.requests.filter(
    (r) =>
      r.rule === rule &&
      (!question ||
        r.request.messages
          .map((m) => m.content)
          .join("\n")
          .includes(question)),
  ).length;

describe("research: kill -9, resume, replay", { timeout: 180_000 }, () => {
  it("does not redo finished sub-questions after a resume", async () => {
    const env = world.cliEnv({ CODEHOP_MAX_RETRIES: "0" });
    const run = spawnCli(
      [
        "research",
        DEMO_RESEARCH.topic,
        "--thread",
        "research-kill",
        "--corpus",
        world.corpus,
        "--json",
      ],
      env,
    );
    await whileRunning(run, reached, "the third sub-question's researcher");
    await until(
      async () => (await researchCalls(world.home, "research-kill")) === 2,
      "two finished sub-questions",
    );
    run.child.kill("SIGKILL");
    expect((await run.done).signal).toBe("SIGKILL");
    held = false;

    const before = {
      planner: count("planner"),
      q1: count("researcher:q1"),
      q2: count("researcher:q2"),
      readers: count("page_reader:q1") + count("page_reader:q2"),
      condense1: count("condenser", Q1),
      condense2: count("condenser", Q2),
    };
    expect(before).toEqual({ planner: 1, q1: 3, q2: 3, readers: 4, condense1: 1, condense2: 1 });

    const resumed = await runCli(["resume", "research-kill", "--json"], env);
    expect(resumed.stderr).not.toContain("Error:");
    expect(resumed.code).toBe(0);
    const result = JSON.parse(resumed.stdout);
    expect(result).toMatchObject({
      thread_id: "research-kill",
      status: "final_answer",
      title: DEMO_RESEARCH.title,
    });
    expect(result.questions.map((q: any) => q.status)).toEqual([
      "answered",
      "answered",
      "answered",
    ]);
    expect(result.report).toContain("## Overtaken by the Chrysler Building");
    expect(result.verification).toMatchObject({ checked: 12, supported: 12 });

    // Finished sub-questions: not asked again. The planner's pending action re-ran (one more
    // request for its final answer only), and the killed sub-question ran to its end.
    expect({
      q1: count("researcher:q1"),
      q2: count("researcher:q2"),
      readers: count("page_reader:q1") + count("page_reader:q2"),
      condense1: count("condenser", Q1),
      condense2: count("condenser", Q2),
    }).toEqual({ q1: 3, q2: 3, readers: 4, condense1: 1, condense2: 1 });
    expect(count("planner")).toBe(2);
    expect(count("researcher:q3")).toBeGreaterThanOrEqual(3);
    expect(count("condenser", Q3)).toBe(1);

    const p = openPersistence(world.home);
    try {
      const calls = (await p.journal.entries("research-kill")).filter((e) => e.tool === "research");
      expect(calls.map((c) => c.callIndex).sort()).toEqual([0, 1, 2]);
      expect(await p.threads.get("research-kill")).toMatchObject({
        status: "done",
        question: DEMO_RESEARCH.topic,
      });
    } finally {
      p.close();
    }
  });

  it("replays the thread from before the writer: the report is written and verified again, the research is not", async () => {
    const env = world.cliEnv();
    const history = JSON.parse((await runCli(["history", "research-kill", "--json"], env)).stdout);
    const beforeWrite = history.find((c: any) => c.next.includes("write"));
    expect(beforeWrite).toBeTruthy();
    const researchers = count("researcher:q1") + count("researcher:q2") + count("researcher:q3");
    const writers = count("writer");
    const replayed = await runCli(
      ["replay", "research-kill", "--checkpoint", beforeWrite.checkpoint_id, "--json"],
      env,
    );
    expect(replayed.code).toBe(0);
    const result = JSON.parse(replayed.stdout);
    expect(result.status).toBe("final_answer");
    expect(result.citations).toHaveLength(4);
    expect(count("researcher:q1") + count("researcher:q2") + count("researcher:q3")).toBe(
      researchers,
    );
    expect(count("writer")).toBe(writers + 3);
  });
});
