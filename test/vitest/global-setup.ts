import { spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { basename, join } from "node:path";
import type { TestProject } from "vitest/node";
import { whyDistIsStale } from "../../bin/dist-current.mjs";
import { startTestCluster, type TestCluster } from "../../src/testing/postgres-cluster.ts";

declare module "vitest" {
  interface ProvidedContext {
    /** URL of this run's PostgreSQL broker (see {@link startClusterBroker}). */
    postgresBroker: string;
  }
}

/**
 * Before the suite: tests about the CLI's behaviour spawn `bin/codehop.mjs`, which runs dist/ when
 * the build is current with src/ and the sources through tsx (about a second more per start)
 * otherwise. After an edit, one build here (about 20 s of CPU) saves that second on each of the
 * suite's hundreds of CLI starts. A failed build (a type error) is reported and the suite goes
 * on: the CLI then runs the sources, which is still what the user would run.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const stale = whyDistIsStale();
  if (stale) {
    process.stderr.write(`vitest global setup: ${stale}; running \`npm run build\` first\n`);
    const r = spawnSync(process.execPath, [join(import.meta.dirname, "../../bin/build.mjs")], {
      stdio: "inherit",
    });
    if (r.status !== 0)
      process.stderr.write(
        "vitest global setup: the build failed; CLI tests run the sources through tsx (slower)\n",
      );
  }
  const broker = await startClusterBroker();
  project.provide("postgresBroker", broker.url);
  return async () => {
    await broker.close();
    // The run's temporary folder (vitest.config.ts), with whatever the tests left in it: only
    // by the process that made it.
    const runTmp = process.env.CODEHOP_TEST_TMP;
    const owner = process.env.CODEHOP_TEST_TMP_OWNER === String(process.pid);
    if (owner && runTmp && basename(runTmp).startsWith("codehop-test-run-"))
      rmSync(runTmp, { recursive: true, force: true, maxRetries: 3 });
  };
}

/**
 * One throwaway PostgreSQL cluster for the whole run instead of one per test file (initdb and a
 * server start cost a second or two of CPU each; a dozen files use PostgreSQL). It starts on the
 * first request, so a run without PostgreSQL tests starts none: a test file GETs the broker's URL
 * (test/persistence/postgres-cluster.ts) and receives the cluster's superuser URL, then makes its
 * own database on it. The cluster lives in this process, which stops it at the end of the run
 * (or on exit or a signal: startTestCluster's handlers).
 */
async function startClusterBroker(): Promise<{ url: string; close: () => Promise<void> }> {
  let cluster: Promise<TestCluster> | undefined;
  const server = createServer((req, res) => {
    cluster ??= startTestCluster({ maxConnections: 500 });
    cluster.then(
      (c) => res.writeHead(200, { "content-type": "text/plain" }).end(c.url),
      (err: Error) => res.writeHead(503, { "content-type": "text/plain" }).end(err.message),
    );
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: async () => {
      await new Promise((ok) => server.close(ok));
      await (await cluster?.catch(() => undefined))?.stop();
    },
  };
}
