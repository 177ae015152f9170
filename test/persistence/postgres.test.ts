import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import {
  openPersistenceFor,
  openPostgresPersistence,
  type PostgresPersistence,
} from "../../src/persistence/index.ts";
import { DEMO_ANSWERS, DEMO_QUESTIONS } from "../../src/apps/qa/demo-trajectories.ts";
import { runCli } from "../app/cli-helpers.ts";
import { useDemoWorld } from "../app/fixtures.ts";
import { describePersistenceConformance } from "./conformance.ts";
import { freshSchema, postgresMissing, useTestCluster } from "./postgres-cluster.ts";

const cluster = useTestCluster();
const world = useDemoWorld("codehop-pg-cli-");

describe.skipIf(postgresMissing)("postgres adapter", () => {
  describePersistenceConformance({
    name: "postgres",
    async open() {
      const location = { url: cluster().url, schema: freshSchema("conf") };
      return {
        persistence: await openPostgresPersistence(location),
        reopen: async () => openPostgresPersistence(location),
      };
    },
  });

  it("is what CODEHOP_DATABASE_URL selects, and names the database without its password", async () => {
    const url = cluster().url.replace("codehop@", "codehop:secret@");
    const p = await openPersistenceFor({ home: "/nonexistent", databaseUrl: url });
    try {
      expect(p.kind).toBe("postgres");
      expect(p.location).toContain("codehop:***@127.0.0.1");
      expect(p.location).not.toContain("secret");
    } finally {
      await p.close();
    }
  });

  it("is where the langgraph.json graphs journal the calls of runs that bring no journal", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-env-journal-"));
    vi.stubEnv("CODEHOP_DATABASE_URL", cluster().url);
    vi.stubEnv("CODEHOP_HOME", home);
    vi.resetModules(); // entries.ts opens the environment's persistence once per module instance
    try {
      const { environmentJournal } = await import("../../src/graphs/entries.ts");
      const key = {
        threadId: "studio-run",
        checkpointNs: "act:1",
        step: 1,
        callIndex: 0,
        tool: "search_wikipedia",
        argsJson: '["Rome"]',
      };
      await environmentJournal.put(key, { ok: true, value: "found" });
      const p = await openPostgresPersistence({ url: cluster().url });
      try {
        expect(await p.journal.get(key)).toMatchObject({ ok: true, value: "found" });
      } finally {
        await p.close();
      }
      // Nothing was written to the data directory's SQLite file.
      expect(existsSync(join(home, "checkpoints.db"))).toBe(false);
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it("fails with DB_INVALID naming the URL when the server cannot be reached", async () => {
    const url = cluster().url.replace(/:(\d+)\//, ":1/");
    const err = await openPersistenceFor({ home: "/tmp", databaseUrl: url }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.DB_INVALID);
    expect((err as Error).message).toContain("127.0.0.1:1");
    expect((err as Error).message).toContain("CODEHOP_DATABASE_URL");
  });

  it("rejects a URL that is not postgres:// with CONFIG_INVALID", async () => {
    const err = await openPersistenceFor({ home: "/tmp", databaseUrl: "mysql://x/y" }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.CONFIG_INVALID);
  });

  it("lets several processes set up the same schema at once", async () => {
    const location = { url: cluster().url, schema: freshSchema("race") };
    const opened: PostgresPersistence[] = await Promise.all(
      Array.from({ length: 4 }, () => openPostgresPersistence(location)),
    );
    await opened[0].threads.start("t", { question: "q" });
    expect((await opened[3].threads.get("t"))?.question).toBe("q");
    await Promise.all(opened.map((p) => p.close()));
  });

  it("keeps two forks of one checkpoint apart (channel versions never collide)", async () => {
    const { Annotation, END, START, StateGraph } = await import("@langchain/langgraph");
    const p = await openPostgresPersistence({ url: cluster().url, schema: freshSchema("fork") });
    try {
      const State = Annotation.Root({ word: Annotation<string> });
      const graph = new StateGraph(State)
        .addNode("echo", (s) => ({ word: `${s.word}!` }))
        .addEdge(START, "echo")
        .addEdge("echo", END)
        .compile({ checkpointer: p.checkpointer });
      const cfg = { configurable: { thread_id: "f" } };
      await graph.invoke({ word: "a" }, cfg);
      const history = [];
      for await (const s of graph.getStateHistory(cfg)) history.push(s);
      const input = history.find((s) => s.next.includes("echo"))!;
      // Two forks edit the same checkpoint differently: each must read back its own value.
      const forkB = await graph.updateState(input.config, { word: "b" });
      const forkC = await graph.updateState(input.config, { word: "c" });
      expect((await graph.getState(forkB)).values.word).toBe("b");
      expect((await graph.getState(forkC)).values.word).toBe("c");
      expect((await graph.invoke(null, forkB)).word).toBe("b!");
      expect((await graph.invoke(null, forkC)).word).toBe("c!");
    } finally {
      await p.close();
    }
  });

  it(
    "codehop ask / threads / history with CODEHOP_DATABASE_URL keep the run in Postgres, not in CODEHOP_HOME",
    { timeout: 120_000 },
    async () => {
      const schemaUrl = await cluster().createDatabase("cli_runs");
      const env = world.cliEnv({ CODEHOP_DATABASE_URL: schemaUrl });
      const asked = await runCli(
        ["ask", DEMO_QUESTIONS.towers, "--thread", "pg-1", "--corpus", world.corpus, "--json"],
        env,
      );
      expect(asked.code, asked.stderr).toBe(0);
      expect(JSON.parse(asked.stdout)).toMatchObject({
        answer: DEMO_ANSWERS.towers,
        thread_id: "pg-1",
        checkpoint_db: expect.stringContaining("postgres://codehop@127.0.0.1"),
      });
      const listed = await runCli(["threads", "--json"], env);
      expect(JSON.parse(listed.stdout)).toEqual([
        expect.objectContaining({ threadId: "pg-1", status: "done", answer: DEMO_ANSWERS.towers }),
      ]);
      // Nothing went to the SQLite file of CODEHOP_HOME.
      const sqlite = await runCli(["threads", "--json"], world.cliEnv());
      expect(sqlite.stdout).not.toContain("pg-1");
      const history = await runCli(["history", "pg-1", "--json"], env);
      expect(history.code, history.stderr).toBe(0);
      expect(JSON.parse(history.stdout).length).toBeGreaterThan(3);
    },
  );
});
