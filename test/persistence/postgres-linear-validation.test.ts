import pg from "pg";
import * as vitest from "vitest";
import { LinearPostgresSaver } from "../../src/persistence/index.ts";
import { checkpointValidation } from "../../packages/checkpoint-sqlite/test/validation-suite.ts";
import { freshSchema, postgresMissing, useTestCluster } from "./postgres-cluster.ts";

// LangGraph's own conformance suite for checkpointers against the Postgres adapter's linear saver,
// each checkpointer in a schema of its own on one throwaway cluster.
const cluster = useTestCluster();

if (postgresMissing) {
  vitest.describe.skip("LinearPostgresSaver (LangGraph checkpoint validation)", () => {
    vitest.it("needs PostgreSQL", () => {});
  });
} else {
  const validate = await checkpointValidation();
  const pools = new Map<LinearPostgresSaver, { pool: pg.Pool; schema: string }>();
  validate({
    checkpointerName: "codehop LinearPostgresSaver",
    async createCheckpointer() {
      const pool = new pg.Pool({ connectionString: cluster().url, max: 4 });
      const schema = freshSchema("lin");
      const saver = new LinearPostgresSaver(pool, schema);
      await saver.setup();
      pools.set(saver, { pool, schema });
      return saver;
    },
    async destroyCheckpointer(saver) {
      const { pool, schema } = pools.get(saver)!;
      await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
      await pool.end();
      pools.delete(saver);
    },
  });
}
