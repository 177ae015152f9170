import { afterAll, beforeAll } from "vitest";
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

/**
 * Starts one throwaway cluster for the test file (beforeAll) and stops it afterwards; the getter
 * returns it inside tests. Does nothing when PostgreSQL is missing (the file's suites skip).
 */
export function useTestCluster(): () => TestCluster {
  let cluster: TestCluster | undefined;
  beforeAll(async () => {
    if (!postgresMissing) cluster = await startTestCluster();
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
