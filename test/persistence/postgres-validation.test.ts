import pg from "pg";
import * as vitest from "vitest";
import { CodehopPostgresSaver } from "../../src/persistence/index.ts";
import { checkpointValidation } from "../../packages/checkpoint-sqlite/test/validation-suite.ts";
import { freshSchema, postgresMissing, useTestCluster } from "./postgres-cluster.ts";

// LangGraph's own conformance suite for checkpointers against the Postgres adapter's saver, each
// checkpointer in a schema of its own on one throwaway cluster.
const cluster = useTestCluster();

if (postgresMissing) {
  vitest.describe.skip("CodehopPostgresSaver (LangGraph checkpoint validation)", () => {
    vitest.it("needs PostgreSQL", () => {});
  });
} else {
  const validate = await checkpointValidation();
  const pools = new Map<CodehopPostgresSaver, { pool: pg.Pool; schema: string }>();
  validate({
    checkpointerName: "codehop CodehopPostgresSaver",
    async createCheckpointer() {
      const pool = new pg.Pool({ connectionString: cluster().url, max: 4 });
      const schema = freshSchema("lgv");
      const saver = new CodehopPostgresSaver(pool, schema);
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
