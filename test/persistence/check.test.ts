/**
 * `codehop check`: a whole database exits 0; a damaged one exits 1 naming each damaged thread and
 * row; `--repair` moves the damaged threads aside (a copy kept) and the rest keep working. SQLite
 * (`--db`, or the data directory) and PostgreSQL (CODEHOP_DATABASE_URL).
 */
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import { openPersistence, openPostgresPersistence } from "../../src/persistence/index.ts";
import { NOT_DEFLATE, deflateBomb } from "../../packages/checkpoint-sqlite/test/crafted.ts";
import { runCli } from "../app/cli-helpers.ts";
import { useDemoWorld } from "../app/fixtures.ts";
import { damagedHome, latestCheckpoint, twoThreads } from "./damaged.ts";
import { postgresMissing, useTestCluster } from "./postgres-cluster.ts";

const world = useDemoWorld("codehop-check-");
const cluster = useTestCluster();

interface Report {
  database: string;
  ok: boolean;
  integrity: string[];
  threads: Array<{
    thread_id: string;
    ok: boolean;
    damage: Array<{ table: string; row: string; problem: string }>;
  }>;
  damaged: string[];
  repaired: { threads: string[]; copy: string } | null;
}

async function check(args: string[], env: NodeJS.ProcessEnv) {
  const run = await runCli(["check", "--json", ...args], env);
  expect(run.stderr).toBe("");
  return { code: run.code, report: JSON.parse(run.stdout) as Report };
}

describe("codehop check on SQLite", () => {
  let made: string;
  beforeAll(async () => {
    made = mkdtempSync(join(tmpdir(), "codehop-check-made-"));
    const persistence = openPersistence(made);
    await twoThreads(world, persistence);
    persistence.close();
  }, 120_000);

  it("exits 0 on a whole database, listing its threads", async () => {
    const { code, report } = await check(["--home", made], world.cliEnv());
    expect(code).toBe(0);
    expect(report).toMatchObject({ ok: true, integrity: [], damaged: [], repaired: null });
    expect(report.threads.map((t) => [t.thread_id, t.ok])).toEqual([
      ["bad", true],
      ["good", true],
    ]);
  });

  it(
    "exits 1 naming every damaged row per thread; --repair moves the thread aside, keeps a copy, and the rest work",
    { timeout: 180_000 },
    async () => {
      const home = damagedHome(made, (db, ns) => {
        db.prepare(
          "UPDATE lgi_checkpoints SET zip = 1, checkpoint = ? WHERE ns_id = ? AND checkpoint_id = ?",
        ).run(deflateBomb(1 << 30), ns, latestCheckpoint(db, ns));
        db.prepare(
          "UPDATE lgi_blobs SET base_version = version WHERE ns_id = ? AND kind IN (1, 4) AND base_version IS NOT NULL",
        ).run(ns);
        db.prepare(
          "UPDATE codehop_call_journal SET outcome_json = 'SECRET{' WHERE rowid = (SELECT min(rowid) FROM codehop_call_journal WHERE thread_id = 'bad')",
        ).run();
      });
      const env = world.cliEnv();
      const db = join(home, "checkpoints.db");
      const found = await check(["--db", db], env);
      expect(found.code).toBe(1);
      expect(found.report).toMatchObject({ ok: false, integrity: [], damaged: ["bad"] });
      const bad = found.report.threads.find((t) => t.thread_id === "bad")!;
      expect(new Set(bad.damage.map((d) => d.table))).toEqual(
        new Set(["lgi_checkpoints", "lgi_blobs", "codehop_call_journal"]),
      );
      expect(bad.damage.find((d) => d.table === "lgi_checkpoints")!.problem).toMatch(
        /inflate past 67108864 bytes/,
      );
      expect(JSON.stringify(found.report)).not.toContain("SECRET");
      expect(found.report.threads.find((t) => t.thread_id === "good")).toMatchObject({ ok: true });

      // The human report: per thread, what is wrong, and the next step.
      const text = await runCli(["check", "--db", db], env);
      expect(text.code).toBe(1);
      expect(text.stdout).toContain("2 threads, 1 whole, 1 damaged");
      expect(text.stdout).toContain('damaged thread "bad":');
      expect(text.stdout).toContain("--repair");

      const repaired = await check(["--db", db, "--repair"], env);
      expect(repaired.code).toBe(0);
      expect(repaired.report.repaired?.threads).toEqual(["bad"]);
      const copy = repaired.report.repaired!.copy;
      expect(existsSync(copy)).toBe(true);
      // The database now holds the good thread only, whole; the copy still has the bad one.
      const after = await check(["--db", db], env);
      expect(after.code).toBe(0);
      expect(after.report.threads.map((t) => t.thread_id)).toEqual(["good"]);
      const kept = await check(["--db", copy], env);
      expect(kept.code).toBe(1);
      expect(kept.report.damaged).toEqual(["bad"]);
      const [threads, show] = await Promise.all([
        runCli(["threads", "--json", "--home", home], env),
        runCli(["show", "good", "--home", home], env),
      ]);
      expect(JSON.parse(threads.stdout).map((t: { thread_id: string }) => t.thread_id)).toEqual([
        "good",
      ]);
      expect(show.code, show.stderr).toBe(0);
    },
  );

  it("a file that is not a database: exit 1 with integrity_check's complaint", async () => {
    const home = damagedHome(made, () => {});
    const { writeFileSync } = await import("node:fs");
    writeFileSync(join(home, "checkpoints.db"), NOT_DEFLATE);
    const { code, report } = await check(["--home", home], world.cliEnv());
    expect(code).toBe(1);
    expect(report.integrity.join(" ")).toMatch(/not a database/);
  });
});

describe.skipIf(postgresMissing)("codehop check on PostgreSQL", () => {
  let url: string;
  beforeAll(async () => {
    url = await cluster().createDatabase("check_threads");
    const persistence = await openPostgresPersistence({ url });
    try {
      await twoThreads(world, persistence);
    } finally {
      await persistence.close();
    }
  }, 120_000);

  it("exit 0, then 1 on a damaged value; --repair moves the thread into public_damaged", async () => {
    const env = world.cliEnv({ CODEHOP_DATABASE_URL: url });
    const whole = await check([], env);
    expect(whole.code).toBe(0);
    expect(whole.report.threads.map((t) => t.thread_id)).toEqual(["bad", "good"]);

    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(`UPDATE linear_steps SET data = $1, zip = 0 WHERE thread_id = 'bad'`, [
        Buffer.from("SECRET{"),
      ]);
      const found = await check([], env);
      expect(found.code).toBe(1);
      expect(found.report.damaged).toEqual(["bad"]);
      expect(found.report.threads[0].damage.every((d) => d.table === "linear_steps")).toBe(true);
      expect(JSON.stringify(found.report)).not.toContain("SECRET");

      const repaired = await check(["--repair"], env);
      expect(repaired.code).toBe(0);
      expect(repaired.report.repaired).toMatchObject({ threads: ["bad"] });
      const after = await check([], env);
      expect(after.code).toBe(0);
      expect(after.report.threads.map((t) => t.thread_id)).toEqual(["good"]);
      const moved = await client.query(
        "SELECT count(*)::int AS n FROM public_damaged.linear_steps WHERE thread_id = 'bad' AND call = 0",
      );
      expect(moved.rows[0].n).toBeGreaterThan(3);
    } finally {
      await client.end();
    }
  });
});
