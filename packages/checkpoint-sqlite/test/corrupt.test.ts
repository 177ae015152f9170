/**
 * Damaged or crafted database files: every corruption the saver meets is a CheckpointCorruptError
 * naming the thread, table and row (never a zlib or JSON message, never the stored bytes), found
 * with bounded work (a deflate bomb stops at maxInflateBytes, a chain that loops stops at once),
 * and another thread of the same file stays readable.
 */
import { execFile } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CheckpointCorruptError, IncrementalSqliteSaver } from "../src/index.ts";
import { NOT_DEFLATE, deflateBomb } from "./crafted.ts";

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), "codehop-lgi-corrupt-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const original = join(dir, "original.db");

/** A loop that appends a 2 KB record per step, counts, and notes: append chains, inline values, writes. */
function graph(checkpointer: IncrementalSqliteSaver) {
  const State = Annotation.Root({
    log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
    n: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
    note: Annotation<string>({ reducer: (_a, b) => b, default: () => "" }),
  });
  return new StateGraph(State)
    .addNode("step", (s) => ({ log: [`record ${s.n} `.padEnd(2048, "x")], n: s.n + 1 }))
    .addNode("label", (s) => ({ note: `at ${s.n}` }))
    .addEdge(START, "step")
    .addEdge("step", "label")
    .addConditionalEdges("label", (s) => (s.n >= 12 ? END : "step"))
    .compile({ checkpointer });
}

/** Everything a reader of a thread asks: its latest checkpoint, and every checkpoint listed. */
async function readAll(saver: IncrementalSqliteSaver, thread: string) {
  const config = { configurable: { thread_id: thread } };
  const latest = await saver.getTuple(config);
  const listed = [];
  for await (const t of saver.list(config)) listed.push(t.checkpoint.channel_values);
  return { latest: latest?.checkpoint.channel_values, listed };
}

let goodState: Awaited<ReturnType<typeof readAll>>;

beforeAll(async () => {
  const saver = IncrementalSqliteSaver.fromConnString(original);
  for (const thread of ["good", "bad"])
    await graph(saver).invoke({}, { configurable: { thread_id: thread }, recursionLimit: 100 });
  goodState = await readAll(saver, "good");
  saver.db.close();
});

/** A copy of the two-thread file with `damage` done to it (the bad thread's rows, by its ns_id). */
function damaged(name: string, damage: (db: Database.Database, ns: number) => void): string {
  const path = join(dir, `${name}.db`);
  copyFileSync(original, path);
  const db = new Database(path);
  const { ns_id } = db
    .prepare("SELECT ns_id FROM lgi_namespaces WHERE thread_id = 'bad' AND checkpoint_ns = ''")
    .get() as { ns_id: number };
  damage(db, ns_id);
  db.close();
  return path;
}

const latestId = (db: Database.Database, ns: number) =>
  (
    db
      .prepare(
        "SELECT checkpoint_id FROM lgi_checkpoints WHERE ns_id = ? ORDER BY checkpoint_id DESC LIMIT 1",
      )
      .get(ns) as { checkpoint_id: string }
  ).checkpoint_id;

/**
 * Reads the bad thread of `path` with a fresh saver: the error must be a CheckpointCorruptError for
 * `table` saying `problem`, within a bounded time; then the good thread reads as it did.
 */
async function expectCorrupt(path: string, table: string, problem: RegExp, hidden?: string) {
  const saver = IncrementalSqliteSaver.fromConnString(path);
  try {
    const started = process.cpuUsage();
    const err = await readAll(saver, "bad").then(
      () => undefined,
      (e: unknown) => e,
    );
    // CPU time, not wall: a loaded machine slows the read, it does not make it do more work.
    const used = process.cpuUsage(started);
    const ms = (used.user + used.system) / 1000;
    expect(CheckpointCorruptError.isInstance(err), String(err)).toBe(true);
    const e = err as CheckpointCorruptError;
    expect(e.code).toBe("CODEHOP_CHECKPOINT_CORRUPT");
    expect(e.thread).toBe("bad");
    expect(e.table).toBe(table);
    expect(e.problem).toMatch(problem);
    expect(e.message).toMatch(
      new RegExp(
        `^Corrupt checkpoint data of thread "bad": table ${table}, row .+\\[CODEHOP_CHECKPOINT_CORRUPT\\]$`,
      ),
    );
    expect(e.message).not.toMatch(/\n|at .+\.ts:\d+/);
    if (hidden) expect(e.message).not.toContain(hidden);
    // Bounded work: a loop or a bomb would take minutes of CPU (or never end).
    expect(ms).toBeLessThan(10_000);
    // The other thread of the file is untouched, and reads back whole.
    expect(await readAll(saver, "good")).toEqual(goodState);
  } finally {
    saver.db.close();
  }
}

describe("corrupt stored data", () => {
  it("a deflate bomb in a checkpoint record stops at maxInflateBytes", async () => {
    const path = damaged("record-bomb", (db, ns) =>
      db
        .prepare(
          "UPDATE lgi_checkpoints SET zip = 1, checkpoint = ? WHERE ns_id = ? AND checkpoint_id = ?",
        )
        .run(deflateBomb(1 << 30), ns, latestId(db, ns)),
    );
    await expectCorrupt(path, "lgi_checkpoints", /inflate past 67108864 bytes .*maxInflateBytes/);
  });

  it("a deflate bomb in a writes row stops at maxInflateBytes", async () => {
    const path = damaged("writes-bomb", (db, ns) =>
      db
        .prepare("UPDATE lgi_writes SET zip = 1, writes = ? WHERE ns_id = ?")
        .run(deflateBomb(1 << 28), ns),
    );
    await expectCorrupt(path, "lgi_writes", /inflate past 67108864 bytes/);
  });

  it("a deflate bomb in a value row stops at maxInflateBytes", async () => {
    const path = damaged("blob-bomb", (db, ns) =>
      db
        .prepare(
          "UPDATE lgi_blobs SET kind = 0, zip = 1, value = ?, base_version = NULL WHERE ns_id = ?",
        )
        .run(deflateBomb(1 << 28), ns),
    );
    await expectCorrupt(path, "lgi_blobs", /inflate past 67108864 bytes/);
  });

  it("a chain of appends that points at itself ends at once, whatever length it claims", async () => {
    const path = damaged("chain-loop", (db, ns) => {
      const changed = db
        .prepare(
          "UPDATE lgi_blobs SET base_version = version, chain = 1000000000 WHERE ns_id = ? AND kind IN (1, 4) AND base_version IS NOT NULL",
        )
        .run(ns);
      expect(changed.changes).toBeGreaterThan(0);
    });
    await expectCorrupt(path, "lgi_blobs", /chain of appends loops back to itself/);
  });

  it("a chain of appends longer than its rows say is refused", async () => {
    const path = damaged("chain-length", (db, ns) => {
      db.prepare("UPDATE lgi_blobs SET chain = 0 WHERE ns_id = ? AND kind IN (1, 4)").run(ns);
    });
    await expectCorrupt(
      path,
      "lgi_blobs",
      /chain of appends is longer than the 1 rows it can have/,
    );
  });

  it("checkpoints whose parents point at themselves end at once (records of earlier versions: changes from the parent)", async () => {
    const path = damaged("parent-loop", (db, ns) => {
      const delta = { v: 4, ts: "2026-11-24T00:00:00.000Z", base: 1, cv: {}, vs: {} };
      db.prepare(
        "UPDATE lgi_checkpoints SET zip = 0, checkpoint = ? WHERE ns_id = ? AND checkpoint_id = ?",
      ).run(Buffer.from(JSON.stringify(delta)), ns, latestId(db, ns));
      db.prepare(
        "UPDATE lgi_checkpoints SET parent_checkpoint_id = checkpoint_id WHERE ns_id = ?",
      ).run(ns);
    });
    await expectCorrupt(path, "lgi_checkpoints", /loops back to it/);
  });

  it("a record naming itself, or a record not stored alone, as its keyframe", async () => {
    const keyframeHead = (id: string) => {
      const head = Buffer.alloc(6 + Buffer.byteLength(id));
      head.writeUInt8(1, 0);
      head.writeUInt8(Buffer.byteLength(id), 1);
      head.write(id, 2);
      return Buffer.concat([head, NOT_DEFLATE]);
    };
    const self = damaged("keyframe-self", (db, ns) => {
      const id = latestId(db, ns);
      db.prepare(
        "UPDATE lgi_checkpoints SET zip = 3, checkpoint = ? WHERE ns_id = ? AND checkpoint_id = ?",
      ).run(keyframeHead(id), ns, id);
    });
    await expectCorrupt(self, "lgi_checkpoints", /keyframe record is itself/);
    const chained = damaged("keyframe-chain", (db, ns) => {
      const [a, b] = (
        db
          .prepare(
            "SELECT checkpoint_id FROM lgi_checkpoints WHERE ns_id = ? ORDER BY checkpoint_id DESC LIMIT 2",
          )
          .all(ns) as Array<{ checkpoint_id: string }>
      ).map((r) => r.checkpoint_id);
      const set = db.prepare(
        "UPDATE lgi_checkpoints SET zip = 3, checkpoint = ? WHERE ns_id = ? AND checkpoint_id = ?",
      );
      set.run(keyframeHead(b!), ns, a);
      set.run(keyframeHead(a!), ns, b);
    });
    await expectCorrupt(chained, "lgi_checkpoints", /is missing, or is not stored alone/);
  });

  it("garbage in place of deflate data", async () => {
    const path = damaged("garbage-deflate", (db, ns) =>
      db
        .prepare(
          "UPDATE lgi_checkpoints SET zip = 1, checkpoint = ? WHERE ns_id = ? AND checkpoint_id = ?",
        )
        .run(NOT_DEFLATE, ns, latestId(db, ns)),
    );
    await expectCorrupt(path, "lgi_checkpoints", /not valid deflate data/);
  });

  it("a record that is not JSON: the message names it without quoting it", async () => {
    const path = damaged("garbage-json", (db, ns) =>
      db
        .prepare(
          "UPDATE lgi_checkpoints SET zip = 0, checkpoint = ? WHERE ns_id = ? AND checkpoint_id = ?",
        )
        .run(Buffer.from('{"SECRET-STORED-BYTES": \u0007'), ns, latestId(db, ns)),
    );
    await expectCorrupt(path, "lgi_checkpoints", /record does not parse/, "SECRET-STORED-BYTES");
  });

  it("a fake dictionary header on writes rows (rows that do not exist)", async () => {
    const path = damaged("fake-dictionary", (db, ns) => {
      const header = Buffer.alloc(5 + 6 * 3);
      header.writeUInt8(3, 0);
      for (let i = 0; i < 3; i++) header.writeUIntLE(900_000 + i, 1 + 6 * i, 6);
      header.writeUInt32LE(0xdeadbeef, 19);
      db.prepare("UPDATE lgi_writes SET zip = 3, writes = ? WHERE ns_id = ?").run(
        Buffer.concat([header, NOT_DEFLATE]),
        ns,
      );
    });
    await expectCorrupt(path, "lgi_writes", /named as a dictionary row but is missing/);
  });

  it("a dictionary header cut short, and a record claiming 200 ancestors", async () => {
    const cut = damaged("cut-header", (db, ns) =>
      db
        .prepare("UPDATE lgi_writes SET zip = 3, writes = ? WHERE ns_id = ?")
        .run(Buffer.from([200, 1, 2]), ns),
    );
    await expectCorrupt(cut, "lgi_writes", /dictionary header is cut short/);
    const ancestors = damaged("fake-ancestors", (db, ns) => {
      const head = Buffer.alloc(5);
      head.writeUInt8(200, 0);
      db.prepare(
        "UPDATE lgi_checkpoints SET zip = 2, checkpoint = ? WHERE ns_id = ? AND checkpoint_id = ?",
      ).run(Buffer.concat([head, NOT_DEFLATE]), ns, latestId(db, ns));
    });
    await expectCorrupt(ancestors, "lgi_checkpoints", /deflated against 200 ancestor records/);
  });

  it("a writes row whose packed lengths run past its bytes", async () => {
    const path = damaged("packed-lengths", (db, ns) => {
      const packed = Buffer.alloc(4 + 16);
      packed.writeUInt32LE(1, 0);
      packed.writeUInt32LE(0xffffff, 4 + 12);
      db.prepare("UPDATE lgi_writes SET zip = 0, writes = ? WHERE ns_id = ?").run(packed, ns);
    });
    await expectCorrupt(path, "lgi_writes", /more bytes than they hold/);
  });

  it("verifyThread names every damaged row of a thread once, and nothing of a whole one", async () => {
    const path = damaged("verify", (db, ns) => {
      db.prepare(
        "UPDATE lgi_checkpoints SET zip = 1, checkpoint = ? WHERE ns_id = ? AND checkpoint_id = ?",
      ).run(NOT_DEFLATE, ns, latestId(db, ns));
      db.prepare(
        "UPDATE lgi_writes SET zip = 1, writes = ? WHERE row_id = (SELECT min(row_id) FROM lgi_writes WHERE ns_id = ?)",
      ).run(deflateBomb(1 << 28), ns);
    });
    const saver = IncrementalSqliteSaver.fromConnString(path);
    try {
      expect(saver.threadIds()).toEqual(["bad", "good"]);
      expect(await saver.verifyThread("good")).toEqual([]);
      const found = await saver.verifyThread("bad");
      expect(found.map((e) => [e.thread, e.table]).sort()).toEqual([
        ["bad", "lgi_checkpoints"],
        ["bad", "lgi_writes"],
      ]);
      expect(found.every((e) => e.code === "CODEHOP_CHECKPOINT_CORRUPT")).toBe(true);
    } finally {
      saver.db.close();
    }
  });

  // Two `tsx` processes: slow to start on a loaded machine, hence the timeout.
  it(
    "memory: a 1 GiB bomb costs at most maxInflateBytes more than a good read (a process of its own)",
    { timeout: 180_000 },
    async () => {
      const path = damaged("memory-bomb", (db, ns) =>
        db
          .prepare(
            "UPDATE lgi_checkpoints SET zip = 1, checkpoint = ? WHERE ns_id = ? AND checkpoint_id = ?",
          )
          .run(deflateBomb(1 << 30), ns, latestId(db, ns)),
      );
      const script = join(dir, "read.mts");
      const saverUrl = new URL("../src/index.ts", import.meta.url).href;
      writeFileSync(
        script,
        `import { IncrementalSqliteSaver } from ${JSON.stringify(saverUrl)};
const saver = IncrementalSqliteSaver.fromConnString(process.argv[2]);
const started = process.cpuUsage();
let error = null;
try { await saver.getTuple({ configurable: { thread_id: process.argv[3] } }); } catch (e) { error = e.message; }
const used = process.cpuUsage(started);
console.log(JSON.stringify({ error, ms: (used.user + used.system) / 1000, maxRssKb: process.resourceUsage().maxRSS }));`,
      );
      const measure = async (thread: string) =>
        JSON.parse(
          (
            await run(process.execPath, ["--import", "tsx", script, path, thread], {
              cwd: fileURLToPath(new URL("..", import.meta.url)),
              timeout: 150_000,
            })
          ).stdout,
        ) as { error: string | null; ms: number; maxRssKb: number };
      const [good, bad] = await Promise.all([measure("good"), measure("bad")]);
      expect(good.error).toBeNull();
      expect(bad.error).toContain("CODEHOP_CHECKPOINT_CORRUPT");
      // 64 MiB of inflated output, plus zlib's own buffers; unbounded, this read held 1 GiB.
      expect(bad.maxRssKb - good.maxRssKb).toBeLessThan(200 * 1024);
      expect(bad.ms).toBeLessThan(10_000);
    },
  );
});
