import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as vitest from "vitest";
import { IncrementalSqliteSaver } from "../../src/checkpoint-sqlite/index.ts";

// LangGraph's own conformance suite for checkpointers (@langchain/langgraph-checkpoint-validation,
// the library form: its CLI is broken in 1.1.1). The suite calls vitest's globals, which this
// project does not turn on: they are handed to it here, before it registers its tests.
Object.assign(globalThis, {
  describe: vitest.describe,
  it: vitest.it,
  test: vitest.test,
  expect: vitest.expect,
  beforeAll: vitest.beforeAll,
  afterAll: vitest.afterAll,
  beforeEach: vitest.beforeEach,
  afterEach: vitest.afterEach,
});

const { validate } = await import("@langchain/langgraph-checkpoint-validation");

const dirs = new Map<IncrementalSqliteSaver, string>();

validate({
  checkpointerName: "codehop IncrementalSqliteSaver",
  createCheckpointer() {
    const dir = mkdtempSync(join(tmpdir(), "codehop-lgi-"));
    const saver = IncrementalSqliteSaver.fromConnString(join(dir, "checkpoints.db"));
    dirs.set(saver, dir);
    return saver;
  },
  destroyCheckpointer(saver) {
    saver.db.close();
    rmSync(dirs.get(saver)!, { recursive: true, force: true });
    dirs.delete(saver);
  },
});
