import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openPersistence, type SqlitePersistence } from "../../src/persistence/index.ts";

// Two processes writing one CODEHOP_HOME (two `codehop ask` runs at once): while another process
// holds the write lock, codehop's checkpoint, task-write and journal writes wait for it (busy
// timeout) and succeed. A deferred transaction that reads before it writes fails at once with
// "database is locked" instead (SQLite never waits when a read transaction upgrades to a write).
const HOLDER = `
const Database = require(process.argv[1]);
const db = new Database(process.argv[2]);
db.pragma("busy_timeout = 5000");
db.exec("CREATE TABLE IF NOT EXISTS other_writer (n INTEGER)");
db.exec("BEGIN IMMEDIATE");
db.prepare("INSERT INTO other_writer VALUES (1)").run();
process.stdout.write("locked\\n");
setTimeout(() => { db.exec("COMMIT"); db.close(); process.stdout.write("committed\\n"); }, 300);
`;

/**
 * Starts a process holding the database's write lock for ~300 ms; resolves once it holds it, with
 * a promise of its commit (wrapped: an async function returning a promise would wait for it).
 */
async function holdWriteLock(file: string): Promise<{ committed: Promise<void> }> {
  const child = spawn(
    process.execPath,
    ["-e", HOLDER, createRequire(import.meta.url).resolve("better-sqlite3"), file],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let out = "";
  const waiters: Array<[string, () => void]> = [];
  child.stdout!.on("data", (d) => {
    out += d;
    for (const [line, resolve] of waiters) if (out.includes(line)) resolve();
  });
  const seen = (line: string) => new Promise<void>((resolve) => waiters.push([line, resolve]));
  const committed = seen("committed");
  await seen("locked");
  return { committed };
}

/** Runs `write` while another process holds the write lock: ms waited, or the error message. */
async function whileLocked(file: string, write: () => unknown): Promise<number | string> {
  const { committed } = await holdWriteLock(file);
  const t0 = performance.now();
  try {
    await write();
    return Math.round(performance.now() - t0);
  } catch (err) {
    return (err as Error).message;
  } finally {
    await committed;
  }
}

let persistence: SqlitePersistence | undefined;
afterEach(() => persistence?.close());

describe("SQLite persistence with another process writing the same file", () => {
  it("checkpoint puts, task writes and journal rows wait for the other writer, then succeed", async () => {
    persistence = openPersistence(mkdtempSync(join(tmpdir(), "codehop-concurrent-")));
    const { checkpointer, journalRows } = persistence;
    const checkpoint = (id: string, n: number) => ({
      v: 4,
      id,
      ts: new Date().toISOString(),
      channel_values: { n },
      channel_versions: { n: n + 0.5 },
      versions_seen: {},
    });
    const meta = (step: number) => ({ source: "loop" as const, step, parents: {} });
    const first = await checkpointer.put(
      { configurable: { thread_id: "t", checkpoint_ns: "" } },
      checkpoint("1f000000-0000-6000-8000-000000000001", 1),
      meta(1),
      { n: 1.5 },
    );
    await checkpointer.getTuple(first);
    const result: Record<string, any> = {
      putWrites: await whileLocked(persistence!.dbPath, () =>
        checkpointer.putWrites(first, [["n", 2]], "task-1"),
      ),
      put: await whileLocked(persistence!.dbPath, () =>
        checkpointer.put(first, checkpoint("1f000000-0000-6000-8000-000000000002", 2), meta(2), {
          n: 2.5,
        }),
      ),
      journal: await whileLocked(persistence!.dbPath, () =>
        journalRows.putRows([
          {
            threadId: "t",
            checkpointNs: "",
            taskEpoch: "0",
            step: 1,
            callIndex: 0,
            tool: "lookup",
            argsJson: "[]",
            outcomeJson: '{"ok":true,"value":1}',
            recordedAt: new Date().toISOString(),
          },
        ]),
      ),
      stored: {
        pendingWrites: (await checkpointer.getTuple(first))?.pendingWrites,
        second: (
          await checkpointer.getTuple({
            configurable: { thread_id: "t", checkpoint_ns: "" },
          })
        )?.checkpoint.channel_values,
        journalRows: journalRows.listRows("t").length,
      },
    };
    for (const write of ["putWrites", "put", "journal"]) {
      expect(typeof result[write], `${write}: ${result[write]}`).toBe("number");
      // It waited for the other process's commit (~300 ms) instead of failing.
      expect(result[write]).toBeGreaterThan(100);
    }
    expect(result.stored).toEqual({
      pendingWrites: [["task-1", "n", 2]],
      second: { n: 2 },
      journalRows: 1,
    });
  });
});
