import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import Database from "better-sqlite3";
import { expect, it } from "vitest";
import { IncrementalSqliteSaver } from "../src/index.ts";
import { countRootCheckpoints } from "../src/thread-counts.ts";

const tmp = () => join(mkdtempSync(join(tmpdir(), "codehop-counts-")), "c.db");

/** A parent graph whose `inner` node is a subgraph: checkpoints in the root and in a namespace. */
function nested(checkpointer: any) {
  const State = Annotation.Root({
    n: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
  });
  const inner = new StateGraph(State)
    .addNode("bump", (s) => ({ n: s.n + 1 }))
    .addEdge(START, "bump")
    .addEdge("bump", END)
    .compile();
  return new StateGraph(State)
    .addNode("inner", inner)
    .addNode("step", (s) => ({ n: s.n + 1 }))
    .addEdge(START, "inner")
    .addEdge("inner", "step")
    .addConditionalEdges("step", (s) => (s.n >= 6 ? END : "inner"))
    .compile({ checkpointer });
}

const tables = (db: Database.Database) =>
  db.prepare("SELECT name, sql FROM sqlite_master ORDER BY name").all();

/** Root checkpoints of a thread as `list()` returns them (the saver's own reading). */
async function listed(saver: IncrementalSqliteSaver, thread: string): Promise<number> {
  let n = 0;
  for await (const t of saver.list({ configurable: { thread_id: thread, checkpoint_ns: "" } }))
    if ((t.config.configurable?.checkpoint_ns ?? "") === "") n++;
  return n;
}

it("counts root checkpoints from the tables as they are: the saver's counts, both table sets, one thread or all, nothing written", async () => {
  const path = tmp();
  // A thread of the official SqliteSaver, read in place by the saver; then threads of this saver.
  const official = SqliteSaver.fromConnString(path);
  await nested(official).invoke({}, { configurable: { thread_id: "old" } });
  official.db.close();
  const saver = IncrementalSqliteSaver.fromConnString(path);
  await nested(saver).invoke({}, { configurable: { thread_id: "a" } });
  await nested(saver).invoke({}, { configurable: { thread_id: "b" } });
  await nested(saver).invoke({}, { configurable: { thread_id: "old" } }); // continued
  const expected = saver.rootCheckpointCounts();
  saver.db.close();

  const db = new Database(path, { readonly: true });
  const before = tables(db);
  const counts = countRootCheckpoints(db);
  expect(counts).toEqual(expected);
  // Subgraph checkpoints are not counted; the thread continued from the official saver has both.
  const reopened = IncrementalSqliteSaver.fromConnString(path);
  for (const id of ["a", "b", "old"]) expect(counts.get(id)).toBe(await listed(reopened, id));
  expect(counts.get("old")).toBeGreaterThan(counts.get("a")!);
  reopened.db.close();
  expect(countRootCheckpoints(db, "a")).toEqual(new Map([["a", counts.get("a")]]));
  expect(countRootCheckpoints(db, "none")).toEqual(new Map());
  expect(tables(db)).toEqual(before);
  db.close();
});

it("counts a database with no saver tables as empty and one of the saver's first format before it is converted", () => {
  const empty = new Database(tmp());
  expect(countRootCheckpoints(empty)).toEqual(new Map());
  expect(tables(empty)).toEqual([]);
  empty.close();

  // The first format (thread and namespace in every checkpoint row), as the saver converts it.
  const path = tmp();
  const db = new Database(path);
  db.exec(`CREATE TABLE lgi_checkpoints (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL, parent_checkpoint_id TEXT, type TEXT NOT NULL, checkpoint BLOB NOT NULL,
    zip INTEGER NOT NULL, metadata TEXT NOT NULL, PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))`);
  const add = db.prepare(
    "INSERT INTO lgi_checkpoints VALUES (?, ?, ?, NULL, 'json', x'7b7d', 0, '{}')",
  );
  for (const [thread, ns, id] of [
    ["t1", "", "1"],
    ["t1", "", "2"],
    ["t1", "inner:x", "3"],
    ["t2", "", "4"],
  ])
    add.run(thread, ns, id);
  expect(countRootCheckpoints(db)).toEqual(
    new Map([
      ["t1", 2],
      ["t2", 1],
    ]),
  );
  db.close();
  // The saver converts the tables when it opens them, and counts the same.
  const saver = IncrementalSqliteSaver.fromConnString(path);
  expect(saver.rootCheckpointCounts()).toEqual(
    new Map([
      ["t1", 2],
      ["t2", 1],
    ]),
  );
  saver.db.close();
});
