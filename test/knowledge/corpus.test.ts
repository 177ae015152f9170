import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ingestDocuments, ingestPath, openReader } from "../../src/ingest/index.ts";
import type { IngestDocument, ReaderItem } from "../../src/ingest/types.ts";
import { CorpusSource } from "../../src/store/corpus-source.ts";
import { openKnowledgeSource } from "../../src/store/open.ts";
import { CodehopError } from "../../src/errors.ts";
import { DEMO_CORPUS, demoDocuments, tempDir } from "./helpers.ts";

const tmp = tempDir();
const demoDb = join(tmp.dir, "demo.db");
let source: CorpusSource;

beforeAll(async () => {
  await ingestPath(demoDb, DEMO_CORPUS);
  source = CorpusSource.open(demoDb);
});
afterAll(async () => {
  await source.close();
  tmp.cleanup();
});

/** Every title in the FTS index, to prove re-ingest leaves no stale rows behind. */
function ftsHits(db: string, word: string): number {
  const conn = new Database(db, { readonly: true });
  try {
    return (
      conn
        .prepare("SELECT count(*) AS n FROM passages_fts WHERE passages_fts MATCH ?")
        .get(`"${word}"`) as { n: number }
    ).n;
  } finally {
    conn.close();
  }
}

describe("local corpus: reading", () => {
  it("ingests the demo corpus: every article, passages with their section headings", () => {
    const stats = source.stats();
    expect(stats.documents).toBe(demoDocuments().length);
    expect(stats.documents).toBeGreaterThanOrEqual(40);
    expect(stats.passages).toBeGreaterThan(stats.documents);
    expect(stats.chunkSize).toBe(512);
  });

  it("search ranks the page named by the query first and returns ~1,000-char summaries", async () => {
    const hits = await source.search("Eiffel Tower");
    expect(hits[0].title).toBe("Eiffel Tower");
    expect(hits.length).toBe(5);
    expect(hits[0].summary.length).toBeGreaterThan(200);
    expect(hits[0].summary.length).toBeLessThanOrEqual(1001);
    expect(hits[0].summary).not.toContain("## ");
    expect(await source.search("Eiffel Tower", { limit: 2 })).toHaveLength(2);
  });

  it("a page about the query's subject beats pages that only mention it", async () => {
    // Tokyo Tower's construction passage mentions the Eiffel Tower and "completed"; the Eiffel
    // Tower page must still come first.
    expect((await source.search("Eiffel Tower construction completed"))[0].title).toBe(
      "Eiffel Tower",
    );
    expect((await source.search("Empire State Building construction began"))[0].title).toBe(
      "Empire State Building",
    );
  });

  it("page search favours the pages a query names in full: the longest name, its qualifier", async () => {
    const db = join(tmp.dir, "named.db");
    const filler = "Wood panels are graded by appearance, strength and moisture resistance.";
    await ingestDocuments(db, [
      {
        title: "Plywood",
        text: `Plywood is made of thin layers of veneer. Its density depends on the wood: birch plywood density is higher than pine plywood density. ${filler}`,
      },
      { title: "Birch", text: `Birch is a thin-leaved deciduous tree. ${filler}` },
      {
        title: "Birch plywood",
        text: `Birch plywood is made from birch veneers; its density is about 680 kg per cubic metre. ${filler}`,
      },
      {
        title: "Mercury (element)",
        text: "Mercury is a chemical element, a heavy metal that is liquid when hot or cold; mercury thermometers show how hot a room is.",
      },
      {
        title: "Mercury",
        text: "Mercury is the smallest planet of the Solar System and the closest to the Sun; its days are hot.",
      },
    ]);
    const s = CorpusSource.open(db);
    try {
      const first = async (q: string) => (await s.search(q))[0].title;
      const firstPassage = async (q: string) => (await s.searchPassages(q, { k: 1 }))[0].title;
      // All three titles are words of the query; only the longest, "Birch plywood", is named,
      // though the best passage is Plywood's.
      expect(await firstPassage("birch plywood density")).toBe("Plywood");
      expect(await first("birch plywood density")).toBe("Birch plywood");
      // "Mercury" is named in full; "Mercury (element)" only without its qualifier, which counts
      // for less than the element page's better passage.
      expect(await firstPassage("how hot is Mercury")).toBe("Mercury (element)");
      expect(await first("how hot is Mercury")).toBe("Mercury");
      expect(await first("how hot is the element Mercury")).toBe("Mercury (element)");
    } finally {
      await s.close();
    }
  });

  it("getPage is case-, space- and underscore-insensitive", async () => {
    const lookup = await source.getPage("  empire_state   BUILDING ");
    expect(lookup.status).toBe("found");
    if (lookup.status === "found") {
      expect(lookup.page.title).toBe("Empire State Building");
      expect(lookup.page.text).toContain("## Construction");
    }
  });

  it("a missing page suggests close titles (typos and partial names)", async () => {
    const typo = await source.getPage("Eifel towr");
    expect(typo.status).toBe("missing");
    if (typo.status === "missing") expect(typo.suggestions[0]).toBe("Eiffel Tower");
    const partial = await source.getPage("Ming");
    if (partial.status === "missing") expect(partial.suggestions).toContain("Ming dynasty");
    else throw new Error("expected missing");
  });

  it("retrievePassages ranks a page's passages for the query, best first, with sections", async () => {
    const { lookup, passages } = await source.retrievePassages(
      "Eiffel Tower",
      "when was construction finished",
      { k: 3 },
    );
    expect(lookup.status).toBe("found");
    expect(passages).toHaveLength(3);
    expect(passages[0].section).toBe("Construction");
    expect(passages[0].text).toContain("1889");
    expect(passages[0].score).toBeGreaterThanOrEqual(passages[1].score);
    expect(passages.every((p) => p.title === "Eiffel Tower")).toBe(true);
  });

  it("retrievePassages still shows the page when no word matches (filled in page order)", async () => {
    const { passages } = await source.retrievePassages("Balsa", "zzzz qqqq");
    expect(passages.length).toBeGreaterThan(0);
    expect(passages[0].score).toBe(0);
    expect(passages[0].section).toBe("");
  });

  it("searchPassages ranks passages across the corpus (rag baseline)", async () => {
    const passages = await source.searchPassages("density of ethanol at 20 °C", { k: 3 });
    expect(passages[0].title).toBe("Ethanol");
    expect(passages[0].text).toContain("0.789");
    expect(await source.searchPassages("", { k: 3 })).toEqual([]);
  });

  it("treats FTS5 syntax in queries as plain words", async () => {
    for (const q of [
      '"unbalanced',
      "title:Paris",
      "NEAR(a b)",
      "AND OR NOT",
      "*",
      "-- ; DROP TABLE documents",
    ]) {
      await expect(source.search(q)).resolves.toBeInstanceOf(Array);
      await expect(source.retrievePassages("Paris", q)).resolves.toBeTruthy();
    }
  });

  it("openKnowledgeSource picks the corpus when `corpus` is set", async () => {
    const s = openKnowledgeSource({ corpus: demoDb });
    expect(s.kind).toBe("corpus");
    await s.close();
  });

  it("refuses a missing file or a SQLite file that is not a corpus (DB_INVALID)", () => {
    expect(() => CorpusSource.open(join(tmp.dir, "nope.db"))).toThrowError(/does not exist/);
    const other = join(tmp.dir, "other.db");
    const db = new Database(other);
    db.exec("CREATE TABLE t (x)");
    db.close();
    try {
      CorpusSource.open(other);
      throw new Error("should have thrown");
    } catch (e) {
      expect(CodehopError.isInstance(e) && e.code).toBe("CODEHOP_DB_INVALID");
    }
  });
});

describe("local corpus: ingestion", () => {
  const docs: IngestDocument[] = [
    { title: "Alpha", text: "Alpha is the first letter.\n\n## Use\nAlpha marks beginnings." },
    { title: "Beta", text: "Beta is the second letter.", aliases: ["B (letter)"] },
    {
      title: "Gamma",
      text: "Gamma rays are energetic.",
      metadata: { url: "https://example.org/gamma" },
    },
  ];

  it("re-ingesting is idempotent and a changed title replaces its old passages", async () => {
    const db = join(tmp.dir, "idem.db");
    const first = await ingestDocuments(db, docs);
    expect(first).toMatchObject({ added: 3, updated: 0, unchanged: 0 });
    const again = await ingestDocuments(db, docs);
    expect(again).toMatchObject({ added: 0, updated: 0, unchanged: 3, passages: 0 });
    const changed = await ingestDocuments(db, [
      { title: "alpha", text: "Alpha was rewritten about omega." },
    ]);
    expect(changed).toMatchObject({ added: 0, updated: 1 });
    expect(ftsHits(db, "beginnings")).toBe(0);
    expect(ftsHits(db, "omega")).toBe(1);
    const s = CorpusSource.open(db);
    expect(s.stats().documents).toBe(3);
    const lookup = await s.getPage("Alpha");
    expect(lookup.status === "found" && lookup.page.text).toBe("Alpha was rewritten about omega.");
    // Aliases and metadata survive.
    const viaAlias = await s.getPage("b (LETTER)");
    expect(viaAlias.status === "found" && viaAlias.page.title).toBe("Beta");
    const gamma = await s.getPage("Gamma");
    expect(gamma.status === "found" && gamma.page.url).toBe("https://example.org/gamma");
    expect((await s.search("gamma rays"))[0]).toMatchObject({
      title: "Gamma",
      url: "https://example.org/gamma",
    });
    await s.close();
  });

  it("titles differing only in case are two pages within one ingest; redirects keep theirs", async () => {
    const db = join(tmp.dir, "case.db");
    const input: ReaderItem[] = [
      {
        kind: "document",
        where: "1",
        doc: { title: "Red meat", text: "Red meat is mammal meat." },
      },
      { kind: "document", where: "2", doc: { title: "Red Meat", text: "Red Meat is a band." } },
      { kind: "redirect", where: "3", from: "US", to: "United States" },
      { kind: "document", where: "4", doc: { title: "United States", text: "A country." } },
      { kind: "document", where: "5", doc: { title: "Us", text: "Us is a 2019 film." } },
      // Same target as "US" and differing only in case: adds nothing.
      { kind: "redirect", where: "6", from: "U.S.", to: "United States" },
      { kind: "redirect", where: "7", from: "u.s.", to: "United States" },
    ];
    const report = await ingestDocuments(db, input);
    expect(report).toMatchObject({ added: 4, updated: 0, aliases: 2 });
    const s = CorpusSource.open(db);
    try {
      expect(s.stats()).toMatchObject({ documents: 4, aliases: 2 });
      const title = async (t: string) => {
        const l = await s.getPage(t);
        return l.status === "found" ? l.page.title : l.status;
      };
      expect(await title("Red Meat")).toBe("Red Meat");
      expect(await title("Red meat")).toBe("Red meat");
      expect(await title("red meat")).toBe("Red meat");
      // The redirect "US" survives the page "Us" that came after it.
      expect(await title("US")).toBe("United States");
      expect(await title("Us")).toBe("Us");
      expect(await title("u.s.")).toBe("United States");
      // Idempotent.
      expect(await ingestDocuments(db, input)).toMatchObject({ added: 0, unchanged: 4 });
      expect(s.stats()).toMatchObject({ documents: 4, aliases: 2 });
    } finally {
      await s.close();
    }
  });

  it("changing the chunk size re-chunks unchanged documents", async () => {
    const db = join(tmp.dir, "rechunk.db");
    const long = { title: "Long", text: "word ".repeat(400) };
    const a = await ingestDocuments(db, [long], { chunkSize: 512, chunkOverlap: 0 });
    const b = await ingestDocuments(db, [long], { chunkSize: 128, chunkOverlap: 0 });
    expect(b.updated).toBe(1);
    expect(b.passages).toBeGreaterThan(a.passages);
  });

  it("JSONL: a broken line is reported with its line number and the rest is ingested", async () => {
    const file = join(tmp.dir, "broken.jsonl");
    writeFileSync(
      file,
      [
        JSON.stringify({ title: "One", text: "First." }),
        '{"title": "Two", "text": "unterminated',
        "",
        JSON.stringify({ title: "Three", text: "Third.", url: "https://x/3", lang: "en" }),
        JSON.stringify({ title: "", text: "no title" }),
        JSON.stringify(["not", "an", "object"]),
        JSON.stringify({ title: "Four", text: 4 }),
      ].join("\n"),
    );
    const db = join(tmp.dir, "broken.db");
    const report = await ingestPath(db, file);
    expect(report.added).toBe(2);
    expect(report.skippedRecords.map((s) => s.where)).toEqual([
      "line 2",
      "line 5",
      "line 6",
      "line 7",
    ]);
    expect(report.skippedRecords[0].reason).toMatch(/invalid JSON/);
    expect(report.skippedRecords[1].reason).toMatch(/title/);
    expect(report.skippedRecords[3].reason).toMatch(/text/);
    const s = CorpusSource.open(db);
    const three = await s.getPage("Three");
    expect(three.status === "found" && three.page.url).toBe("https://x/3");
    await s.close();
  });

  it("folder: .md and .txt files, titles from '# Heading' or the file name, others ignored", async () => {
    const dir = join(tmp.dir, "wiki");
    mkdirSync(join(dir, "sub"), { recursive: true });
    writeFileSync(
      join(dir, "onboarding.md"),
      "# Onboarding guide\n\nWelcome.\n\n## Laptops\nAsk IT for a laptop.",
    );
    writeFileSync(join(dir, "sub", "vacation_policy.txt"), "Employees get 25 days of vacation.");
    writeFileSync(join(dir, "image.png"), "not text");
    writeFileSync(join(dir, ".hidden.md"), "# Hidden\nsecret");
    const db = join(tmp.dir, "folder.db");
    const report = await ingestPath(db, dir);
    expect(report.added).toBe(2);
    const s = CorpusSource.open(db);
    expect((await s.search("laptop"))[0].title).toBe("Onboarding guide");
    const { passages } = await s.retrievePassages("Onboarding guide", "laptop");
    expect(passages[0].section).toBe("Laptops");
    const vac = await s.getPage("vacation policy");
    expect(vac.status === "found" && vac.page.source).toBe(join("sub", "vacation_policy.txt"));
    await s.close();
  });

  it("a folder's resume key changes when any file in it changes", () => {
    const dir = join(tmp.dir, "keyed");
    mkdirSync(join(dir, "deep"), { recursive: true });
    writeFileSync(join(dir, "deep", "a.md"), "one");
    const before = openReader(dir).sourceKey;
    expect(openReader(dir).sourceKey).toBe(before);
    writeFileSync(join(dir, "deep", "a.md"), "one, edited");
    expect(openReader(dir).sourceKey).not.toBe(before);
  });

  it("an ingest that crashes midway resumes where it stopped, without duplicates", async () => {
    const db = join(tmp.dir, "resume.db");
    const all = Array.from({ length: 50 }, (_, i) => ({
      title: `Doc ${i}`,
      text: `Document number ${i}.`,
    }));
    async function* crashing() {
      for (const [i, d] of all.entries()) {
        if (i === 25) throw new Error("power cut");
        yield d;
      }
    }
    await expect(
      ingestDocuments(db, crashing(), { batchSize: 10, sourceKey: "k" }),
    ).rejects.toThrow("power cut");
    const partial = CorpusSource.open(db);
    expect(partial.stats().documents).toBe(20); // two committed batches
    await partial.close();
    const resumed = await ingestDocuments(db, all, { batchSize: 10, sourceKey: "k" });
    expect(resumed.resumedFrom).toBe(20);
    expect(resumed.added).toBe(30);
    const s = CorpusSource.open(db);
    expect(s.stats().documents).toBe(50);
    await s.close();
    // An interrupted run is not resumed with other settings: those records must be redone.
    await expect(
      ingestDocuments(db, crashing(), { batchSize: 10, sourceKey: "k2" }),
    ).rejects.toThrow();
    const otherSettings = await ingestDocuments(db, all, {
      batchSize: 10,
      sourceKey: "k2",
      chunkSize: 256,
      chunkOverlap: 0,
    });
    expect(otherSettings).toMatchObject({ resumedFrom: 0, updated: 50 });
    await ingestDocuments(db, all, { batchSize: 10, sourceKey: "k" });
    // A completed run is not "resumed" again: the next run reads everything (all unchanged).
    const rerun = await ingestDocuments(db, all, { batchSize: 10, sourceKey: "k" });
    expect(rerun).toMatchObject({ resumedFrom: 0, unchanged: 50 });
  });

  it("an abort signal stops after the current batch and the next run resumes", async () => {
    const db = join(tmp.dir, "abort.db");
    const all = Array.from({ length: 40 }, (_, i) => ({
      title: `Item ${i}`,
      text: `Item text ${i}.`,
    }));
    const controller = new AbortController();
    const first = await ingestDocuments(db, all, {
      batchSize: 10,
      sourceKey: "abort",
      signal: controller.signal,
      onProgress: (p) => {
        if (p.records >= 10) controller.abort();
      },
    });
    expect(first.interrupted).toBe(true);
    expect(first.added).toBe(10);
    const second = await ingestDocuments(db, all, { batchSize: 10, sourceKey: "abort" });
    expect(second).toMatchObject({ resumedFrom: 10, added: 30, interrupted: false });
  });

  it("disambiguation metadata makes getPage answer with the options", async () => {
    const db = join(tmp.dir, "disambig.db");
    await ingestDocuments(db, [
      {
        title: "Mercury",
        text: "Mercury may refer to several things.",
        metadata: { disambiguation: true, options: ["Mercury (planet)", "Mercury (element)"] },
      },
      { title: "Mercury (planet)", text: "The smallest planet." },
    ]);
    const s = CorpusSource.open(db);
    expect(await s.getPage("mercury")).toEqual({
      status: "disambiguation",
      title: "Mercury",
      options: ["Mercury (planet)", "Mercury (element)"],
    });
    const r = await s.retrievePassages("Mercury", "planet");
    expect(r.passages).toEqual([]);
    await s.close();
  });
});
