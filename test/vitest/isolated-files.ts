/**
 * Test files that run in a process of their own (vitest `isolate: true`, the "isolated" project in
 * vitest.config.ts). Every other file runs in the "shared" project: `isolate: false`, several files
 * one after another in one worker process that keeps its module cache, so the agent stack
 * (LangChain, LangGraph, the sandbox host, src/) is imported once per worker instead of once per
 * file (1.5-2 CPU-s each).
 *
 * A file belongs here when it changes what later files in the same process would see: it edits
 * process.env (vi.stubEnv or assignments: src/config/env.ts and the caches keyed on it, such as
 * src/graphs/entries.ts's environment persistence, read it), fakes timers or globals, listens for
 * process warnings that another file's work could emit, or is about the sandbox's lockdown itself.
 * test/vitest/isolation.test.ts fails when a file that does such things is missing from this list.
 */
export const ISOLATED_FILES: readonly string[] = [
  // process.env edits (restored, but read by module-level caches of src/ on first use)
  "test/core/client-settings.test.ts",
  "test/chat/access.test.ts",
  "test/eval/run-direct.test.ts",
  "test/knowledge/cli-ingest.test.ts",
  "test/knowledge/hybrid-apps.test.ts",
  "test/memory/memory.test.ts",
  "test/memory/reflection-score.test.ts",
  "test/persistence/postgres.test.ts",
  "test/research/verify-answer.test.ts",
  "test/research/web.test.ts",
  "test/sandbox/lockdown-env.test.ts",
  "test/sandbox/pool.test.ts",
  // fake timers
  "test/knowledge/wikipedia.test.ts",
  // counts the process's warnings while it runs
  "test/sandbox/nested-agents.test.ts",
  // the lockdown configuration itself, attacked from inside the sandbox
  "test/sandbox/escape.test.ts",
];
