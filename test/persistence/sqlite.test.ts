import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import {
  openPersistence,
  type SqlitePersistence as Persistence,
} from "../../src/persistence/index.ts";
import { describePersistenceConformance } from "./conformance.ts";

const tmp = () => mkdtempSync(join(tmpdir(), "codehop-persist-"));

describePersistenceConformance({
  name: "sqlite",
  async open() {
    const home = tmp();
    return { persistence: openPersistence(home), reopen: async () => openPersistence(home) };
  },
});

const opened: Persistence[] = [];
function open(home: string, mustExist = false): Persistence {
  const p = openPersistence(home, { mustExist });
  opened.push(p);
  return p;
}
afterEach(() => {
  for (const p of opened.splice(0)) p.close();
});

const key = (callIndex: number, argsJson = '["q"]') => ({
  threadId: "t1",
  checkpointNs: "manager_act:abc",
  step: 2,
  callIndex,
  tool: "wikipedia_search_agent",
  argsJson,
});

describe("SQLite adapter: durability", () => {
  it("keeps a recorded call across a kill -9 of the writing process", async () => {
    const home = tmp();
    // A separate process records a call and is SIGKILLed right after, like a crashed CLI run.
    const script = `
      import { openPersistence } from ${JSON.stringify(join(process.cwd(), "src/persistence/index.ts"))};
      const p = openPersistence(${JSON.stringify(home)});
      await p.journal.put(${JSON.stringify(key(0))}, { ok: true, value: "Eiffel Tower: completed 1889" });
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
    expect(await p.journal.get(key(0))).toEqual({
      ok: true,
      value: "Eiffel Tower: completed 1889",
    });
  });
});

describe("checkpoint database location and errors", () => {
  it("creates <home>/checkpoints.db and reopens it", async () => {
    const home = join(tmp(), "nested", "home");
    const p = open(home);
    expect(p.dbPath).toBe(join(home, "checkpoints.db"));
    await p.threads.start("a", { question: "q?" });
    p.close();
    expect((await open(home, true).threads.get("a"))?.question).toBe("q?");
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

describe("thread ownership", () => {
  it("lists a running thread whose process died as interrupted", async () => {
    const p = open(tmp());
    await p.threads.start("t");
    const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 30000)"]);
    await new Promise((r) => child.once("spawn", r));
    p.db
      .prepare("UPDATE codehop_threads SET pid = ?, pid_start = NULL WHERE thread_id = 't'")
      .run(child.pid);
    expect(await p.threads.get("t")).toMatchObject({ status: "running", pid: child.pid });
    // The same pid with another start time is a different (reused) process: not our runner.
    p.db.prepare("UPDATE codehop_threads SET pid_start = '1' WHERE thread_id = 't'").run();
    expect((await p.threads.get("t"))?.status).toBe(
      process.platform === "linux" ? "interrupted" : "running",
    );
    p.db.prepare("UPDATE codehop_threads SET pid_start = NULL WHERE thread_id = 't'").run();
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    expect((await p.threads.get("t"))?.status).toBe("interrupted");
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
