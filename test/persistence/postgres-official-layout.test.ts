import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { openPostgresPersistence } from "../../src/persistence/index.ts";
import { freshSchema, postgresMissing, useTestCluster } from "./postgres-cluster.ts";

// A schema codehop serve wrote before issue 23 (the official PostgresSaver's layout), opened by
// the Postgres adapter of now: its threads read, count and delete (the saver's own tests, in
// packages/checkpoint-postgres, cover reading and continuing them in detail).

const cluster = useTestCluster();

describe.skipIf(postgresMissing)("the Postgres adapter on an official-layout schema", () => {
  it("reads its threads, counts their checkpoints and deletes them", async () => {
    const schema = freshSchema("old");
    const pool = new pg.Pool({ connectionString: cluster().url, max: 2 });
    try {
      const official = new PostgresSaver(pool, undefined, { schema });
      await official.setup();
      const State = Annotation.Root({
        n: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
      });
      const graph = new StateGraph(State)
        .addNode("step", (s) => ({ n: s.n + 1 }))
        .addEdge(START, "step")
        .addConditionalEdges("step", (s) => (s.n >= 3 ? END : "step"))
        .compile({ checkpointer: official });
      await graph.invoke({}, { configurable: { thread_id: "old" } });

      const p = await openPostgresPersistence({ url: cluster().url, schema });
      try {
        const latest = await p.checkpointer.getTuple({ configurable: { thread_id: "old" } });
        expect(latest?.checkpoint.channel_values).toMatchObject({ n: 3 });
        // The input checkpoint, the loop's first and one per step.
        expect((await p.checkpointer.rootCheckpointCounts("old")).get("old")).toBe(5);
        await p.deleteThread("old");
        expect(
          await p.checkpointer.getTuple({ configurable: { thread_id: "old" } }),
        ).toBeUndefined();
        expect(await official.getTuple({ configurable: { thread_id: "old" } })).toBeUndefined();
      } finally {
        await p.close();
      }
    } finally {
      await pool.end();
    }
  });
});
