import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { afterEach, describe, expect, it } from "vitest";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import { openPersistence, type Persistence } from "../../src/persistence/index.ts";
import { stableNamespace } from "../../src/persistence/call-journal.ts";

const opened: Persistence[] = [];
function open(home: string, mustExist = false): Persistence {
  const p = openPersistence(home, { mustExist });
  opened.push(p);
  return p;
}
afterEach(() => {
  for (const p of opened.splice(0)) p.close();
});
const tmp = () => mkdtempSync(join(tmpdir(), "codehop-persist-"));

const key = (callIndex: number, argsJson = '["q"]') => ({
  threadId: "t1",
  checkpointNs: "manager_act:abc",
  step: 2,
  callIndex,
  tool: "wikipedia_search_agent",
  argsJson,
});

describe("SQLite call journal", () => {
  it("serves a recorded outcome only for the same tool and arguments", () => {
    const p = open(tmp());
    p.journal.put(key(0), { ok: true, value: { answer: "1889" } });
    p.journal.put(key(1), { ok: false, error: "page not found" });
    expect(p.journal.get(key(0))).toEqual({ ok: true, value: { answer: "1889" } });
    expect(p.journal.get(key(1))).toEqual({ ok: false, error: "page not found" });
    expect(p.journal.get(key(0, '["other"]'))).toBeUndefined();
    expect(p.journal.get({ ...key(0), tool: "search_wikipedia" })).toBeUndefined();
    expect(p.journal.get({ ...key(0), threadId: "t2" })).toBeUndefined();
    expect(p.journal.get(key(2))).toBeUndefined();
  });

  it("keeps a recorded call across a kill -9 of the writing process", () => {
    const home = tmp();
    // A separate process records a call and is SIGKILLed right after, like a crashed CLI run.
    const script = `
      import { openPersistence } from ${JSON.stringify(join(process.cwd(), "src/persistence/index.ts"))};
      const p = openPersistence(${JSON.stringify(home)});
      p.journal.put(${JSON.stringify(key(0))}, { ok: true, value: "Eiffel Tower: completed 1889" });
      process.kill(process.pid, "SIGKILL");
    `;
    const r = spawnSync(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", script],
      {
        encoding: "utf8",
      },
    );
    expect(r.signal).toBe("SIGKILL");
    const p = open(home);
    expect(p.journal.get(key(0))).toEqual({ ok: true, value: "Eiffel Tower: completed 1889" });
  });

  it("serves a replay fork (new task ids) from the namespace without task ids", () => {
    const p = open(tmp());
    const original = { ...key(0), checkpointNs: "act:0aa1|1|act:77b2" };
    p.journal.put(original, { ok: true, value: "recorded" });
    const forked = { ...original, checkpointNs: "act:f00d|1|act:beef" };
    // A normal run or a resume only gets the exact call back...
    expect(p.journal.get(forked)).toBeUndefined();
    // ...a replay also gets it at the same position after a fork (task ids differ).
    const replayJournal = p.journal.forReplay();
    expect(replayJournal.get(forked)).toEqual({ ok: true, value: "recorded" });
    // A different position (no "|1": another call of the action) is not served.
    expect(replayJournal.get({ ...original, checkpointNs: "act:f00d|act:beef" })).toBeUndefined();
    expect(p.journal.entries("t1").map((e) => e.checkpointNs)).toEqual(["act:0aa1|1|act:77b2"]);
    expect(stableNamespace("act:0aa1|1|act:77b2")).toBe("act|1|act");
  });
});

describe("checkpoint database location and errors", () => {
  it("creates <home>/checkpoints.db and reopens it", () => {
    const home = join(tmp(), "nested", "home");
    const p = open(home);
    expect(p.dbPath).toBe(join(home, "checkpoints.db"));
    p.threads.start("a", { question: "q?" });
    p.close();
    expect(open(home, true).threads.get("a")?.question).toBe("q?");
  });

  it("rejects a data directory that is a file", () => {
    const file = join(tmp(), "not-a-dir");
    writeFileSync(file, "x");
    const err = catchErr(() => open(file));
    expect(err.code).toBe(ErrorCodes.DB_INVALID);
    expect(err.message).toContain("is not a directory");
    expect(err.message).toContain("CODEHOP_HOME");
  });

  it("rejects a checkpoint file that is not SQLite", () => {
    const home = tmp();
    writeFileSync(join(home, "checkpoints.db"), "this is not a database, just text ".repeat(200));
    const err = catchErr(() => open(home));
    expect(err.code).toBe(ErrorCodes.DB_INVALID);
    expect(err.message).toContain(join(home, "checkpoints.db"));
  });

  it("refuses to invent a database when one must exist", () => {
    const err = catchErr(() => open(join(tmp(), "missing"), true));
    expect(err.code).toBe(ErrorCodes.DB_INVALID);
    expect(err.message).toContain("nothing has run there yet");
  });
});

describe("thread registry", () => {
  it("tracks status and answer, and lists graph-API threads from their checkpoints", async () => {
    const p = open(tmp());
    p.threads.start("app-thread", { question: "When?", options: { corpus: "/c.db" } });
    p.threads.finish("app-thread", "41 years");
    p.threads.start("failed-thread", { question: "Why?" });
    p.threads.fail("failed-thread", "endpoint down");

    // A thread created straight through LangGraph (no registry row) still shows up.
    const State = Annotation.Root({
      n: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
    });
    const graph = new StateGraph(State)
      .addNode("inc", () => ({ n: 1 }))
      .addEdge(START, "inc")
      .addEdge("inc", END)
      .compile({ checkpointer: p.checkpointer });
    await graph.invoke({ n: 1 }, { configurable: { thread_id: "api-thread" } });

    const list = p.threads.list();
    const byId = Object.fromEntries(list.map((t) => [t.threadId, t]));
    expect(byId["app-thread"]).toMatchObject({
      status: "done",
      answer: "41 years",
      options: { corpus: "/c.db" },
    });
    expect(byId["failed-thread"]).toMatchObject({ status: "failed", error: "endpoint down" });
    expect(byId["api-thread"]).toMatchObject({ status: "unknown", question: null });
    expect(byId["api-thread"].checkpoints).toBeGreaterThan(1);

    // Re-starting (resume) keeps the question and clears the error.
    p.threads.start("failed-thread");
    expect(p.threads.get("failed-thread")).toMatchObject({
      status: "running",
      question: "Why?",
      error: null,
    });
  });
});

function catchErr(fn: () => unknown): CodehopError {
  try {
    fn();
  } catch (err) {
    if (CodehopError.isInstance(err)) return err;
    throw err;
  }
  throw new Error("expected a CodehopError");
}

describe("thread ownership", () => {
  it("lists a running thread whose process died as interrupted", async () => {
    const p = open(tmp());
    p.threads.start("t");
    const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 30000)"]);
    await new Promise((r) => child.once("spawn", r));
    p.db
      .prepare("UPDATE codehop_threads SET pid = ?, pid_start = NULL WHERE thread_id = 't'")
      .run(child.pid);
    expect(p.threads.get("t")).toMatchObject({ status: "running", pid: child.pid });
    // The same pid with another start time is a different (reused) process: not our runner.
    p.db.prepare("UPDATE codehop_threads SET pid_start = '1' WHERE thread_id = 't'").run();
    expect(p.threads.get("t")?.status).toBe(
      process.platform === "linux" ? "interrupted" : "running",
    );
    p.db.prepare("UPDATE codehop_threads SET pid_start = NULL WHERE thread_id = 't'").run();
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    expect(p.threads.get("t")?.status).toBe("interrupted");
  });
});
