/**
 * A damaged (or crafted) checkpoint database, through what users run: `codehop show`, `history`,
 * `resume` and `threads`, and the library API. A corrupt thread fails with
 * CODEHOP_CHECKPOINT_CORRUPT naming the thread, table and row — no stack trace, no stored bytes —
 * in bounded time, while `threads` still lists every thread and the other threads read as before.
 * The same on PostgreSQL.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import { qaApp } from "../../src/apps/qa/app.ts";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import { openPersistence, openPostgresPersistence } from "../../src/persistence/index.ts";
import { threadHistory } from "../../src/runs/inspect.ts";
import { NOT_DEFLATE, deflateBomb } from "../../packages/checkpoint-sqlite/test/crafted.ts";
import { runCli } from "../app/cli-helpers.ts";
import { useDemoWorld } from "../app/fixtures.ts";
import { damagedHome, latestCheckpoint, twoThreads } from "./damaged.ts";
import { postgresMissing, useTestCluster } from "./postgres-cluster.ts";

/**
 * CPU milliseconds of this process's finished, reaped children (and theirs), from /proc (Linux;
 * null elsewhere): what the CLI processes a test ran cost, whatever the machine's load.
 */
function childrenCpuMs(): number | null {
  if (!existsSync("/proc/self/stat")) return null;
  const stat = readFileSync("/proc/self/stat", "utf8");
  // Fields after the ")" that ends the command name: state is field 3, cutime 16, cstime 17.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[13]) + Number(fields[14])) * 1000) / CLOCK_TICKS;
}
/** Linux's USER_HZ, the unit of /proc's CPU times. */
const CLOCK_TICKS = 100;

const world = useDemoWorld("codehop-corrupt-");
const cluster = useTestCluster();
let made: string;

/** What a corrupt thread's command prints: the message with its code, nothing of a stack. */
function expectCorruptOutput(run: { code: number | null; stderr: string }, table: string) {
  expect(run.code, run.stderr).not.toBe(0);
  expect(run.stderr).toMatch(
    new RegExp(
      `Corrupt checkpoint data of thread "bad": table ${table}, row .+\\[CODEHOP_CHECKPOINT_CORRUPT\\]`,
    ),
  );
  expect(run.stderr).not.toMatch(/^\s+at /m);
  expect(run.stderr).not.toContain("SECRET");
}

async function expectCorrupt(promise: Promise<unknown>, table: string) {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(CodehopError.isInstance(err), String(err)).toBe(true);
  const e = err as CodehopError & { thread?: string; table?: string };
  expect(e.code).toBe(ErrorCodes.CHECKPOINT_CORRUPT);
  expect(e.thread).toBe("bad");
  expect(e.table).toBe(table);
  expect(e.message).not.toContain("SECRET");
}

describe("a corrupt SQLite checkpoint database", () => {
  beforeAll(async () => {
    made = mkdtempSync(join(tmpdir(), "codehop-corrupt-made-"));
    const persistence = openPersistence(made);
    await twoThreads(world, persistence);
    persistence.close();
  }, 120_000);

  it(
    "show, history and resume of the corrupt thread fail with CODEHOP_CHECKPOINT_CORRUPT; threads and the good thread work",
    { timeout: 180_000 },
    async () => {
      const home = damagedHome(made, (db, ns) =>
        db
          .prepare(
            "UPDATE lgi_checkpoints SET zip = 1, checkpoint = ? WHERE ns_id = ? AND checkpoint_id = ?",
          )
          .run(deflateBomb(1 << 30), ns, latestCheckpoint(db, ns)),
      );
      const env = world.cliEnv({ CODEHOP_HOME: home });
      const started = childrenCpuMs();
      const [show, history, resume, threads, good] = await Promise.all([
        runCli(["show", "bad"], env),
        runCli(["history", "bad"], env),
        runCli(["resume", "bad", "--corpus", world.corpus], env),
        runCli(["threads", "--json"], env),
        runCli(["show", "good"], env),
      ]);
      // Five CLI processes (~10 CPU-s); a bomb read unbounded took 40 s and GBs in each of three.
      // CPU, not wall time: a loaded machine slows them, it does not make them do more work.
      if (started !== null) expect(childrenCpuMs()! - started).toBeLessThan(60_000);
      for (const run of [show, history, resume]) expectCorruptOutput(run, "lgi_checkpoints");
      expect(threads.code, threads.stderr).toBe(0);
      expect(
        JSON.parse(threads.stdout)
          .map((t: { thread_id: string }) => t.thread_id)
          .sort(),
      ).toEqual(["bad", "good"]);
      expect(good.code, good.stderr).toBe(0);
      expect(good.stdout).toContain("✓ manager: How many years");
      // --json: the error as JSON on stdout too.
      const json = await runCli(["history", "bad", "--json"], env);
      expect(json.code).not.toBe(0);
      if (json.stdout.trim())
        expect(JSON.parse(json.stdout).error.code).toBe("CODEHOP_CHECKPOINT_CORRUPT");
    },
  );

  it("the library API: a blob chain that loops, garbage deflate data, a fake dictionary", async () => {
    const cases: Array<[string, (db: Database.Database, ns: number) => void]> = [
      [
        "lgi_blobs",
        (db, ns) =>
          db
            .prepare(
              "UPDATE lgi_blobs SET base_version = version, chain = 1000000000 WHERE ns_id = ? AND kind IN (1, 4) AND base_version IS NOT NULL",
            )
            .run(ns),
      ],
      [
        "lgi_checkpoints",
        (db, ns) =>
          db
            .prepare("UPDATE lgi_checkpoints SET zip = 1, checkpoint = ? WHERE ns_id = ?")
            .run(NOT_DEFLATE, ns),
      ],
      [
        "lgi_writes",
        (db, ns) => {
          const header = Buffer.alloc(11);
          header.writeUInt8(1, 0);
          header.writeUIntLE(987_654, 1, 6);
          db.prepare("UPDATE lgi_writes SET zip = 3, writes = ? WHERE ns_id = ?").run(
            Buffer.concat([header, NOT_DEFLATE]),
            ns,
          );
        },
      ],
    ];
    for (const [table, damage] of cases) {
      const home = damagedHome(made, damage);
      const persistence = openPersistence(home);
      try {
        await expectCorrupt(threadHistory(qaApp, "bad", { config: { home }, persistence }), table);
        const good = await threadHistory(qaApp, "good", { config: { home }, persistence });
        expect(good.length).toBeGreaterThan(3);
      } finally {
        persistence.close();
      }
    }
  });

  it("a call-journal row that is not JSON, or a deflate bomb, names its row", async () => {
    for (const value of ["SECRET{not json", deflateBomb(1 << 30)]) {
      const home = damagedHome(made, (db) =>
        db
          .prepare("UPDATE codehop_call_journal SET outcome_json = ? WHERE thread_id = 'bad'")
          .run(value),
      );
      const persistence = openPersistence(home);
      try {
        await expectCorrupt(persistence.journal.entries("bad"), "codehop_call_journal");
        expect((await persistence.journal.entries("good")).length).toBeGreaterThan(0);
      } finally {
        persistence.close();
      }
    }
  });
});

describe.skipIf(postgresMissing)("a corrupt PostgreSQL checkpoint database", () => {
  // A database of its own: the CLI takes CODEHOP_DATABASE_URL's default schema.
  let url: string;
  const schema = "public";

  beforeAll(async () => {
    url = await cluster().createDatabase("corrupt_threads");
    const persistence = await openPostgresPersistence({ url });
    try {
      await twoThreads(world, persistence);
    } finally {
      await persistence.close();
    }
    // The bad thread's stored values and writes replaced by bytes no serializer reads.
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(
        `UPDATE "${schema}".linear_steps SET data = $1, zip = 0 WHERE thread_id = 'bad'`,
        [Buffer.from("SECRET{not json")],
      );
      await client.query(
        `UPDATE "${schema}".codehop_call_journal SET outcome_json = 'SECRET{' WHERE thread_id = 'bad'`,
      );
    } finally {
      await client.end();
    }
  }, 120_000);

  it("the API: CODEHOP_CHECKPOINT_CORRUPT for the bad thread (linear_steps, journal); the good one reads", async () => {
    const persistence = await openPostgresPersistence({ url });
    try {
      await expectCorrupt(
        persistence.checkpointer.getTuple({ configurable: { thread_id: "bad" } }),
        "linear_steps",
      );
      await expectCorrupt(
        threadHistory(qaApp, "bad", { config: { home: world.home }, persistence }),
        "linear_steps",
      );
      await expectCorrupt(persistence.journal.entries("bad"), "codehop_call_journal");
      const good = await persistence.checkpointer.getTuple({ configurable: { thread_id: "good" } });
      expect(good?.checkpoint.channel_values).toMatchObject({ status: expect.any(String) });
      expect((await persistence.threads.list()).map((t) => t.threadId).sort()).toEqual([
        "bad",
        "good",
      ]);
    } finally {
      await persistence.close();
    }
  });

  it("the CLI with CODEHOP_DATABASE_URL: show and history fail naming the row; threads lists both", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-corrupt-pg-home-"));
    mkdirSync(home, { recursive: true });
    const env = world.cliEnv({ CODEHOP_HOME: home, CODEHOP_DATABASE_URL: url });
    const [show, history, threads] = await Promise.all([
      runCli(["show", "bad"], env),
      runCli(["history", "bad"], env),
      runCli(["threads", "--json"], env),
    ]);
    for (const run of [show, history]) expectCorruptOutput(run, "linear_steps");
    expect(threads.code, threads.stderr).toBe(0);
    expect(threads.stdout).toContain('"bad"');
    expect(threads.stdout).toContain('"good"');
  });
});
