import { describe, expect, it } from "vitest";
import { openQueue, RUNS_QUEUE, workEagerly } from "../../src/server/queue.ts";
import { freshSchema, postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";

// The run queue's pollers on a real PostgreSQL (pg-boss): a backlog is worked through without the
// NOTIFY backstop pause after each job (issue 23: 50 runs submitted at once waited 5 s between
// runs on each poller), and a poller that found the queue empty still wakes on a new job.

const cluster = useTestCluster();

describe.skipIf(postgresMissing)("workEagerly", () => {
  it("works a backlog one job after another without sleeping the backstop interval between jobs; a job sent later wakes the idle poller", async () => {
    const url = await cluster().createDatabase("queue_eager");
    // Lease 100 s: the backstop poll is 20 s, so a poller sleeping it between jobs could not
    // finish 4 jobs within the 15 s this test waits.
    const boss = await openQueue({ url, schema: freshSchema("q"), leaseSeconds: 100 });
    try {
      const done: number[] = [];
      let wake: () => void = () => {};
      const waitFor = (n: number) =>
        new Promise<void>((resolve, reject) => {
          const timer = setTimeout(
            () => reject(new Error(`${done.length} of ${n} jobs done`)),
            15_000,
          );
          wake = () => {
            if (done.length >= n) {
              clearTimeout(timer);
              resolve();
            }
          };
          wake();
        });
      // Queued before any poller runs: no NOTIFY reaches a poller for the jobs after the first.
      for (let i = 0; i < 4; i++)
        await boss.send(RUNS_QUEUE, { runId: `r${i}` }, { singletonKey: `thread-${i}` });
      await workEagerly<{ runId: string }>(
        boss,
        RUNS_QUEUE,
        1,
        { pollSeconds: 20 },
        async (job) => {
          done.push(Number(job.data.runId.slice(1)));
          wake();
        },
      );
      await waitFor(4);
      expect([...done].sort()).toEqual([0, 1, 2, 3]);
      // The poller now sleeps on an empty queue: a new job's NOTIFY wakes it.
      await boss.send(RUNS_QUEUE, { runId: "r4" }, { singletonKey: "thread-4" });
      await waitFor(5);
      expect(done).toContain(4);
    } finally {
      await boss.stop({ graceful: false });
    }
  }, 60_000);
});
