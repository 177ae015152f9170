/**
 * IncrementalSqliteSaver writes what puts and putWrites queue in one transaction on the next turn
 * of the event loop: a promise resolves only once its rows are committed (another connection sees
 * them), and a read in between sees everything put before it.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { emptyCheckpoint } from "@langchain/langgraph-checkpoint";
import Database from "better-sqlite3";
import { expect, it } from "vitest";
import { IncrementalSqliteSaver } from "../src/index.ts";

function checkpoint(id: string, value: string) {
  return {
    ...emptyCheckpoint(),
    id,
    channel_values: { text: value },
    channel_versions: { text: Number(id.slice(-1)) },
  };
}

it("commits queued puts and writes together, before resolving; reads see what was put before them", async () => {
  const path = join(mkdtempSync(join(tmpdir(), "codehop-lgi-batch-")), "cp.db");
  const saver = IncrementalSqliteSaver.fromConnString(path);
  saver.setup();
  const other = new Database(path, { readonly: true });
  const committed = () =>
    (other.prepare("SELECT count(*) AS n FROM lgi_checkpoints").get() as { n: number }).n;
  try {
    const config = { configurable: { thread_id: "t", checkpoint_ns: "" } };
    const first = saver.put(
      config,
      checkpoint("c1", "one"),
      { source: "loop", step: 0, parents: {} } as any,
      { text: 1 },
    );
    const second = saver.put(
      { configurable: { ...config.configurable, checkpoint_id: "c1" } },
      checkpoint("c2", "two"),
      { source: "loop", step: 1, parents: {} } as any,
      { text: 2 },
    );
    const writes = saver.putWrites(
      { configurable: { ...config.configurable, checkpoint_id: "c2" } },
      [["text", "three"]],
      "task-1",
    );
    // Nothing is committed yet: the rows wait for the next turn of the event loop.
    await Promise.resolve();
    expect(committed()).toBe(0);
    await Promise.all([first, second, writes]);
    expect(committed()).toBe(2);

    // A read while a put's rows wait for their turn writes them first, and sees them.
    void saver.put(
      { configurable: { ...config.configurable, checkpoint_id: "c2" } },
      checkpoint("c3", "four"),
      { source: "loop", step: 2, parents: {} } as any,
      { text: 3 },
    );
    // (put serializes its values first, over a few microtasks; then its rows wait in the queue)
    for (let i = 0; i < 50; i++) await Promise.resolve();
    expect(committed()).toBe(2);
    const latest = await saver.getTuple(config);
    expect(latest?.checkpoint.id).toBe("c3");
    expect(latest?.checkpoint.channel_values.text).toBe("four");
    const atTwo = await saver.getTuple({
      configurable: { ...config.configurable, checkpoint_id: "c2" },
    });
    expect(atTwo?.pendingWrites).toEqual([["task-1", "text", "three"]]);
    expect(committed()).toBe(3);
  } finally {
    other.close();
    saver.db.close();
  }
});

it("writes the queue at once when many rows wait, so a run that never yields to the event loop still commits as it goes", async () => {
  const path = join(mkdtempSync(join(tmpdir(), "codehop-lgi-batch-")), "cp.db");
  const saver = IncrementalSqliteSaver.fromConnString(path);
  saver.setup();
  const other = new Database(path, { readonly: true });
  const committedWrites = () =>
    (other.prepare("SELECT count(*) AS n FROM lgi_writes").get() as { n: number }).n;
  try {
    const config = { configurable: { thread_id: "t", checkpoint_ns: "" } };
    await saver.put(
      config,
      checkpoint("c1", "one"),
      { source: "loop", step: 0, parents: {} } as any,
      { text: 1 },
    );
    const at = { configurable: { ...config.configurable, checkpoint_id: "c1" } };
    const all: Promise<void>[] = [];
    // Microtasks only: the event loop never gets its next turn while these are queued.
    for (let i = 0; i < 70; i++) {
      all.push(saver.putWrites(at, [["text", `w${i}`]], `task-${i}`));
      await Promise.resolve();
    }
    for (let i = 0; i < 50; i++) await Promise.resolve();
    // At most 31 rows wait for the next turn (a full batch of 32 is written at once).
    expect(committedWrites()).toBeGreaterThanOrEqual(70 - 31);
    await Promise.all(all);
    expect(committedWrites()).toBe(70);
  } finally {
    other.close();
    saver.db.close();
  }
});
