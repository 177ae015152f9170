import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BaseMessage } from "@langchain/core/messages";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import Database from "better-sqlite3";
import pg from "pg";
import { z } from "zod";
import { IncrementalSqliteSaver } from "../src/checkpoint-sqlite/index.ts";
import { createCodeAgent } from "../src/framework/code-agent.ts";
import { CodehopPostgresSaver } from "../src/persistence/index.ts";
import { createSandbox } from "../src/sandbox/index.ts";
import { startTestCluster, type TestCluster } from "../src/testing/postgres-cluster.ts";
import { ScriptedChatModel } from "../src/testing/scripted-chat-model.ts";
import { defineTool } from "../src/tools/define-tool.ts";
import { type BenchSection, fmt } from "./lib.ts";

/**
 * Postgres benchmarks (issue 16): what each checkpointer stores for the same agent run (the figures
 * behind choosing the official Postgres saver over a port of IncrementalSqliteSaver), and the
 * server with 1, 2 and 4 workers (bench/postgres-server.ts). Every figure comes from a throwaway
 * cluster started from the Debian package (src/testing/postgres-cluster.ts).
 */

const observations = (m: BaseMessage[]) =>
  m.filter((x) => String(x.content).startsWith("Observation:")).length;
const action = (thought: string, code: string) =>
  `Thought: ${thought}\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;
/** A 2 KB passage of text that compresses like prose (not a repeated phrase). */
const passage = (i: number) => {
  let seed = i * 7919 + 1;
  const words = ["tower", "iron", "built", "year", "city", "engineer", "height", "steel", "river"];
  const out: string[] = [`Passage ${i}:`];
  while (out.join(" ").length < 2048) {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    out.push(`${words[seed % words.length]}${seed % 97}`);
  }
  return out.join(" ").slice(0, 2048);
};

/** Runs an N-step code agent (each step reads a 2 KB passage through a tool) on `saver`. */
async function agentRun(
  saver: BaseCheckpointSaver,
  sandbox: ReturnType<typeof createSandbox>,
  steps: number,
  thread: string,
): Promise<number> {
  const lookup = defineTool({
    name: "lookup",
    description: "Returns passage i.",
    parameters: z.object({ i: z.number() }),
    returns: "string",
    invoke: async ({ i }) => passage(i),
  });
  const model = new ScriptedChatModel([
    (m) =>
      observations(m) >= steps
        ? action("done", "final_answer('done')")
        : action("read the next passage", `console.log(await lookup(${observations(m)}))`),
  ]);
  const agent = createCodeAgent({
    name: "bench",
    description: "reads passages",
    sandbox,
    model,
    tools: [lookup],
    maxSteps: steps + 1,
  });
  const graph = agent.builder.compile({ checkpointer: saver });
  const t0 = performance.now();
  const out = await graph.invoke(
    { task: "read" },
    { recursionLimit: agent.recursionLimit, configurable: { thread_id: thread } },
  );
  if (out.answer !== "done") throw new Error(`bench agent answered ${String(out.answer)}`);
  return performance.now() - t0;
}

/** Bytes the checkpoint tables of `schema` take (heap + TOAST + indexes). */
async function schemaBytes(pool: pg.Pool, schema: string): Promise<number> {
  await pool.query("CHECKPOINT");
  const { rows } = await pool.query<{ bytes: string }>(
    `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) AS bytes
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname LIKE 'checkpoint%'`,
    [schema],
  );
  return Number(rows[0].bytes);
}

/** Bytes of the stored values themselves (after Postgres's compression), without page overhead. */
async function payloadBytes(pool: pg.Pool, schema: string): Promise<number> {
  const { rows } = await pool.query<{ bytes: string }>(
    `SELECT (SELECT coalesce(sum(pg_column_size(blob)), 0) FROM "${schema}".checkpoint_blobs)
          + (SELECT coalesce(sum(pg_column_size(blob)), 0) FROM "${schema}".checkpoint_writes)
          + (SELECT coalesce(sum(pg_column_size(checkpoint) + pg_column_size(metadata)), 0)
             FROM "${schema}".checkpoints) AS bytes`,
  );
  return Number(rows[0].bytes);
}

function sqliteBytes(path: string): number {
  const db = new Database(path);
  try {
    db.pragma("wal_checkpoint(TRUNCATE)");
  } finally {
    db.close();
  }
  return statSync(path).size;
}

const kib = (b: number) => `${fmt(b / 1024, 0)} KiB`;

/** What each checkpointer stores for the same N-step run. */
async function storage(cluster: TestCluster): Promise<BenchSection> {
  const sandbox = createSandbox({ maxProcesses: 2 });
  const dir = mkdtempSync(join(tmpdir(), "codehop-bench-pgstore-"));
  const pool = new pg.Pool({ connectionString: cluster.url, max: 4 });
  const rows: (string | number)[][] = [];
  try {
    for (const steps of [10, 30, 60]) {
      const file = join(dir, `inc-${steps}.db`);
      const inc = IncrementalSqliteSaver.fromConnString(file);
      const incMs = await agentRun(inc, sandbox, steps, "t");
      inc.db.close();
      const official = `official_${steps}`;
      const saverA = new PostgresSaver(pool, undefined, { schema: official });
      await saverA.setup();
      const officialMs = await agentRun(saverA, sandbox, steps, "t");
      const ours = `codehop_${steps}`;
      const saverB = new CodehopPostgresSaver(pool, ours);
      await saverB.setup();
      const oursMs = await agentRun(saverB, sandbox, steps, "t");
      const incBytes = sqliteBytes(file);
      const pgBytes = await schemaBytes(pool, ours);
      const pgPayload = await payloadBytes(pool, ours);
      rows.push([
        steps,
        kib(incBytes),
        kib(await schemaBytes(pool, official)),
        kib(pgBytes),
        kib(pgPayload),
        `${fmt(pgPayload / incBytes, 1)}x`,
        fmt(incMs / steps, 1),
        fmt(oursMs / steps, 1),
        fmt(officialMs / steps, 1),
      ]);
    }
  } finally {
    await pool.end();
    await sandbox.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return {
    title: "Postgres: what the checkpointer stores per run",
    description:
      "One code agent run of N steps, each step reading a 2 KB passage of varied text through a tool (zero-latency in-process scripted model, real sandbox), checkpointed by codehop's IncrementalSqliteSaver (SQLite file after a WAL checkpoint) and by the official @langchain/langgraph-checkpoint-postgres saver (plain, and as CodehopPostgresSaver with fork-safe versions): the checkpoint tables' total size (heap + TOAST + indexes, 8 KiB pages) and the stored values alone (pg_column_size, after Postgres's own compression). ms per step includes the sandbox action and the model's (zero) latency.",
    columns: [
      "steps",
      "IncrementalSqliteSaver file",
      "official PostgresSaver tables",
      "CodehopPostgresSaver tables",
      "CodehopPostgresSaver values",
      "values vs SQLite file",
      "SQLite ms/step",
      "Postgres ms/step",
      "official ms/step",
    ],
    rows,
  };
}

export default async function bench(): Promise<BenchSection[]> {
  const cluster = await startTestCluster({ fsync: true });
  try {
    return [await storage(cluster)];
  } finally {
    await cluster.stop();
  }
}
