import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
} from "../../src/testing/scripted-openai-server.ts";
import { directRules } from "./scripted-eval.ts";

// The real `codehop eval` binary in a child process against the scripted server: flags, the
// terminal table, and Ctrl-C (a real SIGINT) leaving a consistent partial report.
const ROOT = join(import.meta.dirname, "../..");
const FIX = join(ROOT, "test/fixtures/eval");
const tmp = mkdtempSync(join(tmpdir(), "codehop-eval-cli-"));
let server: ScriptedOpenAIServer;

beforeAll(async () => {
  server = await ScriptedOpenAIServer.start({ responder: trajectoryResponder(directRules(1200)) });
});
afterAll(async () => server.close());

function run(
  args: string[],
  onSpawn?: (child: ReturnType<typeof spawn>) => void,
  baseURL = server.baseURL,
) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [join(ROOT, "bin/codehop.mjs"), "eval", ...args], {
      cwd: tmp,
      env: {
        PATH: process.env.PATH,
        OPENAI_BASE_URL: baseURL,
        OPENAI_API_KEY: "test",
        CODEHOP_MODEL: "scripted-model",
        CODEHOP_MAX_RETRIES: "0",
        CODEHOP_HOME: join(tmp, "home"),
      },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    onSpawn?.(child);
  });
}

describe("codehop eval (CLI)", () => {
  it("runs a dataset, prints the table and writes the reports under $CODEHOP_HOME/eval/<name> by default", async () => {
    const res = await run([
      "--dataset",
      join(FIX, "plain.jsonl"),
      "--systems",
      "direct",
      "--concurrency",
      "3",
    ]);
    expect(res.stderr).toContain("skipped record 2 (line 4): missing or empty `question`");
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/direct\s+3\s+33\.3\s+52\.4\s+66\.7/);
    const report = JSON.parse(readFileSync(join(tmp, "home/eval/plain/report.json"), "utf8"));
    expect(report.systems[0].em).toBeCloseTo(1 / 3, 10);
  });

  it("rejects bad flags with a clear message", async () => {
    const res = await run(["--dataset", join(FIX, "plain.jsonl"), "--systems", "direct,magic"]);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/--systems.*magic/);
    const res2 = await run(["--dataset", join(FIX, "plain.jsonl"), "--limit", "0"]);
    expect(res2.stderr).toMatch(/--limit must be a positive integer/);
  });

  it("Ctrl-C leaves a consistent partial report and exit code 130; the rerun finishes", async () => {
    const out = join(tmp, "sigint");
    const args = [
      "--dataset",
      join(FIX, "plain.jsonl"),
      "--systems",
      "direct",
      "--concurrency",
      "1",
      "--out",
      out,
    ];
    const before = server.requests.length;
    const res = await run(args, (child) => {
      // Send SIGINT once the second question is in flight (the first one has finished).
      const timer = setInterval(() => {
        if (server.requests.length - before >= 2) {
          clearInterval(timer);
          child.kill("SIGINT");
        }
      }, 20);
    });
    expect(res.code).toBe(130);
    expect(res.stdout).toMatch(/interrupted: rerun the same command to finish \(1\/3 done\)/);
    const partial = JSON.parse(readFileSync(join(out, "report.json"), "utf8"));
    expect(partial.partial).toBe(true);
    expect(partial.results.map((r: any) => r.questionId)).toEqual(["p1"]);
    const again = await run(args);
    expect(again.code).toBe(0);
    expect(again.stderr).toMatch(/1 of 3 question × system results already done/);
    const full = JSON.parse(readFileSync(join(out, "report.json"), "utf8"));
    expect(full.partial).toBe(false);
    expect(full.results.map((r: any) => r.questionId)).toEqual(["p1", "p2", "p3"]);
  });

  it("exits 2 when a system fails on more questions than --max-error-rate allows, printing the first errors", async () => {
    const down = await ScriptedOpenAIServer.start({
      responder: () => ({ status: 500, body: '{"error":{"message":"model crashed"}}' }),
    });
    try {
      const args = ["--dataset", join(FIX, "plain.jsonl"), "--systems", "direct", "--no-progress"];
      const failed = await run([...args, "--out", join(tmp, "down")], undefined, down.baseURL);
      expect(failed.code).toBe(2);
      // The report is still written and shown; the errors come first in the terminal.
      expect(failed.stdout).toMatch(/direct\s+3\s+0\.0/);
      expect(failed.stderr).toContain("3 questions failed");
      expect(failed.stderr).toMatch(/direct p1: .*HTTP 500: model crashed/);
      expect(failed.stderr).not.toContain('{"error"');
      expect(failed.stderr).toContain("direct 3/3 (100%) is over --max-error-rate 0.25");
      expect(failed.stderr).toContain("[CODEHOP_EVAL_TOO_MANY_ERRORS]");
      const report = JSON.parse(readFileSync(join(tmp, "down/report.json"), "utf8"));
      expect(report.systems[0].errors).toBe(3);
      // A limit the run stays within: exit 0, the errors still listed.
      const allowed = await run(
        [...args, "--out", join(tmp, "down-allowed"), "--max-error-rate", "100%"],
        undefined,
        down.baseURL,
      );
      expect(allowed.code).toBe(0);
      expect(allowed.stderr).toContain("First errors:");
      const bad = await run([...args, "--max-error-rate", "2"], undefined, down.baseURL);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain("--max-error-rate");
    } finally {
      await down.close();
    }
  });
});
