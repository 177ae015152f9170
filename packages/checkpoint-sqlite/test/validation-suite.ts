import * as vitest from "vitest";

/**
 * LangGraph's own conformance suite for checkpointers (@langchain/langgraph-checkpoint-validation,
 * the library form: its CLI is broken in 1.1.1). The suite calls vitest's globals, which this
 * project does not turn on: they are handed to it here, before it registers its tests. Each
 * saver's test file (SQLite, Postgres) calls the returned `validate`.
 */
export async function checkpointValidation() {
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
  return (await import("@langchain/langgraph-checkpoint-validation")).validate;
}
