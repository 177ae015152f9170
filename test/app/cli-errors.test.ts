import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openPersistence } from "../../src/persistence/index.ts";
import { cliEnv, runCli, spawnCli } from "./cli-helpers.ts";

const tmp = () => mkdtempSync(join(tmpdir(), "codehop-cli-"));

// CLI processes start slowly on a loaded 2-core machine: generous per-test timeout (2 min were
// exceeded at load 70).
describe("CLI errors say what is wrong and what to do", { timeout: 300_000 }, () => {
  it("a bare `codehop` is a usage error: help on stderr, exit 2; --help and --version exit 0", async () => {
    const env = cliEnv({ CODEHOP_HOME: tmp() });
    const [bare, help, version] = await Promise.all([
      runCli([], env),
      runCli(["--help"], env),
      runCli(["--version"], env),
    ]);
    expect(bare.code).toBe(2);
    expect(bare.stdout).toBe("");
    expect(bare.stderr).toContain("Usage: codehop [options] [command]");
    expect(bare.stderr).toContain("ask");
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: codehop [options] [command]");
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it("a reader that closes early (`| head -1`) ends a command quietly with its own exit code", async () => {
    const env = cliEnv({ CODEHOP_HOME: tmp() });
    // The reading end is closed before the command writes: its first write fails with EPIPE.
    const closedEarly = (args: string[], stream: "stdout" | "stderr") => {
      const run = spawnCli(args, env);
      run.child[stream]!.destroy();
      return run.done;
    };
    const [help, rootHelp, threads, bare, bareBoth] = await Promise.all([
      closedEarly(["resume", "--help"], "stdout"),
      closedEarly(["--help"], "stdout"),
      closedEarly(["threads", "--json"], "stdout"),
      closedEarly([], "stderr"),
      (async () => {
        const run = spawnCli([], env);
        run.child.stdout!.destroy();
        run.child.stderr!.destroy();
        return run.done;
      })(),
    ]);
    for (const r of [help, rootHelp, threads]) {
      expect(r.stderr).not.toContain("EPIPE");
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(r.signal).toBeNull();
      expect(r.code).toBe(0);
    }
    // A usage error keeps its exit code when nobody reads its message.
    expect(bare.code).toBe(2);
    expect(bareBoth.code).toBe(2);
  });

  it("a configuration error (no model, a bad --corpus) leaves no thread behind in `codehop threads`", async () => {
    const home = tmp();
    const env = cliEnv({ CODEHOP_HOME: home });
    const q = "Does birch plywood float in ethanol?";
    const noModel = await runCli(["ask", q, "--thread", "no-model"], env);
    expect(noModel.code).toBe(2);
    expect(noModel.stderr).toContain("[CODEHOP_MODEL_NOT_CONFIGURED]");
    // It says what to set (or to try the demo), without a stack trace.
    for (const v of ["OPENAI_BASE_URL", "OPENAI_API_KEY", "CODEHOP_MODEL", "codehop demo"])
      expect(noModel.stderr).toContain(v);
    expect(noModel.stderr).not.toMatch(/\n\s+at /);
    const withModel = cliEnv({
      CODEHOP_HOME: home,
      OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
      OPENAI_API_KEY: "k",
      CODEHOP_MODEL: "m",
    });
    const badCorpus = await runCli(
      ["ask", q, "--thread", "bad-corpus", "--corpus", join(home, "missing.db")],
      withModel,
    );
    expect(badCorpus.code).toBe(2);
    expect(badCorpus.stderr).toContain("[CODEHOP_DB_INVALID]");
    const research = await runCli(["research", "Towers", "--thread", "no-model-research"], env);
    expect(research.code).toBe(2);
    expect(research.stderr).toContain("[CODEHOP_MODEL_NOT_CONFIGURED]");
    // None of them suggests continuing a thread that was never started.
    for (const r of [noModel, badCorpus, research]) expect(r.stderr).not.toContain("resume");

    const threads = await runCli(["threads", "--json"], env);
    expect(threads.code).toBe(0);
    expect(JSON.parse(threads.stdout)).toEqual([]);
    const history = await runCli(["history", "no-model"], env);
    expect(history.stderr).toContain("[CODEHOP_THREAD_NOT_FOUND]");
  });

  it("missing model endpoint, unknown thread, bad DB path", async () => {
    const emptyHome = tmp();
    const homeWithDb = tmp();
    openPersistence(homeWithDb).close();
    const fileAsHome = join(tmp(), "a-file");
    writeFileSync(fileAsHome, "not a directory");
    const garbageHome = tmp();
    writeFileSync(join(garbageHome, "checkpoints.db"), "garbage ".repeat(500));

    // A missing model endpoint as plain text: the test above (its `ask` leaves no thread).
    const [noModelJson, unknownThread, unknownHistory, homeIsFile, notSqlite, nothingYet] =
      await Promise.all([
        runCli(
          ["ask", "Does birch plywood float in ethanol?", "--json"],
          cliEnv({ CODEHOP_HOME: emptyHome }),
        ),
        runCli(["resume", "no-such-thread"], cliEnv({ CODEHOP_HOME: homeWithDb })),
        runCli(["history", "no-such-thread"], cliEnv({ CODEHOP_HOME: homeWithDb })),
        runCli(["threads"], cliEnv({ CODEHOP_HOME: fileAsHome })),
        runCli(["resume", "x"], cliEnv({ CODEHOP_HOME: garbageHome })),
        runCli(["history", "x"], cliEnv({ CODEHOP_HOME: join(emptyHome, "never-used") })),
      ]);

    expect(noModelJson.code).toBe(2);
    const json = JSON.parse(noModelJson.stdout);
    expect(json.error.code).toBe("CODEHOP_MODEL_NOT_CONFIGURED");
    expect(typeof json.thread_id).toBe("string");

    for (const r of [unknownThread, unknownHistory]) {
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('No thread "no-such-thread"');
      expect(r.stderr).toContain("[CODEHOP_THREAD_NOT_FOUND]");
      expect(r.stderr).toContain("codehop threads");
    }

    expect(homeIsFile.code).toBe(2);
    expect(homeIsFile.stderr).toContain("is not a directory");
    expect(homeIsFile.stderr).toContain("[CODEHOP_DB_INVALID]");

    expect(notSqlite.code).toBe(2);
    expect(notSqlite.stderr).toContain(join(garbageHome, "checkpoints.db"));
    expect(notSqlite.stderr).toContain("[CODEHOP_DB_INVALID]");

    expect(nothingYet.code).toBe(2);
    expect(nothingYet.stderr).toContain("nothing has run there yet");
  });
});
