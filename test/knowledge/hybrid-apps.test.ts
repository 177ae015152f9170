import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChatFiles } from "../../src/apps/chat/conversation/knowledge-base.ts";
import { sourceFromConfig } from "../../src/apps/common/knowledge-source.ts";
import { ask } from "../../src/apps/qa/app.ts";
import { action, AGENT_MARKERS } from "../../src/apps/qa/demo-trajectories.ts";
import { openEvalSource } from "../../src/eval/corpus.ts";
import { readEnv } from "../../src/config/env.ts";
import { ingestDocuments, ingestPath } from "../../src/ingest/index.ts";
import { CorpusSource } from "../../src/store/corpus-source.ts";
import { createEmbedder } from "../../src/store/embeddings.ts";
import { IndexTerms } from "../../src/store/stems.ts";
import { contentTokens } from "../../src/store/text.ts";
import { conceptEmbedding } from "../../src/testing/concept-embeddings.ts";
import {
  observationCount,
  ScriptedOpenAIServer,
  type ChatRequest,
  type Responder,
} from "../../src/testing/scripted-openai-server.ts";
import { cliEnv, runCli } from "../app/cli-helpers.ts";
import { DEMO_CORPUS, demoDocuments, tempDir } from "./helpers.ts";

// Hybrid retrieval in every app: a corpus ingested with vectors is searched with them by `ask`,
// `research`, `chat`, eval and the served graphs whenever the embeddings endpoint is configured,
// and says once that it is BM25 only when it is not. The embeddings server answers with a
// synonym-table embedding (src/testing/concept-embeddings.ts) that really encodes the meaning of
// the paraphrased query set data/demo-paraphrase-queries.json: queries that share no word with
// the passage that answers them, which BM25 therefore cannot find.

interface ParaphraseSet {
  concepts: string[][];
  queries: { query: string; page: string; answer: string }[];
}
const SET: ParaphraseSet = JSON.parse(
  readFileSync(join(import.meta.dirname, "../../data/demo-paraphrase-queries.json"), "utf8"),
);
const MODEL = "concepts-v1";
const BALSA = SET.queries.find((q) => q.page === "Balsa")!;

const tmp = tempDir("codehop-hybrid-");
const db = join(tmp.dir, "vec.db");
let server: ScriptedOpenAIServer;

/** The latest observation shown to the agent. */
const lastUser = (req: ChatRequest) =>
  [...req.messages].reverse().find((m) => m.role === "user" && m.content.startsWith("Observation:"))
    ?.content ?? "";

/**
 * The QA team for one question: the manager hands the question to wikipedia_search, which runs
 * `search_wikipedia(question)` and answers with the first page the real search returned; the
 * manager answers with that. So the answer is the source's top page for the question.
 */
function topPageResponder(question: string): Responder {
  return (req) => {
    const system = req.messages.find((m) => m.role === "system")?.content ?? "";
    const step = observationCount(req);
    if (system.includes(AGENT_MARKERS.manager)) {
      if (step === 0)
        return action(
          "I ask the search agent.",
          `console.log(await wikipedia_search_agent(${JSON.stringify(question)}));`,
        );
      const top = /Top page: ([^\n"\\]+)/.exec(lastUser(req))?.[1] ?? "none";
      return action("Done.", `final_answer(${JSON.stringify(`Top page: ${top}`)});`);
    }
    if (system.includes(AGENT_MARKERS.wikipedia_search)) {
      if (step === 0)
        return action(
          "I search.",
          `console.log(await search_wikipedia(${JSON.stringify(question)}));`,
        );
      const top = /Page: ([^\n]+)/.exec(lastUser(req))?.[1] ?? "none";
      return action("Done.", `final_answer(${JSON.stringify(`Top page: ${top}`)});`);
    }
    return { status: 500, body: '{"error":{"message":"unexpected agent"}}' };
  };
}

beforeAll(async () => {
  server = await ScriptedOpenAIServer.start({
    responder: topPageResponder(BALSA.query),
    embed: conceptEmbedding(SET.concepts),
  });
  await ingestPath(db, DEMO_CORPUS, {
    embedder: createEmbedder({ baseUrl: server.baseURL, model: MODEL }),
  });
});
afterAll(async () => {
  await server?.close();
  tmp.cleanup();
});

const embeddingsEnv = () => ({ CODEHOP_EMBEDDINGS_BASE_URL: server.baseURL });
const appEnv = (extra: Record<string, string> = {}) =>
  cliEnv({
    OPENAI_BASE_URL: server.baseURL,
    OPENAI_API_KEY: "test",
    CODEHOP_MODEL: "scripted",
    CODEHOP_HOME: join(tmp.dir, "home"),
    ...extra,
  });

describe("the paraphrased query set", () => {
  it("shares no index term with the passage answering each query, which BM25 then misses and hybrid finds", async () => {
    const terms = new IndexTerms();
    const bm25 = CorpusSource.open(db);
    const hybrid = CorpusSource.open(db, {
      embedder: createEmbedder({ baseUrl: server.baseURL, model: MODEL }),
    });
    try {
      const rows = bm25.db
        .prepare(
          "SELECT d.title, p.section, p.text FROM passages p JOIN documents d ON d.id = p.doc_id",
        )
        .all() as { title: string; section: string; text: string }[];
      const found = { bm25: 0, hybrid: 0 };
      for (const q of SET.queries) {
        const target = rows.filter((r) => r.title === q.page && r.text.includes(q.answer));
        expect(target, q.query).toHaveLength(1);
        const [queryTerms, passageTerms] = terms.of([
          contentTokens(q.query).join(" "),
          `${target[0].title} ${target[0].section} ${target[0].text}`,
        ]);
        expect(
          queryTerms.filter((t) => passageTerms.includes(t)),
          q.query,
        ).toEqual([]);
        const hit = (ps: { title: string; text: string }[]) =>
          ps.some((p) => p.title === q.page && p.text.includes(q.answer));
        if (hit(await bm25.searchPassages(q.query, { k: 5 }))) found.bm25++;
        if (hit(await hybrid.searchPassages(q.query, { k: 5 }))) found.hybrid++;
      }
      // Measured: BM25 0 of 19, hybrid 10 of 19 (bench/hybrid.bench.ts); one query fewer fails.
      expect(found.bm25).toBe(0);
      expect(found.hybrid).toBeGreaterThanOrEqual(10);
      const [first] = await hybrid.search(BALSA.query, { limit: 1 });
      expect(first.title).toBe("Balsa");
      expect((await bm25.search(BALSA.query, { limit: 5 })).map((p) => p.title)).not.toContain(
        "Balsa",
      );
    } finally {
      terms.close();
      await bm25.close();
      await hybrid.close();
    }
  });
});

describe("apps open a corpus with its stored embedding model", { timeout: 120_000 }, () => {
  it("`codehop ask` with the endpoint configured embeds the query with the corpus's model and finds the page", async () => {
    const before = server.embeddingLog.length;
    // No CODEHOP_EMBEDDINGS_MODEL: the corpus's stored model is used.
    const r = await runCli(
      ["ask", BALSA.query, "--corpus", db, "--json", "-q"],
      appEnv(embeddingsEnv()),
    );
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).answer).toBe("Top page: Balsa");
    const requests = server.embeddingLog.slice(before);
    expect(requests.length).toBeGreaterThan(0);
    expect(requests.every((e) => e.model === MODEL)).toBe(true);
    expect(r.stderr).not.toContain("BM25 only");
  });

  it("without the endpoint it says so once and ranks with BM25 (no embeddings request)", async () => {
    const before = server.embeddingRequests;
    const r = await runCli(["ask", BALSA.query, "--corpus", db, "--json", "-q"], appEnv());
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr.split("vectors stored but no embeddings endpoint; BM25 only")).toHaveLength(2);
    expect(JSON.parse(r.stdout).answer).not.toBe("Top page: Balsa");
    expect(server.embeddingRequests).toBe(before);
  });

  it("ask() in the API takes the endpoint from its configuration", async () => {
    const before = server.embeddingRequests;
    const warnings: string[] = [];
    const result = await ask(BALSA.query, {
      config: {
        home: join(tmp.dir, "api-home"),
        corpus: db,
        baseURL: server.baseURL,
        apiKey: "test",
        model: "scripted",
        models: {},
        embeddings: { baseUrl: server.baseURL },
      },
      onWarning: (m) => warnings.push(m),
    });
    expect(result.answer).toBe("Top page: Balsa");
    expect(server.embeddingRequests).toBeGreaterThan(before);
    expect(warnings).toEqual([]);
  });

  it("a run naming its corpus in the run context (Studio, `codehop serve`) uses the operator's endpoint", async () => {
    const saved = process.env.CODEHOP_EMBEDDINGS_BASE_URL;
    process.env.CODEHOP_EMBEDDINGS_BASE_URL = server.baseURL;
    try {
      const before = server.embeddingRequests;
      const source = sourceFromConfig({ configurable: { corpus: db } } as any, {});
      const [top] = await source.search(BALSA.query, { limit: 1 });
      expect(top.title).toBe("Balsa");
      expect(server.embeddingRequests).toBeGreaterThan(before);
    } finally {
      if (saved === undefined) delete process.env.CODEHOP_EMBEDDINGS_BASE_URL;
      else process.env.CODEHOP_EMBEDDINGS_BASE_URL = saved;
    }
  });

  it("eval logs the BM25-only notice once, and ranks hybrid with the endpoint", async () => {
    const dataset = { format: "hotpotqa", path: "x.json" } as any;
    for (const [vars, mode] of [
      [{}, "bm25"],
      [embeddingsEnv(), "hybrid"],
    ] as const) {
      const log: string[] = [];
      const env = readEnv({ CODEHOP_CORPUS: db, CODEHOP_ENV_FILE: "none", ...vars });
      const { source, info } = await openEvalSource(dataset, [], join(tmp.dir, "eval"), env, (l) =>
        log.push(l),
      );
      expect((source as CorpusSource).mode).toBe(mode);
      expect(log.filter((l) => l.includes("BM25 only"))).toHaveLength(mode === "bm25" ? 1 : 0);
      expect(info.kind).toBe("configured-corpus");
      await source.close();
    }
  });

  it("chat embeds attached files and searches them hybrid; a failing endpoint leaves them searchable", async () => {
    const docs = demoDocuments().filter((d) => ["Balsa", "Ebony", "Oak"].includes(d.title));
    const files = new ChatFiles(join(tmp.dir, "chat"), {
      embeddings: { baseUrl: server.baseURL, model: MODEL },
    });
    const before = server.embeddingRequests;
    for (const d of docs)
      await files.add("t1", {
        name: `${d.title}.md`,
        kind: "markdown",
        source: "upload",
        text: d.text,
      });
    expect(server.embeddingRequests - before).toBe(docs.length);
    const hits = await files.search("t1", BALSA.query, 1);
    expect(hits[0].file).toBe("Balsa.md");
    expect(hits[0].text).toContain(BALSA.answer);

    // An endpoint that answers 404 (a wrong URL): the file is indexed without vectors.
    const dead = new ChatFiles(join(tmp.dir, "chat-dead"), {
      embeddings: { baseUrl: `${server.baseURL}/wrong`, model: MODEL },
    });
    const added = await dead.add("t2", {
      name: "Balsa.md",
      kind: "markdown",
      source: "upload",
      text: docs[0].text,
    });
    expect(added.passages).toBeGreaterThan(0);
    expect((await dead.search("t2", "balsa density", 1))[0].file).toBe("Balsa.md");
  });

  it("the API's default notice is a process warning, once per corpus file", async () => {
    const plain = join(tmp.dir, "copy.db");
    await ingestDocuments(plain, [{ title: "P", text: "plain" }], {
      embedder: createEmbedder({ baseUrl: server.baseURL, model: MODEL }),
    });
    const { openKnowledgeSource } = await import("../../src/store/open.ts");
    const seen: string[] = [];
    const listener = (w: Error & { code?: string }) => {
      if (w.code === "CODEHOP_BM25_ONLY") seen.push(w.message);
    };
    process.on("warning", listener);
    try {
      for (let i = 0; i < 3; i++) await openKnowledgeSource({ corpus: plain }).close();
      await new Promise((r) => setImmediate(r));
      expect(seen).toHaveLength(1);
      expect(seen[0]).toContain("vectors stored but no embeddings endpoint; BM25 only");
    } finally {
      process.off("warning", listener);
    }
  });
});
