import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { afterEach, describe, expect, it } from "vitest";
import {
  type CallKey,
  getThreadRecord,
  putThreadRecord,
  stableNamespace,
} from "../../src/core/journal.ts";
import type { Persistence } from "../../src/persistence/port.ts";

/**
 * The persistence port's conformance suite: what every adapter (SQLite, Postgres ...) must do, as
 * the run lifecycle and the act node rely on it. An adapter's test file calls it with a factory that
 * opens a fresh, empty store each time (and, for `reopen`, the same store again).
 */
export interface PersistenceFactory {
  /** A human name for the describe block ("sqlite", "postgres"). */
  name: string;
  /** Opens a new empty store; `reopen` opens the same store again from a second connection. */
  open(): Promise<{ persistence: Persistence; reopen(): Promise<Persistence> }>;
}

const key = (callIndex: number, argsJson = '["q"]'): CallKey => ({
  threadId: "t1",
  checkpointNs: "act:abc",
  step: 2,
  callIndex,
  tool: "wikipedia_search_agent",
  argsJson,
});

/** Registers the suite for one adapter. */
export function describePersistenceConformance(factory: PersistenceFactory): void {
  describe(`persistence port conformance: ${factory.name}`, () => {
    const opened: Persistence[] = [];
    afterEach(async () => {
      for (const p of opened.splice(0)) await p.close();
    });
    const open = async () => {
      const store = await factory.open();
      opened.push(store.persistence);
      return {
        p: store.persistence,
        reopen: async () => {
          const again = await store.reopen();
          opened.push(again);
          return again;
        },
      };
    };

    describe("call journal", () => {
      it("serves a recorded outcome only for the same thread, position, tool and arguments", async () => {
        const { p } = await open();
        await p.journal.put(key(0), { ok: true, value: { answer: "1889" } });
        await p.journal.put(key(1), { ok: false, error: "page not found" });
        expect(await p.journal.get(key(0))).toEqual({ ok: true, value: { answer: "1889" } });
        expect(await p.journal.get(key(1))).toEqual({ ok: false, error: "page not found" });
        expect(await p.journal.get(key(0, '["other"]'))).toBeUndefined();
        expect(await p.journal.get({ ...key(0), tool: "search_wikipedia" })).toBeUndefined();
        expect(await p.journal.get({ ...key(0), threadId: "t2" })).toBeUndefined();
        expect(await p.journal.get({ ...key(0), step: 3 })).toBeUndefined();
        expect(await p.journal.get(key(2))).toBeUndefined();
      });

      it("keeps what it recorded for another connection (durable when put resolves)", async () => {
        const { p, reopen } = await open();
        await p.journal.put(key(0), {
          ok: true,
          value: "recorded",
          reports: [{ sources: [{ title: "Rome" }] }],
        });
        const again = await reopen();
        expect(await again.journal.get(key(0))).toEqual({
          ok: true,
          value: "recorded",
          reports: [{ sources: [{ title: "Rome" }] }],
        });
      });

      it("keeps each task's calls apart by task epochs (trailing zeros do not count)", async () => {
        const { p } = await open();
        await p.journal.put({ ...key(0), taskEpochs: [0] }, { ok: true, value: "task 1" });
        await p.journal.put({ ...key(0), taskEpochs: [1] }, { ok: true, value: "task 2" });
        expect(await p.journal.get({ ...key(0), taskEpochs: [] })).toEqual({
          ok: true,
          value: "task 1",
        });
        expect(await p.journal.get({ ...key(0), taskEpochs: [1, 0] })).toEqual({
          ok: true,
          value: "task 2",
        });
        expect(await p.journal.get({ ...key(0), taskEpochs: [2] })).toBeUndefined();
      });

      it("serves a replay fork (new task ids) from the namespace without task ids, and only a replay", async () => {
        const { p } = await open();
        const original = { ...key(0), checkpointNs: "act:0aa1|1|act:77b2" };
        await p.journal.put(original, { ok: true, value: "recorded" });
        const forked = { ...original, checkpointNs: "act:f00d|1|act:beef" };
        expect(await p.journal.get(forked)).toBeUndefined();
        const replayJournal = p.journal.forReplay();
        expect(await replayJournal.get(forked)).toEqual({ ok: true, value: "recorded" });
        expect(
          await replayJournal.get({ ...original, checkpointNs: "act:f00d|act:beef" }),
        ).toBeUndefined();
        expect((await p.journal.entries("t1")).map((e) => e.checkpointNs)).toEqual([
          "act:0aa1|1|act:77b2",
        ]);
        expect(stableNamespace("act:0aa1|1|act:77b2")).toBe("act|1|act");
      });

      it("keeps a thread's records (ask --verify's verdict) apart from its calls: replaced by the next, deleted with the thread", async () => {
        const { p, reopen } = await open();
        await p.journal.put(key(0), { ok: true, value: "call" });
        await putThreadRecord(p.journalRows, "t1", "verification", { status: "failed" });
        await putThreadRecord(p.journalRows, "t1", "verification", { status: "verified" });
        const again = await reopen();
        expect(await getThreadRecord(again.journalRows, "t1", "verification")).toEqual({
          status: "verified",
        });
        expect(await getThreadRecord(again.journalRows, "t2", "verification")).toBeUndefined();
        // Never listed or served as a call.
        expect((await again.journal.entries("t1")).map((e) => e.outcome)).toEqual([
          { ok: true, value: "call" },
        ]);
        await p.deleteThread("t1");
        expect(await getThreadRecord(p.journalRows, "t1", "verification")).toBeUndefined();
      });

      it("a later put at the same position replaces the earlier one", async () => {
        const { p } = await open();
        await p.journal.put(key(0), { ok: false, error: "first" });
        await p.journal.put(key(0), { ok: true, value: "second" });
        expect(await p.journal.get(key(0))).toEqual({ ok: true, value: "second" });
        expect(await p.journal.entries("t1")).toHaveLength(1);
      });
    });

    describe("thread registry", () => {
      it("tracks status and answer, keeps the question on a restart, lists graph-API threads", async () => {
        const { p } = await open();
        await p.threads.start("app-thread", { question: "When?", options: { corpus: "/c.db" } });
        await p.threads.finish("app-thread", "41 years", 1234);
        await p.threads.start("failed-thread", { question: "Why?" });
        await p.threads.fail("failed-thread", "endpoint down");
        await p.threads.start("stopped-thread", { question: "How?" });
        await p.threads.fail("stopped-thread", "interrupted (Ctrl-C)", { interrupted: true });

        const State = Annotation.Root({
          n: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
        });
        const graph = new StateGraph(State)
          .addNode("inc", () => ({ n: 1 }))
          .addEdge(START, "inc")
          .addEdge("inc", END)
          .compile({ checkpointer: p.checkpointer });
        await graph.invoke({ n: 1 }, { configurable: { thread_id: "api-thread" } });

        const byId = Object.fromEntries((await p.threads.list()).map((t) => [t.threadId, t]));
        expect(byId["app-thread"]).toMatchObject({
          status: "done",
          answer: "41 years",
          durationMs: 1234,
          options: { corpus: "/c.db" },
        });
        expect(byId["failed-thread"]).toMatchObject({ status: "failed", error: "endpoint down" });
        expect(byId["stopped-thread"]).toMatchObject({ status: "interrupted" });
        expect(byId["api-thread"]).toMatchObject({ status: "unknown", question: null });
        expect(byId["api-thread"].checkpoints).toBeGreaterThan(1);

        await p.threads.start("failed-thread");
        expect(await p.threads.get("failed-thread")).toMatchObject({
          status: "running",
          question: "Why?",
          error: null,
        });
        // A new question replaces the recorded one only when asked to.
        await p.threads.start("failed-thread", { question: "Other?" });
        expect((await p.threads.get("failed-thread"))?.question).toBe("Why?");
        await p.threads.start("failed-thread", { question: "Other?", replaceQuestion: true });
        expect((await p.threads.get("failed-thread"))?.question).toBe("Other?");
        expect(await p.threads.get("nobody")).toBeUndefined();
      });
    });

    describe("checkpointer", () => {
      it("checkpoints a graph run, and resumes it on a second connection", async () => {
        const { p, reopen } = await open();
        const State = Annotation.Root({
          n: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
        });
        const build = (persistence: Persistence) =>
          new StateGraph(State)
            .addNode("inc", () => ({ n: 1 }))
            .addEdge(START, "inc")
            .addEdge("inc", END)
            .compile({ checkpointer: persistence.checkpointer, interruptBefore: ["inc"] });
        const cfg = { configurable: { thread_id: "g" } };
        await build(p).invoke({ n: 1 }, cfg);
        const again = await reopen();
        expect(await build(again).invoke(null, cfg)).toEqual({ n: 2 });
        expect((await build(again).getState(cfg)).values).toEqual({ n: 2 });
      });
    });

    it("deleteThread removes its checkpoints, journal rows and registry row, and nothing else", async () => {
      const { p } = await open();
      const State = Annotation.Root({ n: Annotation<number> });
      const graph = new StateGraph(State)
        .addNode("set", () => ({ n: 1 }))
        .addEdge(START, "set")
        .addEdge("set", END)
        .compile({ checkpointer: p.checkpointer });
      for (const t of ["t1", "t2"]) {
        await p.threads.start(t, { question: t });
        await graph.invoke({ n: 0 }, { configurable: { thread_id: t } });
        await p.journal.put({ ...key(0), threadId: t }, { ok: true, value: t });
      }
      await p.deleteThread("t1");
      expect(await p.threads.get("t1")).toBeUndefined();
      expect(await p.journal.get(key(0))).toBeUndefined();
      expect(await p.checkpointer.getTuple({ configurable: { thread_id: "t1" } })).toBeUndefined();
      expect(await p.threads.get("t2")).toMatchObject({ question: "t2" });
      expect(await p.journal.get({ ...key(0), threadId: "t2" })).toEqual({ ok: true, value: "t2" });
      expect(await p.checkpointer.getTuple({ configurable: { thread_id: "t2" } })).toBeDefined();
    });
  });
}
