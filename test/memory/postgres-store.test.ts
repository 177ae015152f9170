import { describe } from "vitest";
import { openPostgresMemoryStore } from "../../src/memory/postgres-store.ts";
import { freshSchema, postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";
import { describeStoreConformance } from "./conformance.ts";

const cluster = useTestCluster();
let schema = "";

describe.skipIf(postgresMissing)("postgres memory store", () => {
  describeStoreConformance({
    name: "postgres",
    async open(options) {
      schema = freshSchema("store");
      const { Client } = (await import("pg")).default;
      const c = new Client({ connectionString: cluster().url });
      await c.connect();
      await c.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
      await c.end();
      return openPostgresMemoryStore({ url: cluster().url, schema, poolSize: 2 }, options);
    },
    async reopen(options) {
      return openPostgresMemoryStore({ url: cluster().url, schema, poolSize: 2 }, options);
    },
  });
});
