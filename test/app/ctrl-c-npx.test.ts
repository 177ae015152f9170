import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { DEMO_QUESTIONS, DEMO_SUBTASKS, towersRules } from "../../src/apps/qa/demo-trajectories.ts";
import { holdingSubtask, useDemoWorld, whileRunning } from "./fixtures.ts";

// Ctrl-C as a user presses it, through `npx codehop` (issue 24): the terminal sends SIGINT to the
// whole foreground process group, npm's and codehop's processes alike. The run's second sub-agent
// call is held until the test has pressed Ctrl-C.
const second = holdingSubtask(towersRules, DEMO_SUBTASKS.empire);
const world = useDemoWorld("codehop-ctrl-c-npx-", { responder: second.responder });

describe("Ctrl-C through npx", { timeout: 180_000 }, () => {
  it("`npx codehop ask` stopped with Ctrl-C ends by SIGINT (130 in a shell) after codehop stopped the run cleanly, as documented", async () => {
    const child = spawn(
      "npx",
      [
        "codehop",
        "ask",
        DEMO_QUESTIONS.towers,
        "--thread",
        "npx-c",
        "--corpus",
        world.corpus,
        "--json",
      ],
      {
        env: world.cliEnv({ CODEHOP_MAX_RETRIES: "0" }),
        stdio: ["ignore", "pipe", "pipe"],
        // Its own process group, as a terminal's foreground job: the group gets the SIGINT.
        detached: true,
      },
    );
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on("close", (code, signal) => resolve({ code, signal })),
    );
    await whileRunning(
      {
        child,
        stdout: () => out,
        stderr: () => err,
        done: done.then((r) => ({ ...r, stdout: out, stderr: err })),
      },
      second.reached,
      "the second sub-agent call",
    );
    process.kill(-child.pid!, "SIGINT");
    const stopped = await done;
    second.release();
    // codehop itself exits 2 (test/app/ctrl-c.test.ts), but npm runs the bin through `sh -c`,
    // and the shell, which got the SIGINT too, ends by it once codehop has exited: npx then
    // re-raises it, so the shell reports 130 (docs/app.md "Exit codes").
    expect({ code: stopped.code, signal: stopped.signal }).toEqual({
      code: null,
      signal: "SIGINT",
    });
    // The run was still stopped cleanly: the same result as without npx, and resumable.
    expect(JSON.parse(out)).toMatchObject({
      error: { code: "CODEHOP_RUN_INTERRUPTED" },
      thread_id: "npx-c",
    });
  });
});
