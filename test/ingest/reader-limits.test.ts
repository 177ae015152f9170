import { describe, expect, it } from "vitest";
import { readEnv } from "../../src/config/env.ts";
import { extractDocument, type ExtractOptions } from "../../src/ingest/documents.ts";
import { readerStats } from "../../src/ingest/reader-pool.ts";
import { READER_LIMITS, readerLimitsFromEnv } from "../../src/ingest/reader-limits.ts";
import { makePdf } from "../chat/documents.ts";
import {
  deepHtml,
  docxBillionLaughs,
  docxBomb,
  docxDeepXml,
  docxParts,
  documentXml,
  manyEntriesZip,
  pdfFlateBomb,
  pdfObjectLoops,
  zipFiles,
  zipStream,
} from "./hostile-files.ts";

// Hostile files (issue 22): every one ends, refused with CODEHOP_INPUT_LIMIT (or INPUT_INVALID
// when it is damaged) naming the file and the limit, long before it could fill memory or keep a
// reader busy. Limits are the defaults unless a test is about raising one.

/** The error `extractDocument` rejects with (fails the test when it resolves). */
async function refusal(
  name: string,
  bytes: Uint8Array,
  options: ExtractOptions = {},
): Promise<{ code: string; message: string; limit?: string }> {
  try {
    const doc = await extractDocument({ name }, bytes, options);
    throw new Error(`${name} was read (${doc.text.length} characters), not refused`);
  } catch (err) {
    const e = err as { code?: string; message: string; limit?: string };
    if (!e.code) throw err;
    return { code: e.code, message: e.message, limit: e.limit };
  }
}

describe("archives (DOCX)", () => {
  it("the issue's DOCX (about 1 MB inflating to 400 MB) is refused, naming the file, the limit and its variable", async () => {
    const bomb = docxBomb(400);
    expect(bomb.length).toBeLessThan(2 * 1024 * 1024);
    const err = await refusal("bomb.docx", bomb);
    expect(err).toMatchObject({ code: "CODEHOP_INPUT_LIMIT", limit: "maxInflatedMb" });
    expect(err.message).toContain("bomb.docx (word/document.xml)");
    expect(err.message).toContain("100 MB");
    expect(err.message).toContain("CODEHOP_READER_MAX_INFLATED_MB");
  }, 60_000);

  it("an entry inflating far more than it weighs is refused by its ratio, before the inflated-bytes limit", async () => {
    const err = await refusal("ratio.docx", docxBomb(40), { limits: { maxInflatedMb: 1000 } });
    expect(err).toMatchObject({ code: "CODEHOP_INPUT_LIMIT", limit: "maxRatio" });
    expect(err.message).toMatch(/compression ratio \(\d+:1, a ZIP bomb\?\) went past the 200:1/);
  }, 60_000);

  it("an entry that inflates past the size its directory declares is stopped while streaming", async () => {
    // 30 MB of text declared as 2 MB: the declared checks pass, the stream is cut at 2 MB.
    const bytes = Buffer.from(
      zipStream(
        docxParts({
          head: documentXml("").replace("</w:body></w:document>", ""),
          unit: "<w:p><w:r><w:t>lying sizes</w:t></w:r></w:p>",
          bytes: 30 * 1024 * 1024,
          tail: "</w:body></w:document>",
        }),
      ),
    );
    const lie = 2 * 1024 * 1024;
    // The central directory's record of word/document.xml: its uncompressed size is at +24.
    const name = Buffer.from("word/document.xml");
    for (let at = bytes.indexOf("PK\x01\x02"); at >= 0; at = bytes.indexOf("PK\x01\x02", at + 4)) {
      const nameLength = bytes.readUInt16LE(at + 28);
      if (bytes.subarray(at + 46, at + 46 + nameLength).equals(name))
        bytes.writeUInt32LE(lie, at + 24);
    }
    const err = await refusal("lying.docx", bytes, { limits: { maxRatio: 100_000 } });
    expect(err.code).toBe("CODEHOP_INPUT_INVALID");
    expect(err.message).toMatch(/lying\.docx \(word\/document\.xml\) is damaged \(too many bytes/);
  }, 60_000);

  it("an archive listing more entries than the limit is refused before any entry is read", async () => {
    const err = await refusal("many.docx", manyEntriesZip(READER_LIMITS.maxEntries + 1));
    expect(err).toMatchObject({ code: "CODEHOP_INPUT_LIMIT", limit: "maxEntries" });
    expect(err.message).toContain(`lists ${READER_LIMITS.maxEntries + 1} entries`);
  }, 60_000);

  it("XML declaring entities (billion laughs) is refused; XML nested past the limit too, unless it is raised", async () => {
    const laughs = await refusal("laughs.docx", docxBillionLaughs());
    expect(laughs).toMatchObject({ code: "CODEHOP_INPUT_LIMIT", limit: "xmlEntities" });
    expect(laughs.message).toContain("laughs.docx (word/document.xml): the XML declares entities");
    const deep = await refusal("deep.docx", docxDeepXml(300));
    expect(deep).toMatchObject({ code: "CODEHOP_INPUT_LIMIT", limit: "maxXmlDepth" });
    expect(deep.message).toContain("CODEHOP_READER_MAX_XML_DEPTH");
    const read = await extractDocument({ name: "deep.docx" }, docxDeepXml(300), {
      limits: { maxXmlDepth: 1000 },
    });
    expect(read.text).toBe("deep");
  }, 60_000);

  it("a corrupt archive is INPUT_INVALID saying so", async () => {
    const good = zipFiles(docxParts(documentXml("<w:p><w:r><w:t>x</w:t></w:r></w:p>")) as never);
    const err = await refusal("cut.docx", good.subarray(0, good.length - 30));
    expect(err.code).toBe("CODEHOP_INPUT_INVALID");
    expect(err.message).toMatch(/^cut\.docx is a corrupt DOCX file/);
  }, 60_000);
});

describe("HTML and PDF", () => {
  it("HTML nested 200,000 elements deep is refused at the nesting limit, at once", async () => {
    const err = await refusal("deep.html", deepHtml(200_000));
    expect(err).toMatchObject({ code: "CODEHOP_INPUT_LIMIT", limit: "maxXmlDepth" });
    expect(err.message).toContain("deep.html: the HTML's element nesting went past");
    // Unclosed paragraphs and list items do not nest: a long page of them reads.
    const flat = `<ul>${"<li>item <p>para".repeat(5000)}</ul>`;
    const doc = await extractDocument({ name: "flat.html" }, Buffer.from(flat));
    expect(doc.text).toContain("item");
  }, 60_000);

  it("a PDF whose stream inflates to 300 MB is refused for memory, before it got much past it", async () => {
    let usage: { peakRssMb?: number } = {};
    const bomb = await pdfFlateBomb(300);
    const err = await refusal("flate.pdf", bomb, { onUsage: (u) => (usage = u) });
    expect(err).toMatchObject({ code: "CODEHOP_INPUT_LIMIT", limit: "memoryMb" });
    expect(err.message).toContain("192 MB memory limit of a reader (CODEHOP_READER_MEMORY_MB");
    // Polled every 50 ms: the process never got far past its limit.
    if (usage.peakRssMb !== undefined) expect(usage.peakRssMb).toBeLessThan(400);
  }, 120_000);

  it("a PDF whose page tree loops is refused as damaged; a form that draws itself is read once", async () => {
    const loops = pdfObjectLoops();
    const tree = await refusal("tree.pdf", loops.pageTree);
    expect(tree.code).toBe("CODEHOP_INPUT_INVALID");
    expect(tree.message).toContain("circular reference");
    const form = await extractDocument({ name: "form.pdf" }, loops.selfDrawingForm);
    expect(form.text).toBe("## p. 1\nagain");
  }, 60_000);

  it("a long PDF is read up to the time limit, marked truncated with the pages read and why", async () => {
    const pages = Array.from({ length: 400 }, (_, i) => `Page ${i + 1} of the long report.`);
    const pdf = await makePdf(pages);
    const doc = await extractDocument({ name: "long.pdf" }, pdf, { limits: { timeoutMs: 150 } });
    expect(doc.truncated).toBe(true);
    expect(doc.pages).toBe(400);
    expect(doc.truncation).toMatch(
      /^read \d+ of 400 pages within the 0\.15 s reading time limit \(CODEHOP_READER_TIMEOUT_MS raises it\)$/,
    );
    expect(doc.text).toContain("## p. 1\nPage 1 of the long report.");
    const capped = await extractDocument({ name: "long.pdf" }, pdf, { limits: { maxPages: 3 } });
    expect(capped.truncation).toBe(
      "read the first 3 of 400 pages (the page limit, CODEHOP_READER_MAX_PAGES)",
    );
  }, 120_000);
});

describe("reader processes", () => {
  const page = Buffer.from(
    `<html><body>${"<p>The toll for a car is 4 dollars.</p>".repeat(40_000)}</body></html>`,
  );

  it("a read past its time is stopped: INPUT_LIMIT naming the time limit", async () => {
    const err = await refusal("slow.html", page, { limits: { timeoutMs: 50 } });
    expect(err).toMatchObject({ code: "CODEHOP_INPUT_LIMIT", limit: "timeoutMs" });
    expect(err.message).toBe(
      "slow.html: reading it went past the 0.05 s reading time limit (CODEHOP_READER_TIMEOUT_MS raises it)",
    );
    expect(readerStats()).toMatchObject({ running: 0, waiting: 0 });
  }, 60_000);

  it("aborting the caller's signal stops the read with the signal's reason", async () => {
    const controller = new AbortController();
    const reason = new Error("run cancelled");
    const reading = extractDocument({ name: "p.html" }, page, { signal: controller.signal });
    setTimeout(() => controller.abort(reason), 50);
    await expect(reading).rejects.toBe(reason);
    expect(readerStats()).toMatchObject({ running: 0, waiting: 0 });
  }, 60_000);

  it("limits come from CODEHOP_READER_* over the defaults; nonsense is CONFIG_INVALID", () => {
    const env = readEnv({ CODEHOP_READER_TIMEOUT_MS: "9000", CODEHOP_READER_MEMORY_MB: "512" });
    expect(readerLimitsFromEnv(env)).toEqual({
      ...READER_LIMITS,
      timeoutMs: 9000,
      memoryMb: 512,
    });
    expect(() => readEnv({ CODEHOP_READER_MAX_RATIO: "0" })).toThrow(/CODEHOP_READER_MAX_RATIO/);
  });
});
