import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, inject } from "vitest";
import { readEnv } from "../../src/config/env.ts";
import {
  postgresUnavailableReason,
  startTestCluster,
  type TestCluster,
} from "../../src/testing/postgres-cluster.ts";

/**
 * Why the Postgres tests cannot run here, or undefined when they can. Locally they skip with this
 * message; in CI (CI or CODEHOP_CI set; .ci/run installs the Debian package) a missing PostgreSQL
 * fails the file instead of skipping it.
 */
export const postgresMissing: string | undefined = (() => {
  const reason = postgresUnavailableReason();
  if (reason && readEnv().ci) throw new Error(`CI must run the PostgreSQL tests, but: ${reason}`);
  if (reason) console.warn(`Skipping the PostgreSQL tests: ${reason}`);
  return reason;
})();

/** Creates database `name` on the cluster whose superuser URL is `url`; returns its URL. */
async function createDatabase(url: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE "${name.replace(/"/g, "")}"`);
  } finally {
    await client.end();
  }
  const at = new URL(url);
  at.pathname = `/${encodeURIComponent(name)}`;
  return at.href;
}

/**
 * The test file's view of the run's shared cluster (test/vitest/global-setup.ts starts one for
 * the whole run): `url` is a database of the file's own, and `createDatabase` names get a suffix
 * of the file's, so files running side by side never see each other's tables.
 */
async function fileCluster(broker: string): Promise<TestCluster> {
  const res = await fetch(broker);
  const body = await res.text();
  if (!res.ok) throw new Error(`the run's PostgreSQL cluster did not start: ${body}`);
  const suffix = randomBytes(4).toString("hex");
  const own = await createDatabase(body, `file_${suffix}`);
  const { port } = new URL(own);
  return {
    url: own,
    port: Number(port),
    dir: "",
    createDatabase: (name) => createDatabase(body, `${name}_${suffix}`),
    // The run's cluster outlives the file; the global setup stops it.
    stop: async () => {},
  };
}

/**
 * Gives the test file a PostgreSQL cluster (beforeAll): under the suite's config a database of its
 * own on the run's shared cluster, otherwise (no broker: another config) a throwaway cluster of
 * its own, stopped afterwards. The getter returns it inside tests. Does nothing when PostgreSQL is
 * missing (the file's suites skip).
 */
export function useTestCluster(): () => TestCluster {
  let cluster: TestCluster | undefined;
  beforeAll(async () => {
    if (postgresMissing) return;
    const broker = inject("postgresBroker");
    cluster = broker ? await fileCluster(broker) : await startTestCluster();
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  return () => {
    if (!cluster) throw new Error("the test PostgreSQL cluster is not running");
    return cluster;
  };
}

/** A fresh schema name per use (tests share one cluster and database). */
let schemas = 0;
export function freshSchema(prefix = "t"): string {
  schemas += 1;
  return `${prefix}_${process.pid}_${schemas}`;
}
