/**
 * A task's writes that repeat what earlier steps wrote are stored deflated with those rows as the
 * dictionary: they read back whole through a saver with nothing cached, also after a task's row
 * was written again, and rows stored by earlier versions (format 2: dictionary rows named by key).
 */
import { randomBytes } from "node:crypto";
import { crc32, deflateRawSync, inflateRawSync } from "node:zlib";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { emptyCheckpoint } from "@langchain/langgraph-checkpoint";
import { expect, it } from "vitest";
import { IncrementalSqliteSaver } from "../src/index.ts";

const text = (i: number) =>
  `observation ${i}: ${"the quick brown fox jumps over the lazy dog ".repeat(40)}`;

it("stores repeated text against earlier rows and reads every write back", async () => {
  const path = join(mkdtempSync(join(tmpdir(), "codehop-lgi-dict-")), "c.db");
  const saver = IncrementalSqliteSaver.fromConnString(path);
  const thread = { thread_id: "t", checkpoint_ns: "" };
  let parent: string | undefined;
  for (let i = 1; i <= 6; i++) {
    const id = `c${i}`;
    await saver.put(
      { configurable: { ...thread, ...(parent ? { checkpoint_id: parent } : {}) } },
      { ...emptyCheckpoint(), id, channel_values: {}, channel_versions: {} },
      { source: "loop", step: i, parents: {} } as any,
      {},
    );
    // Each step writes the previous step's text again (as a record would), then its own.
    await saver.putWrites(
      { configurable: { ...thread, checkpoint_id: id } },
      [
        ["record", { seen: text(i - 1), note: `step ${i}` }],
        ["output", text(i)],
      ],
      `task-${i}`,
    );
    parent = id;
  }
  // The last step's task is written again with one more write (a re-run task keeps its first
  // writes and adds the new index).
  await saver.putWrites(
    { configurable: { ...thread, checkpoint_id: "c6" } },
    [
      ["record", "ignored"],
      ["output", "ignored"],
      ["extra", 1],
    ],
    "task-6",
  );
  const zips = saver.db
    .prepare("SELECT zip, count(*) AS n FROM lgi_writes GROUP BY zip")
    .all() as Array<{ zip: number; n: number }>;
  // Format 3: the dictionary rows named by rowid in a header of a few bytes.
  expect(zips.find((z) => z.zip === 3)?.n ?? 0).toBeGreaterThan(0);
  saver.db.close();

  const fresh = IncrementalSqliteSaver.fromConnString(path);
  for (let i = 1; i <= 6; i++) {
    const tuple = await fresh.getTuple({ configurable: { ...thread, checkpoint_id: `c${i}` } });
    const writes = Object.fromEntries((tuple?.pendingWrites ?? []).map(([, c, v]) => [c, v]));
    expect(writes.record).toEqual({ seen: text(i - 1), note: `step ${i}` });
    expect(writes.output).toBe(text(i));
    if (i === 6) expect(writes.extra).toBe(1);
  }
  fresh.db.close();
});

it("after a batch that did not commit, later writes are never stored against its rows", async () => {
  // Text that deflates poorly on its own: only a dictionary holding it makes a repeat small.
  const noise = (i: number) => randomBytes(1500).toString("base64") + i;
  const texts = [0, 1, 2, 3].map(noise);
  const path = join(mkdtempSync(join(tmpdir(), "codehop-lgi-dict-")), "c.db");
  const saver = IncrementalSqliteSaver.fromConnString(path);
  const thread = { thread_id: "t", checkpoint_ns: "" };
  // put and putWrites of a step go into one batch (neither awaited before the other is queued).
  const step = (i: number, parent?: string) => {
    const id = `c${i}`;
    const put = saver.put(
      { configurable: { ...thread, ...(parent ? { checkpoint_id: parent } : {}) } },
      { ...emptyCheckpoint(), id, channel_values: {}, channel_versions: {} },
      { source: "loop", step: i, parents: {} } as any,
      {},
    );
    const writes = saver.putWrites(
      { configurable: { ...thread, checkpoint_id: id } },
      [["output", texts[i]]],
      `task-${i}`,
    );
    return Promise.all([put, writes]);
  };
  await step(1);
  // Step 2's batch fails as a full disk would: rolled back whole.
  saver.db.exec(`CREATE TABLE fail_writes (on_ INTEGER);
    INSERT INTO fail_writes VALUES (1);
    CREATE TRIGGER fail_writes BEFORE INSERT ON lgi_writes WHEN (SELECT on_ FROM fail_writes)
    BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;`);
  await expect(step(2, "c1")).rejects.toThrow(/disk is full/);
  saver.db.exec("UPDATE fail_writes SET on_ = 0");
  // Step 3 repeats step 2's text: the rolled-back row was the best dictionary for it.
  await saver.put(
    { configurable: { ...thread, checkpoint_id: "c1" } },
    { ...emptyCheckpoint(), id: "c3", channel_values: {}, channel_versions: {} },
    { source: "loop", step: 3, parents: {} } as any,
    {},
  );
  await saver.putWrites(
    { configurable: { ...thread, checkpoint_id: "c3" } },
    [["output", texts[2] + texts[3]]],
    "task-3",
  );
  saver.db.close();

  const fresh = IncrementalSqliteSaver.fromConnString(path);
  const tuple = await fresh.getTuple({ configurable: { ...thread, checkpoint_id: "c3" } });
  expect(tuple?.pendingWrites?.map(([, c, v]) => [c, v])).toEqual([
    ["output", texts[2] + texts[3]],
  ]);
  fresh.db.close();
});

/** One step: a checkpoint and its task's writes (awaited). */
async function step(saver: IncrementalSqliteSaver, i: number, writes: Array<[string, unknown]>) {
  const thread = { thread_id: "t", checkpoint_ns: "" };
  await saver.put(
    { configurable: { ...thread, ...(i > 1 ? { checkpoint_id: `c${i - 1}` } : {}) } },
    { ...emptyCheckpoint(), id: `c${i}`, channel_values: {}, channel_versions: {} },
    { source: "loop", step: i, parents: {} } as any,
    {},
  );
  await saver.putWrites(
    { configurable: { ...thread, checkpoint_id: `c${i}` } },
    writes,
    `task-${i}`,
  );
}

async function readWrites(path: string, i: number) {
  const fresh = IncrementalSqliteSaver.fromConnString(path);
  const tuple = await fresh.getTuple({
    configurable: { thread_id: "t", checkpoint_ns: "", checkpoint_id: `c${i}` },
  });
  fresh.db.close();
  return Object.fromEntries((tuple?.pendingWrites ?? []).map(([, c, v]) => [c, v]));
}

it("a row that served as a dictionary and gets more writes later leaves the rows after it readable", async () => {
  const noise = randomBytes(1500).toString("base64");
  const path = join(mkdtempSync(join(tmpdir(), "codehop-lgi-dict-")), "c.db");
  const saver = IncrementalSqliteSaver.fromConnString(path);
  await step(saver, 1, [["output", noise]]);
  await step(saver, 2, [["output", `${noise}!`]]);
  const zip = () =>
    (
      saver.db
        .prepare("SELECT zip FROM lgi_writes WHERE checkpoint_id = 'c2' AND task_id = 'task-2'")
        .get() as { zip: number }
    ).zip;
  expect(zip()).toBe(3); // stored against step 1's row
  // Step 1's task writes again, one write more (a re-run task keeps its first writes and adds
  // the new index): its row's bytes change.
  await saver.putWrites(
    { configurable: { thread_id: "t", checkpoint_ns: "", checkpoint_id: "c1" } },
    [
      ["output", "ignored"],
      ["more", "after"],
    ],
    "task-1",
  );
  expect(zip()).not.toBe(3); // re-stored without the dictionary that changed
  saver.db.close();
  expect(await readWrites(path, 1)).toEqual({ output: noise, more: "after" });
  expect(await readWrites(path, 2)).toEqual({ output: `${noise}!` });
});

it("a task row stored with no writes, which served as a dictionary, gets writes later: the rows after it stay readable", async () => {
  const noise = randomBytes(1500).toString("base64");
  const path = join(mkdtempSync(join(tmpdir(), "codehop-lgi-dict-")), "c.db");
  const saver = IncrementalSqliteSaver.fromConnString(path);
  await step(saver, 1, [["output", noise]]);
  // A task whose writes all went to untracked channels: LangGraph stores its (empty) writes.
  await step(saver, 2, []);
  await step(saver, 3, [["output", noise]]);
  // Step 2's task gets a write after all: its row's bytes change.
  await saver.putWrites(
    { configurable: { thread_id: "t", checkpoint_ns: "", checkpoint_id: "c2" } },
    [["late", "x"]],
    "task-2",
  );
  saver.db.close();
  expect(await readWrites(path, 3)).toEqual({ output: noise });
  expect(await readWrites(path, 2)).toEqual({ late: "x" });
  expect(await readWrites(path, 1)).toEqual({ output: noise });
});

it("a saver whose cached rows another connection deleted and whose row ids it reused reads the new rows", async () => {
  const path = join(mkdtempSync(join(tmpdir(), "codehop-lgi-dict-")), "c.db");
  const a = IncrementalSqliteSaver.fromConnString(path);
  const b = IncrementalSqliteSaver.fromConnString(path);
  const writeThread = async (saver: IncrementalSqliteSaver, thread: string, noise: string) => {
    for (let i = 1; i <= 3; i++) {
      const ns = { thread_id: thread, checkpoint_ns: "" };
      const id = `${thread}-c${i}`;
      await saver.put(
        { configurable: { ...ns, ...(i > 1 ? { checkpoint_id: `${thread}-c${i - 1}` } : {}) } },
        { ...emptyCheckpoint(), id, channel_values: {}, channel_versions: {} },
        { source: "loop", step: i, parents: {} } as any,
        {},
      );
      await saver.putWrites(
        { configurable: { ...ns, checkpoint_id: id } },
        [["output", `${noise}${i}`]],
        `task-${i}`,
      );
    }
  };
  const writesOf = async (saver: IncrementalSqliteSaver, thread: string) =>
    (
      await saver.getTuple({
        configurable: { thread_id: thread, checkpoint_ns: "", checkpoint_id: `${thread}-c3` },
      })
    )?.pendingWrites?.map(([, , v]) => v);
  const first = randomBytes(1500).toString("base64");
  await writeThread(a, "t1", first);
  expect(await writesOf(a, "t1")).toEqual([`${first}3`]); // a caches t1's rows
  await b.deleteThread("t1");
  const second = randomBytes(1500).toString("base64");
  await writeThread(b, "t2", second);
  const zip3 = b.db.prepare("SELECT count(*) AS n FROM lgi_writes WHERE zip = 3").get() as {
    n: number;
  };
  expect(zip3.n).toBeGreaterThan(0);
  expect(await writesOf(a, "t2")).toEqual([`${second}3`]);
  a.db.close();
  b.db.close();
});

it("reads writes rows stored against a dictionary named by key (format 2, earlier versions)", async () => {
  const noise = randomBytes(1500).toString("base64");
  const path = join(mkdtempSync(join(tmpdir(), "codehop-lgi-dict-")), "c.db");
  const saver = IncrementalSqliteSaver.fromConnString(path);
  await step(saver, 1, [["output", noise]]);
  await step(saver, 2, [["output", "small"]]);
  // Step 2's row as the earlier version stored it: a JSON header naming step 1's row by its
  // checkpoint and task, then its bytes deflated with step 1's raw bytes as the dictionary.
  const row = (i: number) =>
    saver.db.prepare(`SELECT zip, writes FROM lgi_writes WHERE checkpoint_id = 'c${i}'`).get() as {
      zip: number;
      writes: Buffer;
    };
  const first = row(1);
  const firstRaw = first.zip ? inflateRawSync(first.writes) : first.writes;
  const packed = Buffer.concat([
    Buffer.from([1, 0, 0, 0]),
    Buffer.alloc(16),
    Buffer.from("output"),
    Buffer.from("json"),
    Buffer.from(JSON.stringify(`${noise}?`)),
  ]);
  packed.writeInt32LE(0, 4);
  packed.writeUInt32LE(6, 8);
  packed.writeUInt32LE(4, 12);
  packed.writeUInt32LE(JSON.stringify(`${noise}?`).length, 16);
  const header = Buffer.from(
    JSON.stringify({ rows: [["c1", "task-1"]], crc: crc32(firstRaw) }),
    "utf8",
  );
  const length = Buffer.alloc(4);
  length.writeUInt32LE(header.length);
  const data = Buffer.concat([length, header, deflateRawSync(packed, { dictionary: firstRaw })]);
  expect(data.length).toBeLessThan(packed.length / 2);
  saver.db
    .prepare("UPDATE lgi_writes SET zip = 2, writes = ? WHERE checkpoint_id = 'c2'")
    .run(data);
  saver.db.close();
  expect(await readWrites(path, 2)).toEqual({ output: `${noise}?` });
  expect(await readWrites(path, 1)).toEqual({ output: noise });
});

it("gives a writes table of earlier versions its row ids; rows stay readable after VACUUM", async () => {
  const noise = randomBytes(1500).toString("base64");
  const path = join(mkdtempSync(join(tmpdir(), "codehop-lgi-dict-")), "c.db");
  const saver = IncrementalSqliteSaver.fromConnString(path);
  await step(saver, 1, [["output", noise]]);
  // The table as earlier versions created it: no row id column (rowids VACUUM may renumber).
  saver.db.exec(`
    ALTER TABLE lgi_writes RENAME TO w_now;
    CREATE TABLE lgi_writes (ns_id INTEGER NOT NULL, checkpoint_id TEXT NOT NULL,
      task_id TEXT NOT NULL, task_path TEXT NOT NULL DEFAULT '', zip INTEGER NOT NULL,
      writes BLOB NOT NULL, PRIMARY KEY (ns_id, checkpoint_id, task_id));
    INSERT INTO lgi_writes SELECT ns_id, checkpoint_id, task_id, task_path, zip, writes FROM w_now;
    DROP TABLE w_now;`);
  saver.db.close();

  const reopened = IncrementalSqliteSaver.fromConnString(path);
  reopened.setup();
  const columns = (reopened.db.prepare("PRAGMA table_info(lgi_writes)").all() as any[]).map(
    (c) => c.name,
  );
  expect(columns).toContain("row_id");
  const other = randomBytes(1500).toString("base64");
  await step(reopened, 2, [["output", other]]);
  await step(reopened, 3, [["output", `${other}!`]]);
  expect(
    (
      reopened.db.prepare("SELECT zip FROM lgi_writes WHERE checkpoint_id = 'c3'").get() as {
        zip: number;
      }
    ).zip,
  ).toBe(3); // stored against step 2's row
  // Deleting the row before them and vacuuming renumbers plain rowids (not a row id column).
  reopened.db.exec("DELETE FROM lgi_writes WHERE checkpoint_id = 'c1'; VACUUM;");
  reopened.db.close();
  expect(await readWrites(path, 2)).toEqual({ output: other });
  expect(await readWrites(path, 3)).toEqual({ output: `${other}!` });
});
