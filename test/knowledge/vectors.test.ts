import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CodehopError } from "../../src/errors.ts";
import { ingestDocuments, ingestPath } from "../../src/ingest/index.ts";
import { CorpusSource } from "../../src/store/corpus-source.ts";
import { createEmbedder, type Embedder } from "../../src/store/embeddings.ts";
import { MediaWikiTestServer } from "../../src/testing/mediawiki-test-server.ts";
import { openKnowledgeSource } from "../../src/store/open.ts";
import { WikipediaSource } from "../../src/store/wikipedia-source.ts";
import { hashedEmbedding, ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";
import { DEMO_CORPUS, demoDocuments, tempDir } from "./helpers.ts";

const tmp = tempDir();
const DIMS = 64;
let server: ScriptedOpenAIServer;
let embedder: Embedder;
const db = join(tmp.dir, "vec.db");

beforeAll(async () => {
  server = await ScriptedOpenAIServer.start({ responder: () => "unused", embeddingDims: DIMS });
  embedder = createEmbedder({ baseUrl: server.baseURL, model: "hashed-bow" });
  await ingestPath(db, DEMO_CORPUS, { embedder });
});
afterAll(async () => {
  await server.close();
  tmp.cleanup();
});

const cosine = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i], 0);

describe("vectors (sqlite-vec) and hybrid ranking", () => {
  it("embeds every passage through the /v1/embeddings endpoint", async () => {
    const s = CorpusSource.open(db, { embedder });
    const stats = s.stats();
    expect(stats.vectors).toBe(stats.passages);
    expect(stats.embeddingModel).toBe("hashed-bow");
    expect(s.mode).toBe("hybrid");
    await s.close();
  });

  it("without an embedder the same corpus is searched with BM25 only", async () => {
    const s = CorpusSource.open(db);
    expect(s.mode).toBe("bm25");
    expect((await s.search("birch plywood density"))[0].title).toBe("Birch plywood");
    await s.close();
  });

  it("KNN through sqlite-vec returns the true nearest passage when BM25 finds nothing", async () => {
    // A made-up word matches no passage in FTS5, but its hashed embedding is still closest to
    // some passages: hybrid results then come from the vector index alone, in cosine order.
    const query = "qwxyzzy";
    const bm25 = CorpusSource.open(db);
    expect(await bm25.searchPassages(query)).toEqual([]);
    await bm25.close();
    const s = CorpusSource.open(db, { embedder });
    const hits = await s.searchPassages(query, { k: 3 });
    expect(hits).toHaveLength(3);
    // Brute-force the expected nearest passage over the texts that were embedded.
    const rows = s.db
      .prepare(
        "SELECT d.title, p.section, p.text FROM passages p JOIN documents d ON d.id = p.doc_id",
      )
      .all() as { title: string; section: string; text: string }[];
    const q = hashedEmbedding(query, DIMS);
    const best = rows
      .map((r) => ({
        r,
        sim: cosine(
          q,
          hashedEmbedding(`${r.title}${r.section ? ` — ${r.section}` : ""}: ${r.text}`, DIMS),
        ),
      }))
      .sort((a, b) => b.sim - a.sim)[0];
    expect(hits[0].text).toBe(best.r.text);
    await s.close();
  });

  it("hybrid search and in-page retrieval still find the right pages and passages", async () => {
    const s = openKnowledgeSource({
      corpus: db,
      embeddings: { baseUrl: server.baseURL, model: "hashed-bow" },
    });
    expect((await s.search("density of ethanol"))[0].title).toBe("Ethanol");
    const { passages } = await s.retrievePassages(
      "Empire State Building",
      "construction started opened",
      { k: 2 },
    );
    expect(passages[0].section).toBe("Construction");
    await s.close();
  });

  it("re-ingesting unchanged documents sends no embedding requests; vectors are backfilled for old documents", async () => {
    const before = server.embeddingRequests;
    const again = await ingestPath(db, DEMO_CORPUS, { embedder });
    expect(again.unchanged).toBeGreaterThan(40);
    expect(server.embeddingRequests).toBe(before);

    const db2 = join(tmp.dir, "backfill.db");
    await ingestDocuments(db2, [
      { title: "Plain", text: "Ingested before embeddings were configured." },
    ]);
    const report = await ingestDocuments(
      db2,
      [{ title: "Plain", text: "Ingested before embeddings were configured." }],
      { embedder },
    );
    expect(report).toMatchObject({ unchanged: 1, vectors: 1 });
  });

  it("a changed document's vectors are replaced, and no vector outlives its passage", async () => {
    const db3 = join(tmp.dir, "changed.db");
    const long = Array.from({ length: 12 }, (_, i) => `Sentence ${i} about lakes and rivers.`);
    await ingestDocuments(db3, [{ title: "Water", text: long.join(" ") }], {
      embedder,
      chunkSize: 80,
      chunkOverlap: 0,
    });
    const orphans = (s: CorpusSource) =>
      (
        s.db
          .prepare(
            "SELECT count(*) AS n FROM passages_vec WHERE rowid NOT IN (SELECT id FROM passages)",
          )
          .get() as { n: number }
      ).n;
    let s = CorpusSource.open(db3, { embedder });
    const first = s.stats();
    expect(first.passages).toBeGreaterThan(2);
    expect(first.vectors).toBe(first.passages);
    await s.close();

    // Changed with the embedder: new vectors for the new passages only.
    const changed = await ingestDocuments(
      db3,
      [{ title: "Water", text: long.slice(0, 3).join(" ") }],
      { embedder, chunkSize: 80, chunkOverlap: 0 },
    );
    expect(changed).toMatchObject({ updated: 1 });
    s = CorpusSource.open(db3, { embedder });
    expect(s.stats().vectors).toBe(s.stats().passages);
    expect(s.stats().passages).toBeLessThan(first.passages);
    expect(orphans(s)).toBe(0);
    await s.close();

    // Changed without one: the old vectors go with their passages.
    await ingestDocuments(db3, [{ title: "Water", text: "Only one short sentence now." }], {
      chunkSize: 80,
      chunkOverlap: 0,
    });
    s = CorpusSource.open(db3);
    expect(s.stats()).toMatchObject({ passages: 1, vectors: 0 });
    expect(orphans(s)).toBe(0);
    await s.close();
  });

  it("ranking: 'bm25' ignores the vectors; 'hybrid' without vectors is refused", async () => {
    const s = CorpusSource.open(db, { embedder, ranking: "bm25" });
    expect(s.mode).toBe("bm25");
    const before = server.embeddingRequests;
    await s.search("ethanol");
    expect(server.embeddingRequests).toBe(before);
    await s.close();
    const plain = join(tmp.dir, "plain.db");
    await ingestDocuments(plain, [{ title: "P", text: "no vectors here" }]);
    expect(() => CorpusSource.open(plain, { embedder, ranking: "hybrid" })).toThrow(
      /has none; ingest it with --embeddings/,
    );
    expect(() => CorpusSource.open(db, { ranking: "hybrid" })).toThrow(
      /needs an embeddings endpoint/,
    );
  });

  it("refuses to mix embedding models in one corpus", async () => {
    const other = createEmbedder({ baseUrl: server.baseURL, model: "other-model" });
    const err = (() => {
      try {
        CorpusSource.open(db, { embedder: other });
      } catch (e) {
        return e;
      }
    })();
    expect(CodehopError.isInstance(err) && err.code).toBe("CODEHOP_CONFIG_INVALID");
    await expect(
      ingestDocuments(db, [{ title: "New page", text: "Some new text." }], { embedder: other }),
    ).rejects.toThrow(/were made with model hashed-bow/);
  });

  it("online pages are ranked hybrid too, with passage vectors cached across sources", async () => {
    const wiki = await MediaWikiTestServer.start(
      demoDocuments().map((d) => ({ title: d.title, text: d.text })),
    );
    const cacheDb = join(tmp.dir, "wiki-cache.db");
    try {
      const s = new WikipediaSource({ apiUrl: wiki.apiUrl, cacheDb, embedder });
      expect(s.mode).toBe("hybrid");
      const good = await s.retrievePassages(
        "Empire State Building",
        "construction started opened",
        { k: 2 },
      );
      expect(good.passages[0].section).toBe("Construction");
      // A word BM25 cannot match: the order is then the vector order (true cosine ranking).
      const query = "qwxyzzy";
      const { passages } = await s.retrievePassages("Empire State Building", query, { k: 3 });
      const q = hashedEmbedding(query, DIMS);
      const expected = passages
        .map((p) => ({
          p,
          sim: cosine(
            q,
            hashedEmbedding(`${p.title}${p.section ? ` — ${p.section}` : ""}: ${p.text}`, DIMS),
          ),
        }))
        .sort((a, b) => b.sim - a.sim)
        .map((x) => x.p.text);
      expect(passages.map((p) => p.text)).toEqual(expected);
      await s.close();
      // A new source with the same cache embeds only the query, not the page's passages again.
      const before = server.embeddingRequests;
      const again = new WikipediaSource({ apiUrl: wiki.apiUrl, cacheDb, embedder });
      await again.retrievePassages("Empire State Building", "height of the roof");
      expect(server.embeddingRequests - before).toBe(1);
      await again.close();
    } finally {
      await wiki.stop();
    }
  });

  it("an unreachable embeddings endpoint fails with SOURCE_UNAVAILABLE", async () => {
    const dead = createEmbedder({
      baseUrl: "http://127.0.0.1:9/v1",
      model: "m",
      maxRetries: 0,
      timeoutMs: 2000,
    });
    await expect(dead.embed(["x"])).rejects.toSatisfy(
      (e: unknown) => CodehopError.isInstance(e) && e.code === "CODEHOP_SOURCE_UNAVAILABLE",
    );
  });
});
