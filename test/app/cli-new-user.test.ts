import { mkdirSync, mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { threadsToPrune } from "../../src/cli/commands/threads.ts";
import { DEMO_QUESTIONS } from "../../src/apps/qa/demo-trajectories.ts";
import { openPersistence, type ThreadRecord } from "../../src/persistence/index.ts";
import { cliEnv, runCli } from "./cli-helpers.ts";
import { useDemoWorld } from "./fixtures.ts";

const tmp = (prefix = "codehop-nu-") => mkdtempSync(join(tmpdir(), prefix));
const world = useDemoWorld("codehop-nu-world-");

/** Rows of a table for a thread, read straight from the SQLite file (what a delete must remove). */
function rowsOf(home: string, threadId: string) {
  const db = new Database(join(home, "checkpoints.db"), { readonly: true });
  try {
    const count = (sql: string) => (db.prepare(sql).get(threadId) as { n: number }).n;
    return {
      journal: count("SELECT count(*) AS n FROM codehop_call_journal WHERE thread_id = ?"),
      registry: count("SELECT count(*) AS n FROM codehop_threads WHERE thread_id = ?"),
    };
  } finally {
    db.close();
  }
}

// CLI processes start slowly on a loaded 2-core machine: generous per-test timeout.
describe("what a new user meets first", { timeout: 180_000 }, () => {
  it("flag errors from the parser use codehop's format and exit code; help and --version exit 0", async () => {
    const env = cliEnv({});
    const [unknown, badValue, missing, help, version] = await Promise.all([
      runCli(["threads", "--bogus"], env),
      runCli(["eval", "--dataset", "x.json", "--limit", "abc"], env),
      runCli(["replay", "some-thread"], env),
      runCli(["threads", "--help"], env),
      runCli(["--version"], env),
    ]);
    for (const r of [unknown, badValue, missing]) {
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^codehop: .+ \[CODEHOP_CONFIG_INVALID\]\n$/);
      expect(r.stderr).not.toMatch(/^error:/m);
    }
    expect(unknown.stderr).toContain("unknown option '--bogus'");
    expect(unknown.stderr).toContain("codehop threads --help");
    expect(badValue.stderr).toContain("--limit must be a positive integer");
    expect(missing.stderr).toContain("--checkpoint");
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("--prune");
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toBe("0.1.0");
  });

  it("help shows defaults in the option's own units; numeric options are validated (exit 2)", async () => {
    const env = cliEnv({});
    const [threadsHelp, doctorHelp, demoHelp, ...bad] = await Promise.all([
      runCli(["threads", "--help"], env),
      runCli(["doctor", "--help"], env),
      runCli(["demo", "--help"], env),
      runCli(["threads", "--limit", "abc"], env),
      runCli(["threads", "--limit", "0"], env),
      runCli(["demo", "--port", "70000"], env),
      runCli(["demo", "--delay", "-5"], env),
      runCli(["show", "t", "--width", "wide"], env),
      runCli(["chat", "--keep-rounds", "1.5"], env),
      runCli(["doctor", "--timeout", "soon"], env),
    ]);
    const flat = (s: string) => s.replace(/\s+/g, " ");
    expect(flat(threadsHelp.stdout)).toContain("(default: 30d)");
    expect(flat(threadsHelp.stdout)).toContain("(default: done,failed,interrupted,unknown)");
    expect(flat(threadsHelp.stdout)).toContain("show at most n threads (default: 20)");
    expect(flat(doctorHelp.stdout)).toContain(
      "time limit of each request to the endpoint (default: 30)",
    );
    expect(flat(doctorHelp.stdout)).toContain("is a warning (default: 10)");
    expect(flat(demoHelp.stdout)).toContain(
      "port of the scripted model server (default: a free port)",
    );
    expect(flat(demoHelp.stdout)).not.toContain('"0"');
    for (const r of bad) {
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^codehop: .+ \[CODEHOP_CONFIG_INVALID\]\n$/);
    }
    expect(bad[0].stderr).toContain("--limit must be a whole number of at least 1.");
    expect(bad[2].stderr).toContain("--port must be a whole number from 0 to 65535.");
    expect(bad[6].stderr).toContain("--timeout must be a positive number of seconds");
  });

  it("threads in a fresh directory prints an empty list", async () => {
    const fresh = join(tmp(), "never-used");
    const [text, json] = await Promise.all([
      runCli(["threads"], cliEnv({ CODEHOP_HOME: fresh })),
      runCli(["threads", "--json", "--home", fresh], cliEnv({})),
    ]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain("No threads in");
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual([]);
  });

  /**
   * Two finished threads in a fresh data directory (`ask` del-a and del-b, at once), asked once for
   * the file (by whichever test needs them first): one test deletes del-a, another shows del-b.
   */
  let twoThreads:
    | Promise<{ home: string; env: NodeJS.ProcessEnv; runs: Awaited<ReturnType<typeof runCli>>[] }>
    | undefined;
  const askTwoThreads = () =>
    (twoThreads ??= (async () => {
      const home = tmp();
      const env = world.cliEnv({ CODEHOP_HOME: home, CODEHOP_CORPUS: world.corpus });
      const runs = await Promise.all([
        runCli(["ask", DEMO_QUESTIONS.towers, "--thread", "del-a", "--json"], env),
        runCli(["ask", DEMO_QUESTIONS.plywood, "--thread", "del-b", "-q"], env),
      ]);
      return { home, env, runs };
    })());

  it("threads --delete removes a thread's checkpoints, journal rows and registry row; others stay", async () => {
    const {
      home,
      env,
      runs: [a, b],
    } = await askTwoThreads();
    expect([a.code, b.code], a.stderr + b.stderr).toEqual([0, 0]);
    expect(rowsOf(home, "del-a").journal).toBeGreaterThan(0);

    const del = await runCli(["threads", "--delete", "del-a", "--json"], env);
    expect(del.code).toBe(0);
    expect(JSON.parse(del.stdout)).toEqual({ deleted: ["del-a"], dry_run: false });
    expect(rowsOf(home, "del-a")).toEqual({ journal: 0, registry: 0 });
    const p = openPersistence(home);
    try {
      expect(p.checkpointer.rootCheckpointCounts("del-a").get("del-a") ?? 0).toBe(0);
      expect(await p.threads.get("del-a")).toBeUndefined();
      expect(await p.threads.get("del-b")).toMatchObject({ status: "done" });
    } finally {
      p.close();
    }
    const [history, again] = await Promise.all([
      runCli(["history", "del-a"], env),
      runCli(["threads", "--delete", "del-a"], env),
    ]);
    expect(history.code).toBe(2);
    expect(history.stderr).toContain("[CODEHOP_THREAD_NOT_FOUND]");
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('No thread "del-a"');
  });

  it("threads --prune deletes old finished threads only (age and status), --dry-run deletes nothing", async () => {
    const home = tmp();
    const p = openPersistence(home);
    const now = Date.now();
    const day = 86_400_000;
    try {
      for (const [id, status, ageDays] of [
        ["old-done", "done", 40],
        ["old-failed", "failed", 40],
        ["new-done", "done", 1],
        ["old-interrupted", "interrupted", 40],
      ] as const) {
        await p.threads.start(id, { question: id });
        if (status === "done") await p.threads.finish(id, "x");
        else await p.threads.fail(id, "x", { interrupted: status === "interrupted" });
        p.db
          .prepare("UPDATE codehop_threads SET updated_at = ? WHERE thread_id = ?")
          .run(new Date(now - ageDays * day).toISOString(), id);
      }
    } finally {
      p.close();
    }
    const env = cliEnv({ CODEHOP_HOME: home });
    const dry = JSON.parse(
      (await runCli(["threads", "--prune", "--dry-run", "--json"], env)).stdout,
    );
    expect(dry.dry_run).toBe(true);
    expect(dry.deleted.sort()).toEqual(["old-done", "old-failed", "old-interrupted"]);
    const onlyDone = await runCli(["threads", "--prune", "--status", "done", "--json"], env);
    expect(JSON.parse(onlyDone.stdout).deleted).toEqual(["old-done"]);
    const rest = await runCli(["threads", "--prune", "--older-than", "2w"], env);
    expect(rest.code).toBe(0);
    expect(rest.stdout).toContain("Deleted 2 threads");
    const left = JSON.parse((await runCli(["threads", "--json"], env)).stdout);
    expect(left.map((t: any) => t.thread_id)).toEqual(["new-done"]);
    const bad = await runCli(["threads", "--prune", "--older-than", "soon"], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("[CODEHOP_CONFIG_INVALID]");
  });

  it("threadsToPrune: never a running thread; no recorded time means no age", () => {
    const t = (threadId: string, status: ThreadRecord["status"], updatedAt: string | null) =>
      ({ threadId, status, updatedAt }) as ThreadRecord;
    const now = Date.parse("2026-01-31T00:00:00Z");
    const threads = [
      t("running", "running", "2025-01-01T00:00:00Z"),
      t("api", "unknown", null),
      t("old", "done", "2026-01-01T00:00:00Z"),
      t("young", "done", "2026-01-30T00:00:00Z"),
    ];
    const ids = (o: { olderThanMs: number }) =>
      threadsToPrune(threads, {
        ...o,
        statuses: ["done", "failed", "interrupted", "unknown"],
        now,
      }).map((x) => x.threadId);
    expect(ids({ olderThanMs: 7 * 86_400_000 })).toEqual(["old"]);
    expect(ids({ olderThanMs: 0 })).toEqual(["api", "old", "young"]);
  });

  it("threads --json is snake_case like every other JSON output, keeping the earlier camelCase names", async () => {
    const home = tmp();
    const p = openPersistence(home);
    await p.threads.start("json-1", { question: "q" });
    await p.threads.finish("json-1", "a", 1234);
    p.close();
    const out = await runCli(["threads", "--json"], cliEnv({ CODEHOP_HOME: home }));
    const [row] = JSON.parse(out.stdout);
    expect(row).toMatchObject({
      thread_id: "json-1",
      status: "done",
      duration_ms: 1234,
      forked_from: null,
      threadId: "json-1",
      durationMs: 1234,
    });
    expect(typeof row.updated_at).toBe("string");
    expect(row.updated_at).toBe(row.updatedAt);
  });

  it("ingest --json and show --json carry snake_case names too (the camelCase ones stay)", async () => {
    const db = join(tmp(), "c.db");
    const ingested = await runCli(
      ["ingest", join(process.cwd(), "data/demo-corpus.jsonl"), "--db", db, "--json"],
      cliEnv({}),
    );
    const report = JSON.parse(ingested.stdout);
    expect(report).toMatchObject({ db, added: 63, skipped_records: [], skippedRecords: [] });
    expect(report.resumed_from).toBe(report.resumedFrom);
    expect(report.elapsed_ms).toBe(report.elapsedMs);

    // A finished thread: del-b of the file's two asks (never deleted).
    const { env, runs } = await askTwoThreads();
    expect(runs[1].code, runs[1].stderr).toBe(0);
    const tree = JSON.parse((await runCli(["show", "del-b", "--json"], env)).stdout);
    const last = tree.steps.at(-1);
    expect(last.is_final).toBe(true);
    expect(last.isFinal).toBe(true);
  });

  it("ingest --db creates missing directories like --home; ask --corpus <directory> says what is wrong", async () => {
    const root = tmp();
    const db = join(root, "a", "b", "corpus.db");
    const ingested = await runCli(
      ["ingest", join(process.cwd(), "data/demo-corpus.jsonl"), "--db", db, "--no-progress"],
      cliEnv({}),
    );
    expect(ingested.code).toBe(0);
    expect(statSync(db).isFile()).toBe(true);

    const dir = join(root, "a-folder");
    mkdirSync(dir);
    const asked = await runCli(
      ["ask", DEMO_QUESTIONS.towers, "--corpus", dir, "-q"],
      world.cliEnv({ CODEHOP_HOME: root }),
    );
    expect(asked.code).toBe(2);
    expect(asked.stderr).toContain(`corpus database ${dir} is a directory`);
    expect(asked.stderr).toContain("[CODEHOP_DB_INVALID]");
    expect(asked.stderr).not.toContain("disk I/O error");
  });
});
