import * as XLSX from "@e965/xlsx";
import pptxgenjs from "pptxgenjs";
import { zipSync, strToU8 } from "fflate";

/**
 * Real office files made in the test: workbooks (XLSX, ODS, XLS) by SheetJS, presentations (PPTX,
 * with speaker notes) by pptxgenjs; ODT and EPUB, for which no writer is installed, are assembled
 * here part by part as their specifications lay them out (the `mimetype` entry first, stored).
 */

/** A workbook with one sheet per entry (rows of cells), in `bookType`. */
export function makeWorkbook(
  sheets: Record<string, (string | number)[][]>,
  bookType: "xlsx" | "ods" | "biff8" = "xlsx",
): Buffer {
  const book = XLSX.utils.book_new();
  for (const [name, rows] of Object.entries(sheets))
    XLSX.utils.book_append_sheet(book, XLSX.utils.aoa_to_sheet(rows), name);
  return XLSX.write(book, { type: "buffer", bookType }) as Buffer;
}

/** A presentation: one slide per entry, with its title, body lines and speaker notes. */
export async function makePptx(
  slides: ReadonlyArray<{ title: string; lines: readonly string[]; notes?: string }>,
): Promise<Buffer> {
  // A CommonJS package whose types declare an ES default export.
  const PptxGenJS = ((pptxgenjs as unknown as { default?: unknown }).default ??
    pptxgenjs) as unknown as new () => import("pptxgenjs").default;
  const pptx = new PptxGenJS();
  for (const s of slides) {
    const slide = pptx.addSlide();
    slide.addText(s.title, { placeholder: "title", x: 0.5, y: 0.3, w: 9, h: 1 });
    slide.addText(s.lines.join("\n"), { x: 0.5, y: 1.5, w: 9, h: 3 });
    if (s.notes) slide.addNotes(s.notes);
  }
  return Buffer.from((await pptx.write({ outputType: "nodebuffer" })) as ArrayBuffer);
}

/** An ODF/EPUB-style archive: `mimetype` first and stored, the other parts deflated. */
function odfZip(mimetype: string, parts: Record<string, string>): Buffer {
  const files: Parameters<typeof zipSync>[0] = {
    mimetype: [strToU8(mimetype), { level: 0 }],
  };
  for (const [name, xml] of Object.entries(parts)) files[name] = strToU8(xml);
  return Buffer.from(zipSync(files));
}

/** An ODT document from heading/paragraph blocks ({ h: level } for headings). */
export function makeOdt(blocks: ReadonlyArray<{ h?: number; text: string }>): Buffer {
  const body = blocks
    .map((b) =>
      b.h ? `<text:h text:outline-level="${b.h}">${b.text}</text:h>` : `<text:p>${b.text}</text:p>`,
    )
    .join("");
  return odfZip("application/vnd.oasis.opendocument.text", {
    "content.xml": `<?xml version="1.0" encoding="UTF-8"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" office:version="1.3"><office:body><office:text>${body}</office:text></office:body></office:document-content>`,
    "META-INF/manifest.xml": `<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3"><manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/><manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/></manifest:manifest>`,
  });
}

/** An EPUB 3 book: a title and chapters of XHTML body markup, in reading order. */
export function makeEpub(title: string, chapters: readonly string[]): Buffer {
  const items = chapters
    .map(
      (_, i) =>
        `<item id="c${i + 1}" href="text/ch${i + 1}.xhtml" media-type="application/xhtml+xml"/>`,
    )
    .join("");
  const spine = chapters.map((_, i) => `<itemref idref="c${i + 1}"/>`).join("");
  const parts: Record<string, string> = {
    "META-INF/container.xml": `<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>`,
    "OEBPS/content.opf": `<?xml version="1.0" encoding="UTF-8"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">urn:uuid:1</dc:identifier><dc:title>${title}</dc:title><dc:language>en</dc:language></metadata><manifest>${items}</manifest><spine>${spine}</spine></package>`,
  };
  chapters.forEach((body, i) => {
    parts[`OEBPS/text/ch${i + 1}.xhtml`] =
      `<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml"><head><title>Chapter ${i + 1}</title></head><body>${body}</body></html>`;
  });
  return odfZip("application/epub+zip", parts);
}
