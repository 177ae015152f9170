import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serverTablesSql, ServerStore } from "../../src/server/store.ts";
import { freshSchema, postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";

// The run event log a stream reads (runs.stream, joinStream, Last-Event-ID): events come back in
// the order they were written, page after page, each once.
const cluster = useTestCluster();

describe.skipIf(postgresMissing)("server store: a run's events", { timeout: 120_000 }, () => {
  let pool: pg.Pool;
  let store: ServerStore;
  beforeAll(async () => {
    pool = new pg.Pool({ connectionString: await cluster().createDatabase("events") });
    const schema = freshSchema("events");
    await pool.query(`CREATE SCHEMA "${schema}"`);
    await pool.query(serverTablesSql(schema));
    store = new ServerStore(pool, schema);
  });
  afterAll(async () => pool?.end());

  it("pages through 1,234 events in write order with no event repeated or skipped", async () => {
    const written: string[] = [];
    for (let batch = 0; batch < 13; batch++) {
      const events = Array.from({ length: batch === 12 ? 34 : 100 }, (_, i) => {
        const n = batch * 100 + i;
        written.push(String(n));
        return { event: n % 7 === 0 ? "values" : "updates", data: JSON.stringify({ n }) };
      });
      await store.appendEvents("run-1", events);
    }
    await store.appendEvents("run-2", [{ event: "values", data: '{"other":true}' }]);
    const read: string[] = [];
    const ids: bigint[] = [];
    let after = "0";
    for (;;) {
      const page = await store.eventsAfter("run-1", after, 500);
      if (!page.length) break;
      for (const e of page) {
        read.push(String(JSON.parse(e.data).n));
        ids.push(BigInt(e.id));
      }
      after = page.at(-1)!.id;
    }
    expect(read).toEqual(written);
    expect(ids.every((id, i) => i === 0 || id > ids[i - 1])).toBe(true);
    // Resuming from an event id in the middle (Last-Event-ID) continues right after it.
    const resumed = await store.eventsAfter("run-1", String(ids[9]), 3);
    expect(resumed.map((e) => JSON.parse(e.data).n)).toEqual([10, 11, 12]);
    const last = await store.lastEvent("run-1", ["values"]);
    expect(JSON.parse(last!.data).n).toBe(1232);
  });
  it("lists a deleted thread for workers to drop, but not once a thread of that id was created again", async () => {
    await store.createThread("gone");
    await store.createThread("reused");
    await store.deleteThreadRows("gone");
    await store.deleteThreadRows("reused");
    const before = await store.threadDeletionsAfter(0);
    expect(before.map((d) => d.threadId)).toEqual(["gone", "reused"]);
    // The client creates "reused" again and attaches files to it: a worker starting now (or
    // catching up on a missed notification) must not drop the new thread's data.
    await store.createThread("reused");
    const after = await store.threadDeletionsAfter(0);
    expect(after.map((d) => d.threadId)).toEqual(["gone"]);
    expect(await store.threadDeletionsAfter(after[0].id)).toEqual([]);
  });
  it("prunes deletion-log entries older than the retention, and only those", async () => {
    await store.createThread("old-gone");
    await store.deleteThreadRows("old-gone");
    await store.createThread("new-gone");
    await store.deleteThreadRows("new-gone");
    await pool.query(
      `UPDATE "${store.schema}".codehop_thread_deletions SET deleted_at = now() - interval '31 days' WHERE thread_id = 'old-gone'`,
    );
    expect(await store.pruneThreadDeletions(30 * 86_400)).toBe(1);
    const left = (await store.threadDeletionsAfter(0)).map((d) => d.threadId);
    expect(left).toContain("new-gone");
    expect(left).not.toContain("old-gone");
  });
});
