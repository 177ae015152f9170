/**
 * Threads written by earlier codehop versions (test/fixtures/old-checkpoints, see its README: made
 * by the CLI of revision 4fcd027 — before the stored record / computed view change, with the
 * official SqliteSaver's tables — and of revision 159df5a — IncrementalSqliteSaver's first row
 * format) still open with today's code: listed, shown, their history read, the crashed one resumed
 * without repeating its finished sub-agent call, and a new question asked on the finished one.
 * Each fixture is copied first: the tests never write to it.
 */
import { copyFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { beforeAll, describe, expect, it } from "vitest";
import { DEMO_ANSWERS, DEMO_QUESTIONS, demoRules } from "../../src/apps/qa/demo-trajectories.ts";
import { createManagerGraph, MANAGER_RECURSION_LIMIT } from "../../src/apps/qa/team.ts";
import { openPersistence } from "../../src/persistence/index.ts";
import { trajectoryResponder } from "../../src/testing/scripted-openai-server.ts";
import { runCli } from "./cli-helpers.ts";
import { readThread, useDemoWorld } from "./fixtures.ts";

const FIXTURES = join(process.cwd(), "test/fixtures/old-checkpoints");

/** The tables of a checkpoint database. */
function tablesOf(path: string): string[] {
  const db = new Database(path, { readonly: true });
  try {
    return (
      db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as {
        name: string;
      }[]
    ).map((t) => t.name);
  } finally {
    db.close();
  }
}

function describeOldFixture(name: string, revision: string, tables: string[], after: string[]) {
  describe(`checkpoints of codehop ${revision} (${name})`, { timeout: 120_000 }, () => {
    const fixture = join(FIXTURES, name);
    const world = useDemoWorld(`codehop-old-${name}-`, {
      responder: () => trajectoryResponder(demoRules()),
    });
    const env = () => world.cliEnv({ CODEHOP_MAX_RETRIES: "0" });
    beforeAll(() => {
      copyFileSync(join(fixture, "checkpoints.db"), join(world.home, "checkpoints.db"));
    });

    it("the fixture is what its README says: that revision's tables", () => {
      const generated = JSON.parse(readFileSync(join(fixture, "generated.json"), "utf8"));
      expect(generated.revision.startsWith(revision)).toBe(true);
      expect(tablesOf(join(fixture, "checkpoints.db"))).toEqual(tables);
    });

    it("codehop threads lists them: the finished one with its answer, the killed one interrupted", async () => {
      const r = await runCli(["threads", "--json"], env());
      expect(r.code).toBe(0);
      const byId = Object.fromEntries(JSON.parse(r.stdout).map((t: any) => [t.threadId, t]));
      expect(byId["old-done"]).toMatchObject({
        status: "done",
        question: DEMO_QUESTIONS.plywood,
        answer: DEMO_ANSWERS.plywood,
      });
      expect(byId["old-done"].checkpoints).toBeGreaterThan(0);
      expect(byId["old-crashed"]).toMatchObject({
        status: "interrupted",
        question: DEMO_QUESTIONS.towers,
        answer: null,
      });
      // Listing reads only: the file keeps that revision's tables until a command opens its
      // checkpoints (below).
      expect(tablesOf(join(world.home, "checkpoints.db"))).toEqual(tables);
    });

    it("codehop show and codehop history read the old state: agents labelled at every depth", async () => {
      const shown = await runCli(["show", "old-done", "--json"], env());
      expect(shown.code).toBe(0);
      const tree = JSON.parse(shown.stdout);
      expect(tree).toMatchObject({ name: "manager", answer: DEMO_ANSWERS.plywood });
      const calls = tree.steps[0].children;
      expect(calls.map((c: any) => c.name)).toEqual(["wikipedia_search", "wikipedia_search"]);
      expect(calls[0].steps[1].children[0]).toMatchObject({ name: "page_search", phase: "done" });

      const listed = await runCli(["history", "old-done", "--all", "--json"], env());
      expect(listed.code).toBe(0);
      const checkpoints = JSON.parse(listed.stdout);
      expect(new Set(checkpoints.map((c: any) => c.agent))).toEqual(
        new Set(["manager", "wikipedia_search", "page_search"]),
      );
      expect(checkpoints[0].summary).toContain(DEMO_ANSWERS.plywood);
      // Opening its checkpoints left the tables today's code uses (a first-format database is
      // converted).
      expect(tablesOf(join(world.home, "checkpoints.db"))).toEqual(after);
    });

    it("codehop resume finishes the killed thread; its finished sub-agent call comes from the old journal", async () => {
      const resumed = await runCli(
        ["resume", "old-crashed", "--corpus", world.corpus, "--json"],
        env(),
      );
      expect(resumed.stderr).not.toContain("Error:");
      expect(resumed.code).toBe(0);
      expect(JSON.parse(resumed.stdout)).toMatchObject({
        answer: DEMO_ANSWERS.towers,
        thread_id: "old-crashed",
        status: "final_answer",
      });
      // The Eiffel Tower call finished before the kill: not asked again. The manager's first
      // action was checkpointed: only its last one is asked for.
      expect(world.server.requestsFor("wiki:eiffel")).toHaveLength(0);
      expect(world.server.requestsFor("manager:towers")).toHaveLength(1);
      await readThread(world.home, "old-crashed", (state) => {
        expect(state.steps[0].toolCalls.map((c: any) => [c.callIndex, c.fromJournal])).toEqual([
          [0, true],
          [1, false],
        ]);
      });
      const listed = JSON.parse((await runCli(["threads", "--json"], env())).stdout);
      expect(listed.find((t: any) => t.threadId === "old-crashed")).toMatchObject({
        status: "done",
        answer: DEMO_ANSWERS.towers,
      });
    });

    it("a new question on the old finished thread (through the graph) starts a new task there", async () => {
      const p = openPersistence(world.home);
      try {
        const graph = createManagerGraph({ checkpointer: p.checkpointer });
        const config = {
          recursionLimit: MANAGER_RECURSION_LIMIT,
          configurable: {
            thread_id: "old-done",
            model: "scripted",
            modelSettings: { baseURL: world.server.baseURL, apiKey: "k" },
            corpus: world.corpus,
            journal: p.journal,
          },
        };
        const result = (await graph.invoke({ question: DEMO_QUESTIONS.ming }, config)) as any;
        expect(result).toMatchObject({ answer: DEMO_ANSWERS.ming, taskEpoch: 1 });
        // The record holds the new task's steps only, none of the old question's.
        expect(result.steps.length).toBeGreaterThan(0);
        expect(JSON.stringify(result.steps)).not.toContain("plywood");
      } finally {
        p.close();
      }
    });
  });
}

const CURRENT = [
  "codehop_call_journal",
  "codehop_threads",
  "lgi_blobs",
  "lgi_checkpoints",
  "lgi_namespaces",
  "lgi_writes",
];
// The official SqliteSaver's tables are read in place (and kept): threads continued from them are
// written in IncrementalSqliteSaver's tables.
describeOldFixture(
  "official-saver",
  "4fcd027",
  ["checkpoints", "codehop_call_journal", "codehop_threads", "writes"],
  ["checkpoints", ...CURRENT, "writes"],
);
describeOldFixture(
  "incremental-first",
  "159df5a",
  ["codehop_call_journal", "codehop_threads", "lgi_blobs", "lgi_checkpoints", "lgi_writes"],
  CURRENT,
);
