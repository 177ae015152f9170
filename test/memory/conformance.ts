import { Annotation, END, START, StateGraph, getStore } from "@langchain/langgraph";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import type { CodehopStore, MemoryStoreOptions } from "../../src/memory/store.ts";
import { createEmbedder } from "../../src/store/embeddings.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";

/** What a memory-store adapter's test file gives the suite. */
export interface StoreFactory {
  name: string;
  /** A fresh, empty store with these options. */
  open(options?: MemoryStoreOptions): Promise<CodehopStore>;
  /** A second store on the same data as `store` (another process would see this). */
  reopen?(options?: MemoryStoreOptions): Promise<CodehopStore>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (err) {
    return CodehopError.isInstance(err) ? err.code : `not coded: ${String(err)}`;
  }
  return undefined;
}

/**
 * The behaviour every memory-store adapter must have: LangGraph's BaseStore semantics (namespaces,
 * put / get / delete / search / list namespaces, filters, pagination), TTL, lexical and semantic
 * ranking of a query, bad input refused with codes, and use from a LangGraph graph.
 */
export function describeStoreConformance(factory: StoreFactory): void {
  describe(`memory store conformance: ${factory.name}`, () => {
    const opened: CodehopStore[] = [];
    const open = async (options?: MemoryStoreOptions) => {
      const s = await factory.open(options);
      opened.push(s);
      return s;
    };
    afterAll(async () => {
      await Promise.all(opened.map((s) => s.close()));
    });

    it("puts, gets, updates (created kept, updated moved) and deletes items", async () => {
      const store = await open();
      expect(await store.get(["u1", "memories"], "k")).toBeNull();
      await store.put(["u1", "memories"], "k", { text: "likes tea", n: 1 });
      const first = await store.get(["u1", "memories"], "k");
      expect(first).toMatchObject({
        namespace: ["u1", "memories"],
        key: "k",
        value: { text: "likes tea", n: 1 },
      });
      expect(first!.createdAt).toBeInstanceOf(Date);
      await sleep(5);
      await store.put(["u1", "memories"], "k", { text: "likes coffee" });
      const second = await store.get(["u1", "memories"], "k");
      expect(second!.value).toEqual({ text: "likes coffee" });
      expect(second!.createdAt.getTime()).toBe(first!.createdAt.getTime());
      expect(second!.updatedAt.getTime()).toBeGreaterThan(first!.updatedAt.getTime());
      await store.delete(["u1", "memories"], "k");
      expect(await store.get(["u1", "memories"], "k")).toBeNull();
      // Deleting what is not there is not an error.
      await store.delete(["u1", "memories"], "k");
    });

    it("keeps values as JSON: unicode, nesting, numbers, booleans, null fields", async () => {
      const store = await open();
      const value = {
        text: 'café 🌍 \u2028 "quoted"',
        nested: { a: [1, 2.5, { b: null }] },
        ok: false,
      };
      await store.put(["x"], "weird key / with spaces ' \"", value);
      expect((await store.get(["x"], "weird key / with spaces ' \""))!.value).toEqual(value);
    });

    it("batch runs puts (null value: delete), gets, searches and namespace lists in order", async () => {
      const store = await open();
      const results = await store.batch([
        { namespace: ["b"], key: "1", value: { v: 1 } },
        { namespace: ["b"], key: "2", value: { v: 2 } },
        { namespace: ["b"], key: "1" },
        { namespace: ["b"], key: "2", value: null },
        { namespacePrefix: ["b"], limit: 10, offset: 0 },
        { limit: 10, offset: 0 },
      ]);
      expect(results[0]).toBeUndefined();
      expect((results[2] as any).value).toEqual({ v: 1 });
      expect((results[4] as any[]).map((i) => i.key)).toEqual(["1"]);
      expect(results[5]).toEqual([["b"]]);
    });

    it("refuses bad namespaces, keys and values with CODEHOP_INPUT_INVALID", async () => {
      const store = await open();
      expect(await codeOf(store.put(["a.b"], "k", { v: 1 }))).toBe(ErrorCodes.INPUT_INVALID);
      expect(await codeOf(store.put([], "k", { v: 1 }))).toBe(ErrorCodes.INPUT_INVALID);
      expect(await codeOf(store.put(["langgraph"], "k", { v: 1 }))).toBe(ErrorCodes.INPUT_INVALID);
      expect(await codeOf(store.put([""], "k", { v: 1 }))).toBe(ErrorCodes.INPUT_INVALID);
      expect(await codeOf(store.put(["a"], "", { v: 1 }))).toBe(ErrorCodes.INPUT_INVALID);
      expect(await codeOf(store.put(["a"], "k", [1] as never))).toBe(ErrorCodes.INPUT_INVALID);
      expect(await codeOf(store.put(["a"], "k", "text" as never))).toBe(ErrorCodes.INPUT_INVALID);
      expect(await codeOf(store.get(["a.b"], "k"))).toBe(ErrorCodes.INPUT_INVALID);
      expect(await codeOf(store.search(["a"], { filter: { n: { $regex: "x" } } }))).toBe(
        ErrorCodes.INPUT_INVALID,
      );
      expect(await codeOf(store.put(["a"], "k", { v: 1 }, undefined, { ttl: -1 }))).toBe(
        ErrorCodes.INPUT_INVALID,
      );
    });

    it("searches a namespace prefix label by label (a_b is not a prefix of axb, a is not of ab)", async () => {
      const store = await open();
      for (const ns of [["a"], ["a", "b"], ["ab"], ["a_b"], ["axb"], ["a%"], ["other", "a"]])
        await store.put(ns, "k", { ns: ns.join("/") });
      const under = async (prefix: string[]) =>
        (await store.search(prefix, { limit: 100 })).map((i) => i.namespace.join("/")).sort();
      expect(await under(["a"])).toEqual(["a", "a/b"]);
      expect(await under(["a_b"])).toEqual(["a_b"]);
      expect(await under(["a%"])).toEqual(["a%"]);
      expect(await under(["a", "b"])).toEqual(["a/b"]);
      expect(await under([])).toHaveLength(7);
    });

    it("pages a search newest update first (limit, offset)", async () => {
      const store = await open();
      for (let i = 0; i < 5; i++) {
        await store.put(["p"], `k${i}`, { i });
        await sleep(3);
      }
      const keys = async (limit: number, offset: number) =>
        (await store.search(["p"], { limit, offset })).map((i) => i.key);
      expect(await keys(2, 0)).toEqual(["k4", "k3"]);
      expect(await keys(2, 2)).toEqual(["k2", "k1"]);
      expect(await keys(10, 4)).toEqual(["k0"]);
      expect(await keys(10, 9)).toEqual([]);
    });

    it("filters on fields: equality of any JSON value, $ne, order on numbers and strings", async () => {
      const store = await open();
      const rows = [
        { key: "a", value: { kind: "fact", n: 1, tag: "x", flag: true, obj: { z: 1 } } },
        { key: "b", value: { kind: "fact", n: 5, tag: "y", flag: false } },
        { key: "c", value: { kind: "lesson", n: 10, tag: "z" } },
        { key: "d", value: { kind: "fact", n: "5" } },
      ];
      for (const r of rows) await store.put(["f"], r.key, r.value);
      const keys = async (filter: Record<string, unknown>) =>
        (await store.search(["f"], { filter, limit: 10 })).map((i) => i.key).sort();
      expect(await keys({ kind: "fact" })).toEqual(["a", "b", "d"]);
      expect(await keys({ n: 5 })).toEqual(["b"]);
      expect(await keys({ n: "5" })).toEqual(["d"]);
      expect(await keys({ flag: true })).toEqual(["a"]);
      expect(await keys({ obj: { z: 1 } })).toEqual(["a"]);
      expect(await keys({ kind: { $ne: "fact" } })).toEqual(["c"]);
      expect(await keys({ flag: { $ne: true } })).toEqual(["b", "c", "d"]);
      expect(await keys({ n: { $gt: 1 } })).toEqual(["b", "c"]);
      expect(await keys({ n: { $gte: 1, $lt: 10 } })).toEqual(["a", "b"]);
      expect(await keys({ n: { $lte: 5 }, kind: "fact" })).toEqual(["a", "b"]);
      expect(await keys({ tag: { $gt: "x" } })).toEqual(["b", "c"]);
      expect(await keys({ missing: "x" })).toEqual([]);
    });

    it("lists namespaces by prefix and suffix (with *), cut to a depth, paged", async () => {
      const store = await open();
      for (const ns of [
        ["u1", "memories"],
        ["u1", "lessons", "qa"],
        ["u2", "memories"],
        ["u2", "lessons", "chat"],
      ])
        await store.put(ns, "k", { v: 1 });
      const list = (o: Parameters<CodehopStore["listNamespaces"]>[0]) => store.listNamespaces(o);
      expect(await list({})).toEqual([
        ["u1", "lessons", "qa"],
        ["u1", "memories"],
        ["u2", "lessons", "chat"],
        ["u2", "memories"],
      ]);
      expect(await list({ prefix: ["u1"] })).toEqual([
        ["u1", "lessons", "qa"],
        ["u1", "memories"],
      ]);
      expect(await list({ suffix: ["memories"] })).toEqual([
        ["u1", "memories"],
        ["u2", "memories"],
      ]);
      expect(await list({ prefix: ["*", "lessons"] })).toEqual([
        ["u1", "lessons", "qa"],
        ["u2", "lessons", "chat"],
      ]);
      expect(await list({ maxDepth: 1 })).toEqual([["u1"], ["u2"]]);
      expect(await list({ limit: 1, offset: 1 })).toEqual([["u1", "memories"]]);
    });

    it("expires items after their TTL, refreshes it on reads unless told not to, and sweeps them", async () => {
      const store = await open({ ttl: { sweepIntervalMinutes: 0 } });
      const ttl = 1 / 60; // one second
      await store.put(["t"], "refreshed", { v: 1 }, undefined, { ttl });
      await store.put(["t"], "kept", { v: 2 }, undefined, { ttl });
      await store.put(["t"], "forever", { v: 3 });
      await sleep(600);
      expect(await store.get(["t"], "refreshed")).not.toBeNull(); // pushed back by 1 s
      expect(await store.get(["t"], "kept", { refreshTtl: false })).not.toBeNull();
      await sleep(600);
      expect(await store.get(["t"], "kept")).toBeNull();
      expect((await store.search(["t"], { limit: 10 })).map((i) => i.key).sort()).toEqual([
        "forever",
        "refreshed",
      ]);
      expect(await store.listNamespaces()).toEqual([["t"]]);
      await sleep(1_100);
      expect(await store.sweep()).toBe(2);
      expect((await store.search(["t"])).map((i) => i.key)).toEqual(["forever"]);
    });

    it("gives every item the store's default TTL", async () => {
      const store = await open({ ttl: { defaultTtl: 1 / 120, sweepIntervalMinutes: 0 } });
      await store.put(["d"], "k", { v: 1 });
      await store.put(["d"], "forever", { v: 1 }, undefined, { ttl: null });
      await sleep(700);
      expect(await store.get(["d"], "k")).toBeNull();
      expect(await store.get(["d"], "forever")).not.toBeNull();
    });

    it("ranks a query by the words items contain when no embeddings are configured", async () => {
      const store = await open();
      await store.put(["q"], "tea", { text: "The user drinks green tea every morning" });
      await store.put(["q"], "bike", { text: "The user rides a bike to work" });
      await store.put(["q"], "both", { text: "Tea after the bike ride" });
      const found = await store.search(["q"], { query: "green tea", limit: 5 });
      expect(found.map((i) => i.key)).toEqual(["tea", "both"]);
      expect(found[0].score).toBe(1);
      expect(found[1].score).toBe(0.5);
      // Keys of the value are not its words.
      expect(await store.search(["q"], { query: "text" })).toEqual([]);
    });

    describe("semantic search (a local OpenAI-compatible /v1/embeddings)", () => {
      let server: ScriptedOpenAIServer;
      beforeAll(async () => {
        server = await ScriptedOpenAIServer.start({
          responder: () => "unused",
          embeddingDims: 256,
        });
      });
      afterAll(() => server.close());
      const index = () => ({
        embedder: createEmbedder({ baseUrl: server.baseURL, model: "hashed", maxRetries: 0 }),
      });

      it("embeds items when put and ranks a query by similarity; index: false items are not found", async () => {
        const store = await open({ index: index() });
        expect(store.semantic).toBe(true);
        const before = server.embeddingRequests;
        await store.put(["s"], "ocean", { text: "The user loves sailing on the ocean and sea" });
        await store.put(["s"], "code", { text: "The user writes TypeScript compilers" });
        await store.put(["s"], "secret", { text: "sailing ocean sea" }, false);
        expect(server.embeddingRequests - before).toBe(2);
        const found = await store.search(["s"], { query: "sailing on the sea", limit: 2 });
        expect(found.map((i) => i.key)).toEqual(["ocean", "code"]);
        expect(found[0].score!).toBeGreaterThan(found[1].score!);
        expect(found[0].score!).toBeLessThanOrEqual(1.0000001);
      });

      it("indexes the fields asked for (per store, or per put)", async () => {
        const store = await open({ index: { ...index(), fields: ["title"] } });
        await store.put(["s2"], "a", { title: "ocean sailing", body: "compilers" });
        await store.put(["s2"], "b", { title: "compilers", body: "ocean sailing" });
        await store.put(["s2"], "c", { title: "nothing", body: "ocean sailing" }, ["body"]);
        const found = await store.search(["s2"], { query: "ocean sailing", limit: 3 });
        expect(
          found
            .slice(0, 2)
            .map((i) => i.key)
            .sort(),
        ).toEqual(["a", "c"]);
        expect(found[2].key).toBe("b");
      });

      it("a dead embeddings endpoint fails the put, and the item is not stored", async () => {
        const store = await open({
          index: {
            embedder: createEmbedder({
              baseUrl: "http://127.0.0.1:9/v1",
              model: "m",
              maxRetries: 0,
            }),
          },
        });
        await expect(store.put(["dead"], "k", { text: "x" })).rejects.toThrow();
        expect(await store.get(["dead"], "k")).toBeNull();
      });
    });

    it("is the store of a LangGraph graph: getStore() in a node, across threads", async () => {
      const store = await open();
      const State = Annotation.Root({
        user: Annotation<string>,
        fact: Annotation<string | undefined>,
      });
      const graph = new StateGraph(State)
        .addNode("remember", async (s) => {
          const st = getStore()!;
          const had = await st.get([s.user, "memories"], "name");
          if (!had && s.fact) await st.put([s.user, "memories"], "name", { text: s.fact });
          return { fact: had ? String(had.value.text) : s.fact };
        })
        .addEdge(START, "remember")
        .addEdge("remember", END)
        .compile();
      await graph.invoke({ user: "ada", fact: "Ada" }, { store });
      const out = await graph.invoke({ user: "ada" }, { store });
      expect(out.fact).toBe("Ada");
      expect((await store.get(["ada", "memories"], "name"))!.value).toEqual({ text: "Ada" });
    });

    if (factory.reopen)
      it("another store on the same data sees every write", async () => {
        const a = await open();
        const b = await factory.reopen!();
        opened.push(b);
        await a.put(["shared"], "k", { v: 1 });
        expect((await b.get(["shared"], "k"))!.value).toEqual({ v: 1 });
        await b.delete(["shared"], "k");
        expect(await a.get(["shared"], "k")).toBeNull();
      });
  });
}
