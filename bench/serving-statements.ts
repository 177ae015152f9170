/**
 * Statements per served run: `codehop serve` + 1 worker on a throwaway cluster, an 8-run warm-up,
 * then N runs with every statement logged (log_statement=all), counted by kind. What the worker,
 * queue and checkpointer ask PostgreSQL for per run, to see which round trips to cut.
 * `npx tsx bench/serving-statements.ts [runs]`.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { startTestCluster } from "../src/testing/postgres-cluster.ts";
import { startServingModel } from "./serving-model.ts";
import { codehopSetup, submitRound } from "./serving-rounds.ts";

const runs = Number(process.argv[2] ?? 20);
const cluster = await startTestCluster({});
const model = await startServingModel(200);
const setup = await codehopSetup(cluster, model, { name: "statements", workers: 1 });
const admin = new pg.Client({ connectionString: cluster.url });
await admin.connect();
const setLogging = async (on: boolean) => {
  await admin.query(`ALTER SYSTEM SET log_statement = '${on ? "all" : "none"}'`);
  await admin.query(`ALTER SYSTEM SET log_line_prefix = '%a|%p|'`);
  await admin.query("SELECT pg_reload_conf()");
  await new Promise((r) => setTimeout(r, 500));
};
try {
  await submitRound(
    setup,
    model,
    Array.from({ length: 8 }, (_, i) => i),
  );
  const log = join(cluster.dir, "server.log");
  await setLogging(true);
  const from = readFileSync(log, "utf8").length;
  const round = await submitRound(
    setup,
    model,
    Array.from({ length: runs }, (_, i) => 100 + i),
  );
  await setLogging(false);
  const text = readFileSync(log, "utf8").slice(from);
  const counts = new Map<string, number>();
  let total = 0;
  for (const m of text.matchAll(
    /LOG:\s+(?:execute [^:]*|statement): ([\s\S]*?)(?=\n\S*\|\d+\||\n?$)/g,
  )) {
    const sql = m[1].replace(/\s+/g, " ").trim().slice(0, 110);
    if (/ALTER SYSTEM|pg_reload_conf/.test(sql)) continue;
    total++;
    counts.set(sql, (counts.get(sql) ?? 0) + 1);
  }
  const ok = round.runs.filter((r) => r.outcome === "ok").length;
  console.log(`${ok}/${runs} ok; ${total} statements, ${(total / runs).toFixed(1)} per run`);
  for (const [sql, n] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, 60))
    console.log(`${(n / runs).toFixed(2).padStart(7)}  ${sql}`);
} finally {
  await admin.end();
  await setup.stop();
  await model.close();
  await cluster.stop();
}
