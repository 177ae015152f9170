import { fileURLToPath } from "node:url";
import { Annotation, END, START, StateGraph, type BaseCheckpointSaver } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { JsonPlusSerializer } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  freshSchema,
  postgresMissing,
  useTestCluster,
} from "../../../test/persistence/postgres-cluster.ts";
import { importsOf } from "../../../test/package/scratch.ts";
import { CHECKPOINT_CORRUPT, CheckpointCorruptError, LinearPostgresSaver } from "../src/index.ts";
import type { SaverContext } from "../src/context.ts";
import { KIND_APPENDED, KIND_WHOLE } from "../src/schema.ts";
import { decodeStep, type Step, type StepRow, STEP_COLUMNS } from "../src/step-rows.ts";

const cluster = useTestCluster();

/** A graph that appends one record to `log` per step until `n` reaches `until`. */
function counter(saver: BaseCheckpointSaver, until: number) {
  const State = Annotation.Root({
    log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
    n: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
  });
  return new StateGraph(State)
    .addNode("step", (s) => ({ log: [`record ${s.n} `.padEnd(400, "x")], n: s.n + 1 }))
    .addEdge(START, "step")
    .addConditionalEdges("step", (s) => (s.n >= until ? END : "step"))
    .compile({ checkpointer: saver });
}

const run = (thread: string) => ({ configurable: { thread_id: thread }, recursionLimit: 1000 });

/** The kind of every stored value of channel `log` of a thread (its rows decoded in order). */
async function logEntries(pool: pg.Pool, schema: string, thread: string): Promise<number[]> {
  const { rows } = await pool.query<StepRow>(
    `SELECT ${STEP_COLUMNS} FROM "${schema}".linear_steps
     WHERE thread_id = $1 AND checkpoint_ns = '' AND call = 0 ORDER BY checkpoint_id`,
    [thread],
  );
  const ctx = { serde: new JsonPlusSerializer() } as unknown as SaverContext;
  const decoded = new Map<string, Step>();
  const kinds: number[] = [];
  for (const row of rows) {
    const step = await decodeStep(ctx, row, decoded.get(row.parent_checkpoint_id ?? ""));
    decoded.set(row.checkpoint_id, step);
    for (const e of step.entries.values()) if (e.channel === "log") kinds.push(e.kind);
  }
  return kinds;
}

async function listAll(saver: BaseCheckpointSaver, thread: string) {
  const out = [];
  for await (const t of saver.list({ configurable: { thread_id: thread } })) out.push(t);
  return out;
}

describe.skipIf(postgresMissing)("LinearPostgresSaver", () => {
  let pool: pg.Pool;
  beforeAll(() => {
    pool = new pg.Pool({ connectionString: cluster().url, max: 4 });
  });
  afterAll(async () => {
    await pool?.end();
  });

  it("stores a growing list as the items each step added (linear), and reads every step back", async () => {
    const schema = freshSchema("lin");
    const saver = new LinearPostgresSaver(pool, schema);
    await saver.setup();
    await counter(saver, 60).invoke({}, run("t"));
    const log = await logEntries(pool, schema, "t");
    expect(log.filter((k) => k === KIND_APPENDED).length).toBeGreaterThan(50);
    // Whole copies come at geometrically growing sizes: far fewer than the steps.
    expect(log.filter((k) => k === KIND_WHOLE).length).toBeLessThan(6);

    const fresh = new LinearPostgresSaver(pool, schema);
    const latest = await fresh.getTuple(run("t"));
    expect(latest?.checkpoint.channel_values.log).toHaveLength(60);
    const all = await listAll(fresh, "t");
    expect(all.length).toBe(62);
    for (const t of all) {
      const log = (t.checkpoint.channel_values.log as string[] | undefined) ?? [];
      const n = (t.checkpoint.channel_values.n as number | undefined) ?? 0;
      expect(log.length).toBe(n);
      if (n) expect(log[n - 1]).toMatch(new RegExp(`^record ${n - 1} `));
      // Each read alone (a fresh saver: no cache) reads the same.
      const one = await new LinearPostgresSaver(pool, schema).getTuple(t.config);
      expect(one?.checkpoint.channel_values).toEqual(t.checkpoint.channel_values);
      expect(one?.pendingWrites).toEqual(t.pendingWrites);
    }
    // list() with a limit and `before` reads the rows its checkpoints need above them too.
    const page = [];
    for await (const t of fresh.list(run("t"), { before: all[20].config, limit: 3 })) page.push(t);
    expect(page.map((t) => t.checkpoint.channel_values)).toEqual(
      all.slice(21, 24).map((t) => t.checkpoint.channel_values),
    );
  });

  it("a fresh saver continuing a thread stores appends, not the whole list again", async () => {
    const schema = freshSchema("lin");
    await counter(new LinearPostgresSaver(pool, schema), 5).invoke({}, run("t"));
    const second = new LinearPostgresSaver(pool, schema);
    await counter(second, 12).invoke({ n: 5 }, run("t"));
    expect((await logEntries(pool, schema, "t")).filter((k) => k === KIND_WHOLE).length).toBe(1);
    const state = await new LinearPostgresSaver(pool, schema).getTuple(run("t"));
    expect(state?.checkpoint.channel_values.log).toHaveLength(12);
  });

  it("reads a schema the official PostgresSaver wrote, continues its threads and deletes them", async () => {
    const schema = freshSchema("old");
    const official = new PostgresSaver(pool, undefined, { schema });
    await official.setup();
    await counter(official, 12).invoke({}, run("old"));
    const before = await listAll(official, "old");
    const officialLatest = await official.getTuple(run("old"));

    const saver = new LinearPostgresSaver(pool, schema);
    const latest = await saver.getTuple(run("old"));
    expect(latest?.checkpoint.id).toBe(officialLatest?.checkpoint.id);
    expect(latest?.checkpoint.channel_values).toEqual(officialLatest?.checkpoint.channel_values);
    const byId = await saver.getTuple({
      configurable: { thread_id: "old", checkpoint_id: before[5].checkpoint.id },
    });
    expect(byId?.checkpoint.channel_values).toEqual(before[5].checkpoint.channel_values);
    expect((await listAll(saver, "old")).map((t) => t.checkpoint.id)).toEqual(
      before.map((t) => t.checkpoint.id),
    );

    // Continued: new checkpoints in the new tables (an input checkpoint, then one per step), on
    // top of the old ones; the first stores every channel once.
    await counter(saver, 20).invoke({ n: 12 }, run("old"));
    const continued = await new LinearPostgresSaver(pool, schema).getTuple(run("old"));
    expect(continued?.checkpoint.channel_values.log).toHaveLength(20);
    expect((continued?.checkpoint.channel_values.log as string[])[3]).toMatch(/^record 3 /);
    const all = await listAll(saver, "old");
    expect(all.length).toBe(before.length + 10);
    expect(all.slice(10).map((t) => t.checkpoint.id)).toEqual(before.map((t) => t.checkpoint.id));
    expect((await saver.rootCheckpointCounts("old")).get("old")).toBe(all.length);
    expect(await saver.threadIds()).toEqual(["old"]);
    expect((await saver.checkpointKeys("old")).length).toBe(all.length);
    const { rows } = await pool.query(
      `SELECT 1 FROM "${schema}".linear_steps WHERE thread_id = 'old' AND call = 0`,
    );
    expect(rows.length).toBe(10);

    await saver.deleteThread("old");
    expect(await saver.getTuple(run("old"))).toBeUndefined();
    expect(await official.getTuple(run("old"))).toBeUndefined();
  });

  it("two forks of one checkpoint keep their own values", async () => {
    const schema = freshSchema("lin");
    const saver = new LinearPostgresSaver(pool, schema);
    const graph = counter(saver, 3);
    await graph.invoke({}, run("f"));
    const history = await listAll(saver, "f");
    const fork = history.find((t) => (t.checkpoint.channel_values.n as number) === 1)!;
    const a = await graph.updateState(fork.config, { log: ["fork a"] });
    const b = await graph.updateState(fork.config, { log: ["fork b"] });
    const fresh = new LinearPostgresSaver(pool, schema);
    const readA = await fresh.getTuple(a);
    const readB = await fresh.getTuple(b);
    expect((readA?.checkpoint.channel_values.log as string[]).at(-1)).toBe("fork a");
    expect((readB?.checkpoint.channel_values.log as string[]).at(-1)).toBe("fork b");
  });

  it("a parent chain pointing at itself, or bytes that are not deflate data, is CODEHOP_CHECKPOINT_CORRUPT", async () => {
    const schema = freshSchema("lin");
    await counter(new LinearPostgresSaver(pool, schema), 5).invoke({}, run("bad"));
    await counter(new LinearPostgresSaver(pool, schema), 5).invoke({}, run("good"));
    const expectCorrupt = async (change: string) => {
      await pool.query(change);
      const saver = new LinearPostgresSaver(pool, schema);
      const err = await saver.getTuple(run("bad")).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(CheckpointCorruptError.isInstance(err), String(err)).toBe(true);
      expect((err as CheckpointCorruptError).code).toBe(CHECKPOINT_CORRUPT);
      expect((err as CheckpointCorruptError).thread).toBe("bad");
      expect((err as Error).message).toMatch(/thread "bad": table linear_steps/);
      expect((err as Error).message).not.toContain("SECRET");
      expect((await saver.getTuple(run("good")))?.checkpoint.channel_values.log).toHaveLength(5);
    };
    // Every row its own parent, reaching far: the walk ends and the values it needs are missing.
    await expectCorrupt(
      `UPDATE "${schema}".linear_steps SET parent_checkpoint_id = checkpoint_id, reach = 2000000000 WHERE thread_id = 'bad' AND call = 0`,
    );
    await expectCorrupt(
      `UPDATE "${schema}".linear_steps SET zip = 1, data = 'SECRET'::bytea WHERE thread_id = 'bad'`,
    );
  });
});

describe("the package's imports", () => {
  it("imports nothing outside its folder but LangGraph's checkpoint packages, pg and Node", () => {
    const allowed =
      /^(?:node:|pg$|@langchain\/langgraph-checkpoint$|@langchain\/langgraph-checkpoint-postgres$|@langchain\/core\/)/;
    for (const { file, spec, declared } of importsOf(
      fileURLToPath(new URL("../src/", import.meta.url)),
    )) {
      expect(spec, `${file} imports ${spec}`).toMatch(allowed);
      // ... and what it imports is what its package.json declares (a dependency or a peer).
      expect(declared, `${file} imports ${spec}, not in package.json`).toBe(true);
    }
  });
});
