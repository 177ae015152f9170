import { describe, expect, it } from "vitest";
import { extractDocument, type ExtractOptions } from "../../src/ingest/documents.ts";
import {
  billionLaughs,
  deepHtml,
  manyEntriesZip,
  zipFiles,
  zipStream,
  type RepeatedEntry,
} from "./hostile-files.ts";
import { makeEpub, makeOdt, makePptx, makeWorkbook } from "./office-files.ts";

// The readers of issue 28's inspect_file and issue 29's ingest, each on a real file made in the
// test, and each refusing a bomb of its own format (issue 22).

/** The error code and message `extractDocument` rejects with (fails when it resolves). */
async function refusal(name: string, bytes: Uint8Array, options: ExtractOptions = {}) {
  try {
    const doc = await extractDocument({ name }, bytes, options);
    throw new Error(`${name} was read (${doc.text.slice(0, 80)}...), not refused`);
  } catch (err) {
    const e = err as { code?: string; message: string; limit?: string };
    if (!e.code) throw err;
    return { code: e.code, message: e.message, limit: e.limit };
  }
}

/** 400 MB of a repeated XML element inside `open` ... `close`. */
const inflating = (open: string, unit: string, close: string): RepeatedEntry => ({
  head: open,
  unit,
  bytes: 400 * 1024 * 1024,
  tail: close,
});

const SHEETS = {
  Budget: [
    ["Item", "Cost"],
    ["Laptops", 1200],
    ["Desks", 300.5],
  ],
  "Q2 notes": [["Remark"], ["Costs | rose"]],
};

describe("spreadsheets", () => {
  for (const [ext, bookType] of [
    ["xlsx", "xlsx"],
    ["ods", "ods"],
    ["xls", "biff8"],
  ] as const) {
    it(`${ext}: every sheet as a Markdown table under its name`, async () => {
      const doc = await extractDocument({ name: `budget.${ext}` }, makeWorkbook(SHEETS, bookType));
      expect(doc).toMatchObject({ kind: ext, sheets: ["Budget", "Q2 notes"], truncated: false });
      expect(doc.text).toBe(
        [
          "## Sheet: Budget",
          "| Item | Cost |",
          "| --- | --- |",
          "| Laptops | 1200 |",
          "| Desks | 300.5 |",
          "",
          "## Sheet: Q2 notes",
          "| Remark |",
          "| --- |",
          "| Costs \\| rose |",
        ].join("\n"),
      );
    }, 60_000);
  }

  it("csv (and tsv): a Markdown table; quoted commas kept; rows past the cap left out and said", async () => {
    const doc = await extractDocument(
      { name: "people.csv" },
      Buffer.from('name,age\nAnn,31\n"Bob, Jr",40\n'),
    );
    expect(doc.text).toBe("| name | age |\n| --- | --- |\n| Ann | 31 |\n| Bob, Jr | 40 |");
    const tsv = await extractDocument({ name: "p.tsv" }, Buffer.from("a\tb\n1\t2\n"));
    expect(tsv.text).toBe("| a | b |\n| --- | --- |\n| 1 | 2 |");
    const rows = Array.from({ length: 25_000 }, (_, i) => `${i},row ${i}`).join("\n");
    const big = await extractDocument({ name: "big.csv" }, Buffer.from(`n,label\n${rows}`));
    expect(big.truncation).toBe("kept the first 20000 of 25001 rows");
  }, 60_000);

  it("an XLSX whose sheet inflates to 400 MB, or declares XML entities, is refused", async () => {
    const parts = (sheet: string | RepeatedEntry) => ({
      "[Content_Types].xml": "<Types/>",
      "xl/workbook.xml":
        '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheets><sheet name="S" sheetId="1"/></sheets></workbook>',
      "xl/worksheets/sheet1.xml": sheet,
    });
    const bomb = await refusal(
      "bomb.xlsx",
      zipStream(
        parts(
          inflating(
            "<worksheet><sheetData>",
            "<row><c><v>1</v></c></row>",
            "</sheetData></worksheet>",
          ),
        ),
      ),
    );
    expect(bomb).toMatchObject({ code: "CODEHOP_INPUT_LIMIT", limit: "maxInflatedMb" });
    expect(bomb.message).toContain("bomb.xlsx (xl/worksheets/sheet1.xml)");
    const laughs = await refusal("laughs.xlsx", zipStream(parts(billionLaughs("worksheet"))));
    expect(laughs).toMatchObject({ code: "CODEHOP_INPUT_LIMIT", limit: "xmlEntities" });
  }, 60_000);

  it("an ODS whose content inflates to 400 MB is refused", async () => {
    const bomb = zipStream({
      mimetype: "application/vnd.oasis.opendocument.spreadsheet",
      "content.xml": inflating(
        "<office:document-content>",
        "<table:table-row/>",
        "</office:document-content>",
      ),
    });
    expect(await refusal("bomb.ods", bomb)).toMatchObject({ limit: "maxInflatedMb" });
  }, 60_000);
});

describe("presentations, documents, books", () => {
  it("pptx: one section per slide with its title, its text and its speaker notes", async () => {
    const pptx = await makePptx([
      {
        title: "Roadmap",
        lines: ["Ship v2 in May", "Hire two engineers"],
        notes: "Mention the budget.",
      },
      { title: "Risks", lines: ["Parts arrive late"] },
    ]);
    const doc = await extractDocument({ name: "plan.pptx" }, pptx);
    expect(doc).toMatchObject({ kind: "pptx", slides: 2 });
    expect(doc.text).toBe(
      [
        "## Slide 1: Roadmap",
        "Ship v2 in May",
        "Hire two engineers",
        "Notes: Mention the budget.",
        "",
        "## Slide 2: Risks",
        "Parts arrive late",
      ].join("\n"),
    );
  }, 60_000);

  it("a PPTX whose slide declares XML entities is refused", async () => {
    const bomb = zipFiles({
      "ppt/presentation.xml":
        '<p:presentation xmlns:p="p" xmlns:r="r"><p:sldIdLst><p:sldId id="256" r:id="rId1"/></p:sldIdLst></p:presentation>',
      "ppt/_rels/presentation.xml.rels":
        '<Relationships><Relationship Id="rId1" Type="slide" Target="slides/slide1.xml"/></Relationships>',
      "ppt/slides/slide1.xml": billionLaughs("p:sld"),
    });
    expect(await refusal("laughs.pptx", bomb)).toMatchObject({
      code: "CODEHOP_INPUT_LIMIT",
      limit: "xmlEntities",
    });
  }, 60_000);

  it("odt: headings by outline level, paragraphs; nesting past the XML limit refused", async () => {
    const odt = makeOdt([
      { h: 1, text: "Minutes" },
      { text: 'We met on <text:s text:c="2"/>Tuesday.' },
      { h: 2, text: "Actions" },
      { text: "Buy chairs." },
    ]);
    const doc = await extractDocument({ name: "minutes.odt" }, odt);
    expect(doc).toMatchObject({ kind: "odt" });
    expect(doc.text).toBe("# Minutes\n\nWe met on   Tuesday.\n\n## Actions\n\nBuy chairs.");
    const deep = makeOdt([{ text: `${"<text:span>".repeat(400)}x${"</text:span>".repeat(400)}` }]);
    expect(await refusal("deep.odt", deep)).toMatchObject({ limit: "maxXmlDepth" });
  }, 60_000);

  it("epub: its title, chapters in reading order (headed when they have no heading)", async () => {
    const epub = makeEpub("A Tale", [
      "<h1>Opening</h1><p>It was the best of times.</p>",
      "<p>No heading in this one.</p>",
    ]);
    const doc = await extractDocument({ name: "tale.epub" }, epub);
    expect(doc).toMatchObject({ kind: "epub", title: "A Tale", chapters: 2 });
    expect(doc.text).toBe(
      "# Opening\n\nIt was the best of times.\n\n## Chapter 2\nNo heading in this one.",
    );
  }, 60_000);

  it("an EPUB chapter nested 1,000 deep, or inflating to 400 MB, is refused", async () => {
    const deep = makeEpub("Deep", [new TextDecoder().decode(deepHtml(1000))]);
    expect(await refusal("deep.epub", deep)).toMatchObject({ limit: "maxXmlDepth" });
    const container = '<container><rootfiles><rootfile full-path="c.opf"/></rootfiles></container>';
    const bomb = zipStream({
      mimetype: "application/epub+zip",
      "META-INF/container.xml": container,
      "c.opf":
        '<package><manifest><item id="a" href="a.xhtml" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="a"/></spine></package>',
      "a.xhtml": inflating("<html><body>", "<p>bomb</p>", "</body></html>"),
    });
    expect(await refusal("bomb.epub", bomb)).toMatchObject({ limit: "maxInflatedMb" });
  }, 60_000);
});

describe("data files and archives", () => {
  it("json: pretty-printed; invalid JSON says where; nesting past the limit refused", async () => {
    const doc = await extractDocument({ name: "d.json" }, Buffer.from('{"a":[1,{"b":"c"}]}'));
    expect(doc.text).toBe('{\n  "a": [\n    1,\n    {\n      "b": "c"\n    }\n  ]\n}');
    const bad = await refusal("bad.json", Buffer.from('{"a": }'));
    expect(bad.code).toBe("CODEHOP_INPUT_INVALID");
    expect(bad.message).toMatch(/^bad\.json is not valid JSON \(/);
    const deep = await refusal(
      "deep.json",
      Buffer.from(`${"[".repeat(100_000)}${"]".repeat(100_000)}`),
    );
    expect(deep.code).toBe("CODEHOP_INPUT_LIMIT");
  }, 60_000);

  it("xml: kept as written once well-formed; billion laughs and malformed XML refused", async () => {
    const xml = '<?xml version="1.0"?>\n<catalog><book id="1">Dune</book></catalog>';
    expect((await extractDocument({ name: "c.xml" }, Buffer.from(xml))).text).toBe(xml);
    expect(await refusal("laughs.xml", Buffer.from(billionLaughs()))).toMatchObject({
      code: "CODEHOP_INPUT_LIMIT",
      limit: "xmlEntities",
    });
    const bad = await refusal("bad.xml", Buffer.from("<a><b></a>"));
    expect(bad.code).toBe("CODEHOP_INPUT_INVALID");
    expect(bad.message).toMatch(/^bad\.xml is not well-formed XML/);
  }, 60_000);

  it("zip: listed with sizes and types; a member read with its own reader; a bomb member refused", async () => {
    const zip = zipFiles({
      "docs/readme.md": "# Read me\n\nInstall with npm.",
      "data/costs.csv": "item,cost\nchair,40\n",
      "logo.png": new Uint8Array([0x89, 0x50, 0x4e, 0x47]),
    });
    const listing = await extractDocument({ name: "bundle.zip" }, zip);
    expect(listing).toMatchObject({
      kind: "zip",
      entries: [
        { name: "docs/readme.md", size: 28, kind: "markdown" },
        { name: "data/costs.csv", size: 19, kind: "csv" },
        { name: "logo.png", size: 4 },
      ],
    });
    expect(listing.text).toContain("## Archive: bundle.zip (3 files)");
    expect(listing.text).toContain("| data/costs.csv | 19 B | CSV table |");
    const csv = await extractDocument({ name: "bundle.zip" }, zip, { member: "data/costs.csv" });
    expect(csv).toMatchObject({ kind: "csv", member: { name: "data/costs.csv", kind: "csv" } });
    expect(csv.text).toBe("| item | cost |\n| --- | --- |\n| chair | 40 |");
    const png = await refusal("bundle.zip", zip, { member: "logo.png" });
    expect(png.message).toMatch(/^bundle\.zip \(logo\.png\) is an image/);
    const missing = await refusal("bundle.zip", zip, { member: "nope.txt" });
    expect(missing.message).toBe("bundle.zip has no entry nope.txt.");

    const bomb = zipStream({ "huge.txt": { unit: "A", bytes: 400 * 1024 * 1024 } });
    expect((await extractDocument({ name: "bomb.zip" }, bomb)).entries).toEqual([
      { name: "huge.txt", size: 400 * 1024 * 1024, kind: "text" },
    ]);
    expect(await refusal("bomb.zip", bomb, { member: "huge.txt" })).toMatchObject({
      code: "CODEHOP_INPUT_LIMIT",
      limit: "maxInflatedMb",
    });
    expect(await refusal("many.zip", manyEntriesZip(10_001))).toMatchObject({
      limit: "maxEntries",
    });
  }, 60_000);
});
