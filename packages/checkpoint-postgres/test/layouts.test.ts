import { readFileSync } from "node:fs";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  freshSchema,
  postgresMissing,
  useTestCluster,
} from "../../../test/persistence/postgres-cluster.ts";
import { LinearPostgresSaver } from "../src/index.ts";
import { fixtureGraph } from "./fixtures/graph.ts";
import { tupleSummary } from "./fixtures/summary.ts";

// Schemas written by earlier layouts of this saver (fixtures/generate.ts wrote them with the code
// of the time) read as they did then, and their threads continue.

const cluster = useTestCluster();

interface Fixture {
  ddl: string;
  tables: Record<string, Array<Record<string, unknown>>>;
  listed: ReturnType<typeof tupleSummary>[];
}

/** The fixture's tables and rows, created in `schema`. */
async function load(pool: pg.Pool, file: string, schema: string): Promise<Fixture> {
  const fixture = JSON.parse(
    readFileSync(new URL(`./fixtures/${file}`, import.meta.url), "utf8"),
  ) as Fixture;
  await pool.query(fixture.ddl.replaceAll('"fixture"', `"${schema}"`));
  for (const [table, rows] of Object.entries(fixture.tables))
    for (const row of rows) {
      const columns = Object.keys(row);
      const values = columns.map((c) => {
        const v = row[c] as { base64?: string } | null;
        return v && typeof v === "object" && "base64" in v ? Buffer.from(v.base64!, "base64") : v;
      });
      await pool.query(
        `INSERT INTO "${schema}".${table} (${columns.join(", ")}) OVERRIDING SYSTEM VALUE
         VALUES (${columns.map((_, i) => `$${i + 1}`).join(", ")})`,
        values,
      );
    }
  return fixture;
}

async function listed(saver: LinearPostgresSaver, thread: string) {
  const out = [];
  for await (const t of saver.list({ configurable: { thread_id: thread } }))
    out.push(tupleSummary(t));
  return out;
}

describe.skipIf(postgresMissing)("schemas of earlier layouts", () => {
  let pool: pg.Pool;
  beforeAll(() => {
    pool = new pg.Pool({ connectionString: cluster().url, max: 4 });
  });
  afterAll(async () => {
    await pool?.end();
  });

  it.each([
    ["the first layout", "linear-v1.json"],
    ["the second layout", "linear-v2.json"],
  ])("%s (%s): every checkpoint reads as it did, threads continue", async (_name, file) => {
    const schema = freshSchema("old");
    const fixture = await load(pool, file, schema);
    const saver = new LinearPostgresSaver(pool, schema);
    await saver.setup();
    const all = [...(await listed(saver, "a")), ...(await listed(saver, "b"))];
    expect(all).toEqual(fixture.listed);
    // Each by id from a fresh saver (no cache), nested namespaces included.
    for (const t of fixture.listed.filter((_, i) => i % 5 === 0)) {
      const read = await new LinearPostgresSaver(pool, schema).getTuple({ configurable: t.config });
      expect(tupleSummary(read!)).toEqual(t);
    }

    // Thread a (12 steps) continued to 16 by a fresh saver, then read by another.
    const before = fixture.listed.find((t) => t.config?.thread_id === "a")!;
    await fixtureGraph(new LinearPostgresSaver(pool, schema), 16).invoke(
      {},
      { configurable: { thread_id: "a" } },
    );
    const after = await new LinearPostgresSaver(pool, schema).getTuple({
      configurable: { thread_id: "a" },
    });
    const log = after?.checkpoint.channel_values.log as string[];
    const old = before.values.log as string[];
    expect(log.slice(0, old.length)).toEqual(old);
    expect(log.filter((l) => l.startsWith("record ")).length).toBe(16);
    expect(after?.checkpoint.channel_values.status).toBe("done");
    expect((await saver.rootCheckpointCounts("a")).get("a")).toBeGreaterThan(
      fixture.listed.filter((t) => t.config?.thread_id === "a" && t.config.checkpoint_ns === "")
        .length,
    );
  });
});
