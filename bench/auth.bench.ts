import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import pg from "pg";
import { startTestCluster } from "../src/testing/postgres-cluster.ts";
import { type BenchSection, fmt, percentile } from "./lib.ts";

/**
 * What authentication and ownership filtering add to a request of `codehop serve` (issue 21): two
 * servers on one throwaway PostgreSQL, one with `--auth keys` (API key looked up, user's filters in
 * the SQL, per-user limits keyed by identity), one without authentication (loopback), timed with
 * the official SDK in interleaved repeats (each round calls both, order alternating).
 */

const ROOT = join(import.meta.dirname, "..");
const ROUNDS = 80;
/** Threads of other users in the table, so that the owner filter has rows to leave out. */
const OTHER_THREADS = 5000;

function spawnServe(
  args: string[],
  env: NodeJS.ProcessEnv,
): { child: ChildProcess; url: Promise<string> } {
  const child = spawn(process.execPath, [join(ROOT, "bin/codehop.mjs"), "serve", ...args], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let err = "";
  const url = new Promise<string>((resolve, reject) => {
    child.stderr!.on("data", (d) => {
      err += d;
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m) resolve(m[1]);
    });
    child.once("exit", () => reject(new Error(`codehop serve exited:\n${err}`)));
  });
  return { child, url };
}

export default async function authBench(): Promise<BenchSection> {
  const cluster = await startTestCluster();
  const home = mkdtempSync(join(tmpdir(), "codehop-bench-auth-"));
  const servers: ChildProcess[] = [];
  try {
    const databaseUrl = await cluster.createDatabase("bench_auth");
    const env = {
      PATH: process.env.PATH,
      HOME: home,
      CODEHOP_HOME: home,
      CODEHOP_ENV_FILE: "none",
      CODEHOP_DATABASE_URL: databaseUrl,
    };
    const made = spawnSync(
      process.execPath,
      [join(ROOT, "bin/codehop.mjs"), "keys", "add", "ada", "--json"],
      { env, encoding: "utf8" },
    );
    if (made.status !== 0) throw new Error(`codehop keys add failed: ${made.stderr}`);
    const key = JSON.parse(made.stdout).key as string;
    // (0: the per-user run count off, as no worker takes the runs created here)
    const common = ["--port", "0", "--max-active-runs", "0"];
    const withAuth = spawnServe([...common, "--auth", "keys"], env);
    servers.push(withAuth.child);
    const without = spawnServe(common, env);
    servers.push(without.child);
    const urls = { auth: await withAuth.url, none: await without.url };
    const db = new pg.Pool({ connectionString: databaseUrl, max: 1 });
    await db.query(
      `INSERT INTO codehop_api_threads (thread_id, metadata)
       SELECT 'other-' || i, jsonb_build_object('owner', 'user' || (i % 100))
       FROM generate_series(1, $1) AS i`,
      [OTHER_THREADS],
    );
    await db.end();
    const clients = {
      auth: new Client({ apiUrl: urls.auth, defaultHeaders: { "x-api-key": key } }),
      none: new Client({ apiUrl: urls.none }),
    };
    // Each user sees some threads of their own.
    for (const c of Object.values(clients))
      for (let i = 0; i < 20; i++) await c.threads.create({ metadata: { n: i } });
    const ops: Record<string, (c: Client) => Promise<unknown>> = {
      "threads.search (10)": (c) => c.threads.search({ limit: 10 }),
      "threads.search (1) + threads.get": async (c) => {
        const [t] = await c.threads.search({ limit: 1 });
        return c.threads.get(t.thread_id);
      },
      "threads.create": (c) => c.threads.create(),
      "runs.create (stateless)": (c) => c.runs.create(null, "code_agent", { input: { task: "x" } }),
    };
    const times: Record<string, { auth: number[]; none: number[] }> = {};
    for (const name of Object.keys(ops)) times[name] = { auth: [], none: [] };
    const loadBefore = loadavg()[0].toFixed(1);
    for (let round = -5; round < ROUNDS; round++) {
      for (const [name, op] of Object.entries(ops)) {
        const order: Array<"auth" | "none"> = round % 2 ? ["auth", "none"] : ["none", "auth"];
        for (const which of order) {
          const t0 = performance.now();
          await op(clients[which]);
          // (the first rounds warm both servers and are not kept)
          if (round >= 0) times[name][which].push(performance.now() - t0);
        }
      }
    }
    const rows = Object.entries(times).map(([name, t]) => {
      const a = percentile(t.auth, 50);
      const n = percentile(t.none, 50);
      return [name, fmt(n), fmt(a), `${fmt(a / n)}x`, fmt(a - n)];
    });
    return {
      title: "Server: what authentication and ownership filtering add to a request",
      description: `Two \`codehop serve\` processes on one throwaway PostgreSQL 15 cluster on this machine: one with \`--auth keys\` (the SDK sends an API key of \`codehop keys add\`; the server verifies it, runs the owner-only handler and puts the user's filter in each query, per-user limits keyed by the identity), one without authentication on loopback. The threads table holds ${OTHER_THREADS} threads of 100 other users plus 20 of the caller's. p50 of ${ROUNDS} interleaved rounds (each round calls both servers, order alternating; 5 warm-up rounds dropped), milliseconds per SDK call over loopback, client and servers on the same ${cpus().length} cores; 1-minute load average ${loadBefore} at the start (above the core count: other jobs were running, compare the ratio).`,
      columns: ["SDK call", "no auth p50 ms", "api-key auth p50 ms", "ratio", "added ms"],
      rows,
    };
  } finally {
    for (const s of servers) s.kill("SIGTERM");
    await Promise.all(
      servers.map((s) => (s.exitCode === null ? new Promise((r) => s.once("exit", r)) : undefined)),
    );
    await cluster.stop();
    rmSync(home, { recursive: true, force: true });
  }
}
