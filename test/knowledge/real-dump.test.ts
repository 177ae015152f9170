import { copyFileSync, createReadStream, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import bz2 from "unbzip2-stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { detectFormat, ingestPath } from "../../src/ingest/index.ts";
import { CorpusSource } from "../../src/store/corpus-source.ts";
import { tempDir } from "./helpers.ts";

// Twelve pages of a real English Wikipedia split dump (gensim's test excerpt, CC BY-SA; see
// test/fixtures/real/README.md), under Wikimedia's split-dump file name.
const DUMP = join(
  import.meta.dirname,
  "../fixtures/real/enwiki-excerpt.xml-p000000010p000030302.bz2",
);
const ARTICLES = [
  "Abacus",
  "Academy Award for Best Production Design",
  "Alkane",
  "Ambiguity",
  "America the Beautiful",
  "American Football Conference",
  "Animal Farm",
];

const tmp = tempDir();
let xml: Buffer;
let source: CorpusSource;

beforeAll(async () => {
  // unbzip2-stream is an old-style stream: collect its data events.
  xml = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    createReadStream(DUMP)
      .pipe(bz2())
      .on("data", (c: Buffer) => chunks.push(c))
      .on("end", () => resolve(Buffer.concat(chunks)))
      .on("error", reject);
  });
  const db = join(tmp.dir, "dump.db");
  await ingestPath(db, DUMP);
  source = CorpusSource.open(db);
});
afterAll(async () => {
  await source.close();
  tmp.cleanup();
});

/** Every document title and text of a corpus file. */
function documents(db: string): { title: string; text: string }[] {
  const conn = new Database(db, { readonly: true });
  try {
    return conn.prepare("SELECT title, text FROM documents ORDER BY title").all() as {
      title: string;
      text: string;
    }[];
  } finally {
    conn.close();
  }
}

async function text(title: string): Promise<string> {
  const lookup = await source.getPage(title);
  if (lookup.status !== "found") throw new Error(`${title}: ${lookup.status}`);
  return lookup.page.text;
}

describe("a real Wikipedia split dump (enwiki excerpt)", () => {
  it("is recognised by its split-dump name (*.xml-p10p30302.bz2) and read as bzip2", async () => {
    expect(detectFormat(DUMP)).toBe("mediawiki-xml");
    expect(documents(join(tmp.dir, "dump.db")).map((d) => d.title)).toEqual(ARTICLES);
    // Compression is read from the bytes, not the name.
    const renamed = join(tmp.dir, "dump-renamed.xml");
    copyFileSync(DUMP, renamed);
    const report = await ingestPath(join(tmp.dir, "renamed.db"), renamed);
    expect(report).toMatchObject({ added: ARTICLES.length, skipped: 0 });
  });

  it("keeps infoboxes and tables as readable rows", async () => {
    const afc = await text("American Football Conference");
    expect(afc).toContain("founded: 1970\nteams: 16\n");
    expect(afc).toContain(
      "Division: North; Team: Pittsburgh Steelers; City/Town: Pittsburgh, PA; Stadium: Heinz Field",
    );
    // Pictures and layout fields of the infobox are not facts.
    expect(afc).not.toMatch(/\.(svg|png)\b/);
    const song = await text("America the Beautiful");
    expect(song).toMatch(/^writer: Katharine Lee Bates\ncomposer: Samuel A\. Ward$/m);
    // The lead's prose comes first (search summaries show the page's start).
    expect(song.startsWith('"America the Beautiful" is an American patriotic song.')).toBe(true);
  });

  it("leaves no markup behind: legend templates, nested image links, stray quotes, entities, list tags", async () => {
    for (const title of ARTICLES) {
      const body = await text(title);
      for (const leftover of ["{{", "}}", "[[", "]]", "''", "&#", "<li", "px|"])
        expect(body, `${title} contains ${leftover}`).not.toContain(leftover);
      expect(body, title).not.toMatch(/&[a-z]+;/);
    }
    expect(await text("Academy Award for Best Production Design")).not.toContain("FAEB86");
    // "[[Image:...|250px|[[Clemmensen Reduction]]]]" inside a list item is gone, the list stays.
    expect(await text("Alkane")).toContain("and the Clemmensen reduction");
    // <li> items become list lines.
    expect(await text("Animal Farm")).toContain(" * No animal shall drink alcohol to excess.");
  });

  it("counts redirects as the corpus stores them, case variants included", async () => {
    // AccessibleComputing, AbeL and Abel (same target: one is enough), AbacuS (= Abacus, a page).
    expect(source.stats().aliases).toBe(2);
    const db = join(tmp.dir, "count.db");
    const report = await ingestPath(db, DUMP);
    const conn = new Database(db, { readonly: true });
    const rows = (conn.prepare("SELECT count(*) AS n FROM aliases").get() as { n: number }).n;
    conn.close();
    expect(report.aliases).toBe(rows);
    // A redirect differing only in case from a page leads to that page.
    const abacus = await source.getPage("AbacuS");
    expect(abacus.status === "found" && abacus.page.title).toBe("Abacus");
  });

  it("skips project pages, also in an old export without <ns> elements", async () => {
    expect((await source.getPage("Wikipedia:Adding Wikipedia articles to Nupedia")).status).toBe(
      "missing",
    );
    const old = join(tmp.dir, "old-export.xml");
    writeFileSync(old, xml.toString("utf8").replace(/\s*<ns>\d+<\/ns>/g, ""));
    expect(xml.toString("utf8")).toContain("<ns>4</ns>");
    const db = join(tmp.dir, "old.db");
    const report = await ingestPath(db, old);
    expect(report).toMatchObject({ added: ARTICLES.length, aliases: 2 });
    expect(documents(db).map((d) => d.title)).toEqual(ARTICLES);
  });

  it("reads the same dump re-encoded as UTF-16 (LE or BE, with or without a byte order mark)", async () => {
    const expected = documents(join(tmp.dir, "dump.db"));
    const utf16 = xml
      .toString("utf8")
      .replace("<mediawiki", '<?xml version="1.0" encoding="UTF-16"?>\n<mediawiki');
    const le = Buffer.from(utf16, "utf16le");
    const be = Buffer.from(le).swap16();
    const variants: [string, Buffer][] = [
      ["le-bom", Buffer.concat([Buffer.from([0xff, 0xfe]), le])],
      ["be-bom", Buffer.concat([Buffer.from([0xfe, 0xff]), be])],
      ["le", le],
    ];
    for (const [name, bytes] of variants) {
      const file = join(tmp.dir, `${name}.xml`);
      writeFileSync(file, bytes);
      const db = join(tmp.dir, `${name}.db`);
      const report = await ingestPath(db, file);
      expect(report, name).toMatchObject({ added: ARTICLES.length, skipped: 0 });
      expect(documents(db), name).toEqual(expected);
    }
  });
});
