import pg from "pg";
import * as vitest from "vitest";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { checkpointValidation } from "../../packages/checkpoint-sqlite/test/validation-suite.ts";
import { freshSchema, postgresMissing, useTestCluster } from "./postgres-cluster.ts";

/** A Postgres saver of the adapter, made over a pool in a schema of its own (not yet set up). */
type MakeSaver<S> = (pool: pg.Pool, schema: string) => S;

/**
 * LangGraph's own conformance suite for checkpointers against one of the Postgres adapter's savers
 * (`name`), each checkpointer in a fresh schema (named from `schemaPrefix`) of one throwaway
 * cluster; without PostgreSQL, a skipped suite saying so.
 */
export async function validatePostgresSaver<
  S extends BaseCheckpointSaver & { setup(): Promise<void> },
>(name: string, schemaPrefix: string, make: MakeSaver<S>): Promise<void> {
  const cluster = useTestCluster();
  if (postgresMissing) {
    vitest.describe.skip(`${name} (LangGraph checkpoint validation)`, () => {
      vitest.it("needs PostgreSQL", () => {});
    });
    return;
  }
  const validate = await checkpointValidation();
  const pools = new Map<S, { pool: pg.Pool; schema: string }>();
  validate({
    checkpointerName: `codehop ${name}`,
    async createCheckpointer() {
      const pool = new pg.Pool({ connectionString: cluster().url, max: 4 });
      const schema = freshSchema(schemaPrefix);
      const saver = make(pool, schema);
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
