import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "shell-quote";
import { describe, expect, it } from "vitest";
import { DEMO_QUESTIONS, demoRules } from "../../src/apps/qa/demo-trajectories.ts";
import { trajectoryResponder } from "../../src/testing/scripted-openai-server.ts";
import { cliEnv, runCli } from "./cli-helpers.ts";
import { useDemoWorld } from "./fixtures.ts";

// The model endpoint is down while `down` is set (every request answers 500).
let down = false;
const world = useDemoWorld("codehop-next-steps-", {
  responder: () => {
    const normal = trajectoryResponder(demoRules());
    return async (req, ctx) =>
      down ? { status: 500, body: '{"error":{"message":"model crashed"}}' } : normal(req, ctx);
  },
});

/**
 * The commands a message suggests (as `npx codehop`: the tests' PATH has no codehop): in
 * backquotes in errors, or up to a `#` comment in listings.
 */
function suggested(text: string): string[][] {
  const found = /(?:`|^\s*|: )npx codehop ([^`#\n]+?)\s*(?:`|#|$)/gm;
  // Placeholders (`<id>`) are words here, not shell redirections.
  return [...text.matchAll(found)].map((m) =>
    parse(m[1].replace(/<(\w+)>/g, "__$1__")).map((w) => String(w).replace(/^__(\w+)__$/, "<$1>")),
  );
}

// ~16 CLI processes, one after another, on a loaded 2-core machine (4 min were exceeded at load 50).
describe("every next step codehop suggests works when run", { timeout: 600_000 }, () => {
  it("keeps --home, says npx codehop (no codehop on PATH), and each suggested command succeeds", async () => {
    const home = join(mkdtempSync(join(tmpdir(), "codehop-next-home-")), "data");
    // Only the flags: no CODEHOP_HOME / CODEHOP_CORPUS in the environment.
    const env = cliEnv({
      OPENAI_BASE_URL: world.server.baseURL,
      OPENAI_API_KEY: "k",
      CODEHOP_MODEL: "scripted",
      CODEHOP_MAX_RETRIES: "0",
    });
    const flags = ["--home", home, "--corpus", world.corpus];

    // A run that fails (endpoint down) suggests resume; with the endpoint back, that works.
    down = true;
    const failed = await runCli(["ask", DEMO_QUESTIONS.towers, "--thread", "nx", ...flags], env);
    down = false;
    expect(failed.code).toBe(2);
    expect(failed.stderr).toContain("[CODEHOP_MODEL_ENDPOINT_FAILED]");
    const [resume] = suggested(failed.stderr);
    expect(resume).toEqual(["resume", "nx", "--home", home, "--corpus", world.corpus]);
    expect(failed.stderr).toContain("`npx codehop resume nx --home");
    const resumed = await runCli(resume, env);
    expect(resumed.code).toBe(0);
    // The result's next steps: show, history (and replay, with a checkpoint to fill in).
    const next = suggested(resumed.stdout);
    expect(next.map((c) => c[0])).toEqual(["show", "history", "replay"]);
    let listing: Awaited<ReturnType<typeof runCli>> | undefined;
    for (const args of next.filter((c) => c[0] !== "replay")) {
      expect(args).toContain(home);
      const r = await runCli(args, env);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(0);
      if (args[0] === "history") listing = r;
    }
    // The suggested history is the plain listing of the thread (read below for its own steps).
    expect(next[1]).toEqual(["history", "nx", "--home", home]);

    // history names the commands for one checkpoint; with a real id filled in, both work.
    const history = await runCli(["history", "nx", "--home", home, "--json"], env);
    const mid = JSON.parse(history.stdout).find((r: any) => r.next.includes("act"));
    const forCheckpoint = suggested(listing!.stdout).map((c) =>
      c.map((w) => (w === "<id>" ? mid.checkpoint_id : w)),
    );
    expect(forCheckpoint.map((c) => c[0])).toEqual(["history", "replay"]);
    for (const args of forCheckpoint) {
      const r = await runCli(args, env);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(0);
    }

    // A --set value of the wrong type forks nothing and points at the state to look at.
    const listed = await runCli(["history", "nx", "--home", home, "--json"], env);
    const before = JSON.parse(listed.stdout).length;
    const badSet = await runCli(
      ["replay", "nx", "--checkpoint", mid.checkpoint_id, "--set", "stepCount=abc", "--home", home],
      env,
    );
    expect(badSet.code).toBe(2);
    expect(badSet.stderr).toContain('"stepCount"');
    expect(badSet.stderr).toContain("[CODEHOP_CONFIG_INVALID]");
    const [look] = suggested(badSet.stderr);
    expect(look).toEqual(["history", "nx", "--checkpoint", mid.checkpoint_id, "--home", home]);
    expect((await runCli(look, env)).code).toBe(0);
    const after = await runCli(["history", "nx", "--home", home, "--json"], env);
    expect(JSON.parse(after.stdout).length).toBe(before);

    // Unknown checkpoint and unknown thread: the suggested listings work.
    const [noCheckpoint, noThread] = await Promise.all([
      runCli(["replay", "nx", "--checkpoint", "nope", "--home", home], env),
      runCli(["resume", "nope", "--home", home], env),
    ]);
    for (const r of [noCheckpoint, noThread]) {
      expect(r.code).toBe(2);
      const [cmd] = suggested(r.stderr);
      expect(cmd).toContain(home);
      expect((await runCli(cmd, env)).code).toBe(0);
    }
  });
});
