import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEMO_ANSWER, DEMO_TASK } from "../../src/apps/assistant/demo-trajectories.ts";
import { cliEnv, runCli } from "../app/cli-helpers.ts";
import { startAssistantWorld, type AssistantWorld } from "./world.ts";

// The assistant's entry points as a user runs them: the `codehop` binary in a child process, the
// scripted model and the local website (SearxNG-compatible search, archive) over real HTTP.

let world: AssistantWorld;
beforeAll(async () => {
  world = await startAssistantWorld();
}, 60_000);
afterAll(() => world?.close());

const env = (home: string) =>
  cliEnv({
    OPENAI_BASE_URL: world.model.baseURL,
    OPENAI_API_KEY: "scripted",
    CODEHOP_MODEL: "scripted",
    CODEHOP_MAX_RETRIES: "0",
    CODEHOP_HOME: home,
    CODEHOP_SEARCH_URL: world.web.url("/searxng"),
    CODEHOP_WAYBACK_URL: world.web.url("/wayback/available"),
    CODEHOP_BROWSER: "text",
  });

describe("codehop assist", { timeout: 300_000 }, () => {
  it('answers "<task>" --file ... --json with the answer, the thread and usage per agent', async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-assist-cli-"));
    const files = Object.values(world.files).flatMap((f) => ["--file", f]);
    const res = await runCli(
      ["assist", DEMO_TASK, ...files, "--json", "--thread", "cli-1"],
      env(home),
    );
    expect(res.stderr).not.toMatch(/Error|failed/i);
    expect(res.code).toBe(0);
    const out = JSON.parse(res.stdout);
    expect(out).toMatchObject({ answer: DEMO_ANSWER, thread_id: "cli-1", status: "final_answer" });
    expect(Object.keys(out.usage.by_agent)).toEqual(
      expect.arrayContaining(["assistant", "web_search"]),
    );
    // The thread is an ordinary codehop thread: `show` finds it, `resume` returns the stored answer.
    const again = await runCli(["resume", "cli-1", "--json"], env(home));
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout).answer).toBe(DEMO_ANSWER);
  });

  it("a file that does not exist is refused before anything runs, naming it", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-assist-cli-"));
    const res = await runCli(["assist", "Read it.", "--file", "/no/such/file.pdf"], env(home));
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain("/no/such/file.pdf");
    expect(res.stderr).not.toMatch(/^\s+at /m);
    expect(
      world.model.requests.filter((r) =>
        r.request.messages.some((m) => m.content.includes("Read it.")),
      ),
    ).toEqual([]);
  });
});

describe("codehop demo --question assistant", { timeout: 300_000 }, () => {
  it("runs the scripted task over its own local website, PDF and spreadsheet, offline", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-assist-demo-"));
    // No model endpoint, search provider or site given: the demo brings its own.
    const res = await runCli(
      ["demo", "--question", "assistant", "--json"],
      cliEnv({ CODEHOP_HOME: home }),
    );
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ answer: DEMO_ANSWER, status: "final_answer" });
  });
});
