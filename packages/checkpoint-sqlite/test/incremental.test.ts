import { randomBytes } from "node:crypto";
import { mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AIMessage, BaseMessage, HumanMessage } from "@langchain/core/messages";
import { Annotation, END, MemorySaver, START, StateGraph } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { importsOf } from "../../../test/package/scratch.ts";
import { IncrementalSqliteSaver } from "../src/index.ts";

const tmp = () => mkdtempSync(join(tmpdir(), "codehop-lgi-"));

/** A loop that appends one ~2 KB record per step to a list channel, `steps` times. */
function appendingGraph(checkpointer: any) {
  const State = Annotation.Root({
    log: Annotation<Array<{ i: number; text: string }>>({
      reducer: (a, b) => a.concat(b),
      default: () => [],
    }),
    n: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
    limit: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
  });
  return new StateGraph(State)
    .addNode("step", (s) => ({
      log: [{ i: s.n, text: `record ${s.n} `.padEnd(2048, "x") }],
      n: s.n + 1,
    }))
    .addEdge(START, "step")
    .addConditionalEdges("step", (s) => (s.n >= s.limit ? END : "step"))
    .compile({ checkpointer });
}

function fileBytes(path: string): number {
  const db = new Database(path);
  db.pragma("wal_checkpoint(TRUNCATE)");
  db.close();
  return statSync(path).size;
}

describe("IncrementalSqliteSaver", () => {
  it("stores a growing list as the items it gained: bytes grow linearly, values read back whole", async () => {
    const sizes: number[] = [];
    for (const steps of [20, 40, 80]) {
      const dir = tmp();
      const saver = IncrementalSqliteSaver.fromConnString(join(dir, "c.db"));
      const graph = appendingGraph(saver);
      const cfg = { configurable: { thread_id: "t" }, recursionLimit: 1000 };
      const out = await graph.invoke({ limit: steps }, cfg);
      expect(out.log).toHaveLength(steps);
      // Read back through a fresh saver (nothing cached): every checkpoint's list is whole.
      saver.db.close();
      const fresh = IncrementalSqliteSaver.fromConnString(join(dir, "c.db"));
      const history = [];
      for await (const s of appendingGraph(fresh).getStateHistory(cfg)) history.push(s);
      for (const snap of history)
        expect(snap.values.log.map((r: { i: number }) => r.i)).toEqual(
          Array.from({ length: snap.values.n ?? 0 }, (_, i) => i),
        );
      fresh.db.close();
      sizes.push(fileBytes(join(dir, "c.db")));
    }
    // Doubling the steps about doubles the bytes (quadratic growth would quadruple them).
    expect(sizes[1] / sizes[0]).toBeLessThan(2.6);
    expect(sizes[2] / sizes[1]).toBeLessThan(2.6);
  });

  it("stores no row for a channel emptied in a step; it reads as empty, as rows of earlier versions did", async () => {
    const dir = tmp();
    const saver = IncrementalSqliteSaver.fromConnString(join(dir, "c.db"));
    const config = { configurable: { thread_id: "e", checkpoint_ns: "" } };
    const base = { v: 4, ts: new Date().toISOString(), versions_seen: {} };
    // Large enough for a row of its own, even deflated (a small value is kept in the record).
    const one = randomBytes(200).toString("base64");
    await saver.put(
      config,
      {
        ...base,
        id: "c1",
        channel_values: { a: one, b: "kept" },
        channel_versions: { a: 1, b: 1 },
      },
      { source: "loop", step: 0, parents: {} } as any,
      { a: 1, b: 1 },
    );
    // `a` gets a new version but no value (LangGraph's ephemeral and edge channels, after a step).
    await saver.put(
      { configurable: { ...config.configurable, checkpoint_id: "c1" } },
      { ...base, id: "c2", channel_values: { b: "kept" }, channel_versions: { a: 2, b: 1 } },
      { source: "loop", step: 1, parents: {} } as any,
      { a: 2 },
    );
    const rows = () =>
      (saver.db as Database.Database)
        .prepare("SELECT version FROM lgi_blobs WHERE channel = 'a' ORDER BY version")
        .all()
        .map((r: any) => r.version);
    expect(rows()).toEqual(["1"]);
    const fresh = IncrementalSqliteSaver.fromConnString(join(dir, "c.db"));
    const latest = await fresh.getTuple(config);
    expect(latest?.checkpoint.channel_values).toEqual({ b: "kept" });
    expect(latest?.checkpoint.channel_versions).toEqual({ a: 2, b: 1 });
    const first = await fresh.getTuple({
      configurable: { ...config.configurable, checkpoint_id: "c1" },
    });
    expect(first?.checkpoint.channel_values).toEqual({ a: one, b: "kept" });
    // A database of an earlier version holds an explicit empty row (kind 2): it reads the same.
    (fresh.db as Database.Database)
      .prepare(
        "INSERT INTO lgi_blobs (ns_id, channel, version, kind, type, zip, value) SELECT ns_id, 'a', '2', 2, 'empty', 0, NULL FROM lgi_namespaces WHERE thread_id = 'e'",
      )
      .run();
    const again = IncrementalSqliteSaver.fromConnString(join(dir, "c.db"));
    expect((await again.getTuple(config))?.checkpoint.channel_values).toEqual({ b: "kept" });
    for (const s of [saver, fresh, again]) s.db.close();
  });

  it("keeps small values in the checkpoint records: every checkpoint reads back what LangGraph's MemorySaver holds", async () => {
    const State = Annotation.Root({
      n: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
      // ~200 bytes written by the node: stored as a reference to the write, inside the record.
      note: Annotation<{ step: number; text: string }>({ reducer: (_a, b) => b }),
      status: Annotation<string>({ reducer: (_a, b) => b, default: () => "new" }),
    });
    const build = (checkpointer: any) =>
      new StateGraph(State)
        .addNode("step", (s) => ({
          n: s.n + 1,
          note: { step: s.n, text: `note ${s.n} `.padEnd(200, "-") },
          ...(s.n % 5 === 4 ? { status: `five ${s.n}` } : {}),
        }))
        .addEdge(START, "step")
        .addConditionalEdges("step", (s) => (s.n >= 30 ? END : "step"))
        .compile({ checkpointer });
    const dir = tmp();
    const config = { configurable: { thread_id: "small" }, recursionLimit: 100 };
    await build(IncrementalSqliteSaver.fromConnString(join(dir, "c.db"))).invoke({}, config);
    const memory = new MemorySaver();
    await build(memory).invoke({}, config);
    const values = async (saver: any) => {
      const out: unknown[] = [];
      for await (const t of saver.list({ configurable: { thread_id: "small" } })) {
        // The channels with a version and a value (MemorySaver also keeps LangGraph's empty task
        // channel and defaults of channels never written, which this saver stores nothing for).
        const { channel_values: v, channel_versions: versions } = t.checkpoint;
        out.push(
          Object.fromEntries(
            Object.keys(versions)
              .filter((k) => k !== "__pregel_tasks" && Object.hasOwn(v, k))
              .map((k) => [k, v[k]]),
          ),
        );
      }
      return out;
    };
    // A fresh saver: nothing cached, every value comes from the file.
    const fresh = IncrementalSqliteSaver.fromConnString(join(dir, "c.db"));
    const stored = await values(fresh);
    expect(stored.length).toBeGreaterThan(30);
    expect(stored).toEqual(await values(memory));
    const db = fresh.db as Database.Database;
    const rows = db.prepare(
      "SELECT count(*) AS n FROM lgi_blobs WHERE channel IN ('n', 'note', 'status')",
    );
    expect((rows.get() as { n: number }).n).toBe(0);
  });

  it("keeps forks apart: two branches from one checkpoint each read their own values", async () => {
    const dir = tmp();
    const saver = IncrementalSqliteSaver.fromConnString(join(dir, "c.db"));
    const graph = appendingGraph(saver);
    const cfg = { configurable: { thread_id: "fork" }, recursionLimit: 100 };
    await graph.invoke({ limit: 3 }, cfg);
    const history = [];
    for await (const s of graph.getStateHistory(cfg)) history.push(s);
    const afterOne = history.find((s) => s.values.n === 1)!;
    // Two forks of the same checkpoint, each edited differently then run on.
    const a = await graph.updateState(afterOne.config, { log: [{ i: 100, text: "A" }] });
    const b = await graph.updateState(afterOne.config, { log: [{ i: 200, text: "B" }] });
    const stateA = await graph.getState(a);
    const stateB = await graph.getState(b);
    expect(stateA.values.log.map((r: { i: number }) => r.i)).toEqual([0, 100]);
    expect(stateB.values.log.map((r: { i: number }) => r.i)).toEqual([0, 200]);
  });

  it("continues threads the official SqliteSaver wrote, and deletes them whole", async () => {
    const dir = tmp();
    const path = join(dir, "c.db");
    const official = SqliteSaver.fromConnString(path);
    const cfg = { configurable: { thread_id: "old" }, recursionLimit: 100 };
    await appendingGraph(official).invoke({ limit: 2 }, cfg);
    official.db.close();

    const saver = IncrementalSqliteSaver.fromConnString(path);
    const graph = appendingGraph(saver);
    // The old checkpoints are readable as they are.
    expect((await graph.getState(cfg)).values.n).toBe(2);
    // Continuing the thread: new checkpoints go to the new tables, the old ones stay.
    await graph.invoke({ limit: 5 }, cfg);
    const state = await graph.getState(cfg);
    expect(state.values.log.map((r: { i: number }) => r.i)).toEqual([0, 1, 2, 3, 4]);
    const all = [];
    for await (const t of saver.list({ configurable: { thread_id: "old" } })) all.push(t);
    const ids = all.map((t) => t.config.configurable?.checkpoint_id);
    expect([...ids].sort().reverse()).toEqual(ids);
    expect(all.length).toBeGreaterThan(6);
    await saver.deleteThread("old");
    expect(await saver.getTuple(cfg)).toBeUndefined();
    const left = saver.db.prepare("SELECT count(*) AS n FROM checkpoints").get() as { n: number };
    expect(left.n).toBe(0);
  });

  it("recognises a grown list after a restart, by serializing the items it holds", async () => {
    const dir = tmp();
    const path = join(dir, "c.db");
    const cfg = { configurable: { thread_id: "t" }, recursionLimit: 1000 };
    const first = IncrementalSqliteSaver.fromConnString(path);
    await appendingGraph(first).invoke({ limit: 30 }, cfg);
    first.db.close();
    const second = IncrementalSqliteSaver.fromConnString(path);
    await appendingGraph(second).invoke({ limit: 35 }, cfg);
    const kinds = second.db
      .prepare(
        "SELECT kind, count(*) AS n FROM lgi_blobs WHERE channel = 'log' GROUP BY kind ORDER BY kind",
      )
      .all() as Array<{ kind: number; n: number }>;
    // Full copies are rare (the first one, then geometrically spaced); the rest are appends (of
    // items stored with the blob, or of the task writes that added them: kinds 1 and 4).
    const count = (...k: number[]) =>
      kinds.filter((x) => k.includes(x.kind)).reduce((a, x) => a + x.n, 0);
    const full = count(0, 3);
    const appends = count(1, 4);
    expect(full).toBeLessThanOrEqual(4);
    expect(appends).toBeGreaterThan(30);
    expect((await appendingGraph(second).getState(cfg)).values.log).toHaveLength(35);
    second.db.close();
  });

  it("reads a long list of messages back as messages from a fresh saver (items decoded together)", async () => {
    const State = Annotation.Root({
      messages: Annotation<BaseMessage[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
    });
    const path = join(tmp(), "c.db");
    const saver = IncrementalSqliteSaver.fromConnString(path);
    const graph = (checkpointer: IncrementalSqliteSaver) =>
      new StateGraph(State)
        .addNode("step", (s) => ({
          messages: [
            new AIMessage({ content: `reply ${s.messages.length}`, id: `m${s.messages.length}` }),
          ],
        }))
        .addEdge(START, "step")
        .addConditionalEdges("step", (s) => (s.messages.length >= 40 ? END : "step"))
        .compile({ checkpointer });
    const cfg = { configurable: { thread_id: "t" }, recursionLimit: 100 };
    const out = await graph(saver).invoke({ messages: [new HumanMessage("start")] }, cfg);
    saver.db.close();
    const fresh = IncrementalSqliteSaver.fromConnString(path);
    const state = await graph(fresh).getState(cfg);
    expect(state.values.messages).toHaveLength(40);
    expect(state.values.messages.every((m: unknown) => m instanceof BaseMessage)).toBe(true);
    expect(state.values.messages[0]).toBeInstanceOf(HumanMessage);
    expect(state.values.messages[39]).toBeInstanceOf(AIMessage);
    expect(state.values.messages.map((m: BaseMessage) => [m.getType(), m.content, m.id])).toEqual(
      out.messages.map((m: BaseMessage) => [m.getType(), m.content, m.id]),
    );
    fresh.db.close();
  });

  it("imports nothing outside its folder but LangGraph's checkpoint package, better-sqlite3 and Node", () => {
    const allowed =
      /^(?:node:|better-sqlite3$|@langchain\/langgraph-checkpoint$|@langchain\/core\/)/;
    for (const { file, spec, declared } of importsOf(
      fileURLToPath(new URL("../src/", import.meta.url)),
    )) {
      expect(spec, `${file} imports ${spec}`).toMatch(allowed);
      // ... and what it imports is what its package.json declares (a dependency or a peer).
      expect(declared, `${file} imports ${spec}, not in package.json`).toBe(true);
    }
  });
});
