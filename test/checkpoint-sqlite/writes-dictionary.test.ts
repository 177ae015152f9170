/**
 * A task's writes that repeat what earlier steps wrote are stored deflated with those rows as the
 * dictionary: they read back whole through a saver with nothing cached, also after a task's row
 * was written again.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { emptyCheckpoint } from "@langchain/langgraph-checkpoint";
import { expect, it } from "vitest";
import { IncrementalSqliteSaver } from "../../src/checkpoint-sqlite/index.ts";

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
  expect(zips.find((z) => z.zip === 2)?.n ?? 0).toBeGreaterThan(0);
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
