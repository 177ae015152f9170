import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { ingestPath } from "../../src/ingest/index.ts";
import { readMediaWikiXml, wikitextToDocument } from "../../src/ingest/mediawiki-xml.ts";
import type { ReaderItem } from "../../src/ingest/types.ts";
import { CorpusSource } from "../../src/store/corpus-source.ts";
import { makeDump } from "./fixtures/make-dump.ts";
import { tempDir } from "./helpers.ts";

const tmp = tempDir();
afterAll(() => tmp.cleanup());
const BZ2 = join(import.meta.dirname, "fixtures", "mini-dump.xml.bz2");

async function collect(items: AsyncIterable<ReaderItem>): Promise<ReaderItem[]> {
  const out: ReaderItem[] = [];
  for await (const i of items) out.push(i);
  return out;
}

describe("MediaWiki XML dump ingestion", () => {
  it("turns wikitext into clean text with headings; skips talk pages; keeps redirects and disambiguation", async () => {
    const xml = join(tmp.dir, "dump.xml");
    writeFileSync(xml, makeDump(300));
    const db = join(tmp.dir, "xml.db");
    const report = await ingestPath(db, xml);
    expect(report).toMatchObject({ added: 301, aliases: 1, skipped: 1 });
    expect(report.skippedRecords).toEqual([
      { where: "page 304 (Empty template page)", reason: "no text after removing markup" },
    ]);
    const s = CorpusSource.open(db);
    const lookup = await s.getPage("Town 1"); // a redirect
    expect(lookup.status).toBe("found");
    if (lookup.status === "found") {
      expect(lookup.page.title).toBe("Synthetic town 1");
      expect(lookup.page.text).toBe(
        "Synthetic town 1 is a town in the Kingdom of Ruritania with 1001 inhabitants. Its name is written Šynthétic-1 in Ruritanian.\n\n" +
          // The infobox, as rows after the lead's prose.
          "name: Synthetic town 1\npopulation: 1001\n\n" +
          "## History\nThe town was founded in 1201 by Duke Rudolf and received a market charter later.\n\n" +
          "### Bridge\nA stone bridge over the river Zenda was built in 1501.",
      );
    }
    expect((await s.getPage("Talk:Synthetic town 1")).status).toBe("missing");
    expect(await s.getPage("Zenda")).toEqual({
      status: "disambiguation",
      title: "Zenda",
      options: ["Zenda (river)", "The Prisoner of Zenda"],
    });
    const { passages } = await s.retrievePassages(
      "Synthetic town 42",
      "when was the bridge built",
      { k: 1 },
    );
    expect(passages[0]).toMatchObject({
      section: "Bridge",
      text: "A stone bridge over the river Zenda was built in 1542.",
    });
    await s.close();
  });

  it("reads the bzip2-compressed dump to the same corpus", async () => {
    const plain = join(tmp.dir, "xml.db");
    const db = join(tmp.dir, "bz2.db");
    const report = await ingestPath(db, BZ2);
    expect(report).toMatchObject({ added: 301, aliases: 1, skipped: 1 });
    const a = CorpusSource.open(plain);
    const b = CorpusSource.open(db);
    for (const t of ["Synthetic town 7", "Synthetic town 300"]) {
      expect(await b.getPage(t)).toEqual(await a.getPage(t));
    }
    await a.close();
    await b.close();
  });

  it("keeps multi-byte characters intact when they straddle stream chunks", async () => {
    const xml = Buffer.from(makeDump(3));
    // One byte per chunk: every multi-byte character is split.
    const chunks = Array.from(xml, (byte) => Buffer.from([byte]));
    const items = await collect(readMediaWikiXml(Readable.from(chunks)));
    const doc = items.find((i) => i.kind === "document" && i.doc.title === "Synthetic town 2");
    expect(doc?.kind === "document" && doc.doc.text).toContain("Šynthétic-2");
  });

  it("malformed XML stops with a clear record instead of crashing, keeping earlier pages", async () => {
    const broken = makeDump(5).replace(
      "<title>Synthetic town 4</title>",
      "<title>Synthetic town 4</titl>",
    );
    const items = await collect(readMediaWikiXml(Readable.from([broken])));
    const docs = items.filter((i) => i.kind === "document");
    expect(docs.length).toBe(3);
    const last = items.at(-1)!;
    expect(last.kind).toBe("skip");
    expect(last.kind === "skip" && last.reason).toMatch(/stopped reading/);
  });

  it("corrupt bzip2 data is reported, not thrown", async () => {
    const bad = join(tmp.dir, "bad.xml.bz2");
    writeFileSync(bad, Buffer.from("BZh9this is not bzip2 data at all"));
    const report = await ingestPath(join(tmp.dir, "bad.db"), bad);
    expect(report.added).toBe(0);
    expect(report.skippedRecords[0].reason).toMatch(/stopped reading/);
  });
});

describe("wikitext leftovers (snippets of real English Wikipedia pages, CC BY-SA)", () => {
  const render = (wikitext: string) => wikitextToDocument("Snippet", wikitext).text;

  it("decodes character references after parsing", () => {
    // Apollo 8 and Analysis of variance.
    expect(render('Lovell wrote, "My training &#91;on Apollo 8&#93; came in handy!"')).toBe(
      'Lovell wrote, "My training [on Apollo 8] came in handy!"',
    );
    expect(render("the dependent variable (e.g., &eta;2, &omega;2, or &fnof;2)")).toBe(
      "the dependent variable (e.g., η2, ω2, or ƒ2)",
    );
    // A decoded "[[" is text, not a link.
    expect(render("Brackets: &#91;&#91;not a link&#93;&#93;.")).toBe("Brackets: [[not a link]].");
  });

  it("drops legend keys, file links with nested links, and unbalanced quote runs", () => {
    // Academy Award for Best Production Design.
    expect(
      render(
        "Intro text.\n\n== Best Interior Decoration ==\n{{legend|#FAEB86|indicates the winner}}\nThe winners.",
      ),
    ).toBe("Intro text.\n\n## Best Interior Decoration\nThe winners.");
    // Alkane: an image with a linked caption inside a list item.
    expect(
      render(
        "to form alkanes e.g.:\n* [[Image:Clemmensen Reduction Scheme.png|250px|[[Clemmensen Reduction]]]]\n* second item here\n\nand the rest.",
      ),
    ).toBe("to form alkanes e.g.:\n * second item here\n\nand the rest.");
    // Ambiguity and Animal Farm: bold/italic quotes left unbalanced by the source.
    expect(
      render("used to denote its argument'''. If the Greek letter is used, it is assumed"),
    ).toBe("used to denote its argument. If the Greek letter is used, it is assumed");
    expect(render("* Ice Nine Kills' song, ''The Nature of the Beast\" is inspired by it")).toBe(
      "* Ice Nine Kills' song, The Nature of the Beast\" is inspired by it",
    );
  });

  it("turns HTML list items into list lines", () => {
    // Animal Farm.
    expect(
      render(
        "the changes bolded: <ol><li>No animal shall sleep in a bed.</li><li>No animal shall drink alcohol to excess.</li></ol>",
      ),
    ).toBe(
      "the changes bolded:\n * No animal shall sleep in a bed.\n * No animal shall drink alcohol to excess.",
    );
  });

  it("skips pages outside the main namespace in exports without <ns>, by their title prefix", async () => {
    const page = (title: string, text: string) =>
      `<page><title>${title}</title><revision><text>${text}</text></revision></page>`;
    const oldExport = `<mediawiki version="0.3">${[
      page("Talk:Abacus", "Is this a talk page? Yes."),
      page("User talk:Someone", "Hello."),
      page("Category:Counting", "Counting tools."),
      page("Abacus", "An abacus is a counting frame."),
      page("Star Wars: A New Hope", "A 1977 film."),
    ].join("")}</mediawiki>`;
    const items = await collect(readMediaWikiXml(Readable.from([Buffer.from(oldExport)])));
    expect(items.map((i) => (i.kind === "document" ? i.doc.title : i.kind))).toEqual([
      "Abacus",
      "Star Wars: A New Hope",
    ]);
  });
});
