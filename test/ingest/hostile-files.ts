import { constants as zlibConstants, crc32, createDeflate, deflateRawSync } from "node:zlib";
import { Zip, ZipPassThrough, zipSync, strToU8 } from "fflate";

/**
 * Hostile files for the reader limits' tests and the bomb benchmark (bench/readers.bench.ts):
 * archives that inflate far past their size, XML entity bombs, PDFs whose objects loop, HTML
 * nested a million levels deep. Each is made here, in memory, by the same means an attacker has
 * (fflate writes small ZIPs; bombs and PDFs are written by hand, to hold what no library writes).
 */

/** A ZIP of small entries (strings are UTF-8), deflated. */
export function zipFiles(entries: Record<string, string | Uint8Array>): Uint8Array {
  const files: Record<string, Uint8Array> = {};
  for (const [name, data] of Object.entries(entries))
    files[name] = typeof data === "string" ? strToU8(data) : data;
  return zipSync(files, { level: 6 });
}

/** An entry whose content is `head`, then `unit` repeated until about `bytes`, then `tail`. */
export interface RepeatedEntry {
  head?: string;
  unit: string;
  bytes: number;
  tail?: string;
}

/**
 * A ZIP whose entries may be huge repetitions, as a ZIP bomb's author makes one: the repeated
 * piece is deflated once, ending at a byte boundary (a sync flush), and that block is repeated —
 * concatenated blocks are one valid deflate stream — so a 400 MB entry is made in a second and
 * never sits in memory. The container (local headers, central directory) is written here.
 */
export function zipStream(
  entries: Record<string, string | Uint8Array | RepeatedEntry>,
): Uint8Array {
  const parts: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const [name, data] of Object.entries(entries)) {
    let compressed: Buffer[];
    let size: number;
    let crc: number;
    if (typeof data === "string" || data instanceof Uint8Array) {
      const raw = typeof data === "string" ? Buffer.from(data) : Buffer.from(data);
      compressed = [deflateRawSync(raw, { level: 9 })];
      size = raw.length;
      crc = crc32(raw);
    } else {
      const head = Buffer.from(data.head ?? "");
      const tail = Buffer.from(data.tail ?? "");
      const piece = Buffer.from(
        data.unit.repeat(Math.max(1, Math.floor((1 << 20) / data.unit.length))),
      );
      const count = Math.ceil(data.bytes / piece.length);
      const flushed = (b: Buffer) =>
        deflateRawSync(b, { level: 9, finishFlush: zlibConstants.Z_SYNC_FLUSH });
      const block = flushed(piece);
      compressed = [flushed(head), ...Array<Buffer>(count).fill(block), deflateRawSync(tail)];
      size = head.length + count * piece.length + tail.length;
      crc = crc32(head);
      for (let i = 0; i < count; i++) crc = crc32(piece, crc);
      crc = crc32(tail, crc);
    }
    const compressedSize = compressed.reduce((n, b) => n + b.length, 0);
    const fileName = Buffer.from(name);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4); // version needed
    local.writeUInt16LE(0x0800, 6); // UTF-8 names
    local.writeUInt16LE(8, 8); // deflate
    local.writeUInt32LE(crc >>> 0, 14);
    local.writeUInt32LE(compressedSize, 18);
    local.writeUInt32LE(size, 22);
    local.writeUInt16LE(fileName.length, 26);
    const entry = Buffer.alloc(46);
    entry.writeUInt32LE(0x02014b50, 0);
    entry.writeUInt16LE(20, 4);
    entry.writeUInt16LE(20, 6);
    entry.writeUInt16LE(0x0800, 8);
    entry.writeUInt16LE(8, 10);
    entry.writeUInt32LE(crc >>> 0, 16);
    entry.writeUInt32LE(compressedSize, 20);
    entry.writeUInt32LE(size, 24);
    entry.writeUInt16LE(fileName.length, 28);
    entry.writeUInt32LE(offset, 42);
    central.push(entry, fileName);
    parts.push(local, fileName, ...compressed);
    offset += local.length + fileName.length + compressedSize;
  }
  const directory = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(Object.keys(entries).length, 8);
  end.writeUInt16LE(Object.keys(entries).length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...parts, directory, end]);
}

/** A ZIP listing `count` empty files (an entry-count bomb). */
export function manyEntriesZip(count: number): Uint8Array {
  const out: Uint8Array[] = [];
  const zip = new Zip((err, chunk) => {
    if (err) throw err;
    out.push(chunk);
  });
  for (let i = 0; i < count; i++) {
    const f = new ZipPassThrough(`f${i}.txt`);
    zip.add(f);
    f.push(new Uint8Array(0), true);
  }
  zip.end();
  return concat(out);
}

function concat(parts: Uint8Array[]): Uint8Array {
  const size = parts.reduce((n, p) => n + p.length, 0);
  const all = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return all;
}

const W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"';
const R = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"';

/** The parts of a minimal DOCX around its word/document.xml. */
export function docxParts(
  documentXml: string | RepeatedEntry,
): Record<string, string | RepeatedEntry> {
  return {
    "[Content_Types].xml":
      '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
    "_rels/.rels":
      '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>',
    "word/document.xml": documentXml,
  };
}

/** word/document.xml around `body` (paragraph XML). */
export function documentXml(body: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?><w:document ${W} ${R}><w:body>${body}</w:body></w:document>`;
}

/** The DOCX of the issue: about 1 MB that inflates its word/document.xml to `inflatedMb` MB. */
export function docxBomb(inflatedMb = 400): Uint8Array {
  return zipStream(
    docxParts({
      head: `<?xml version="1.0" encoding="UTF-8"?><w:document ${W} ${R}><w:body>`,
      unit: "<w:p><w:r><w:t>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</w:t></w:r></w:p>",
      bytes: inflatedMb * 1024 * 1024,
      tail: "</w:body></w:document>",
    }),
  );
}

/** XML that declares the classic "billion laughs" entities (10 levels of 10) and uses the last. */
export function billionLaughs(root = "lolz"): string {
  const defs = ['<!ENTITY lol "lol">'];
  for (let i = 1; i <= 9; i++)
    defs.push(`<!ENTITY lol${i} "${`&lol${i === 1 ? "" : i - 1};`.repeat(10)}">`);
  return `<?xml version="1.0"?>\n<!DOCTYPE ${root} [\n${defs.join("\n")}\n]>\n<${root}>&lol9;</${root}>`;
}

/** A DOCX whose word/document.xml is a billion-laughs bomb. */
export function docxBillionLaughs(): Uint8Array {
  const xml = billionLaughs("w:document").replace(
    "<w:document>&lol9;</w:document>",
    `<w:document ${W}><w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>`,
  );
  return zipFiles(docxParts(xml) as Record<string, string>);
}

/** A DOCX whose paragraphs nest `depth` levels of w:sdt content controls. */
export function docxDeepXml(depth: number): Uint8Array {
  const open = "<w:sdt><w:sdtContent>".repeat(depth);
  const close = "</w:sdtContent></w:sdt>".repeat(depth);
  return zipFiles(
    docxParts(documentXml(`${open}<w:p><w:r><w:t>deep</w:t></w:r></w:p>${close}`)) as Record<
      string,
      string
    >,
  );
}

/** HTML nested `depth` elements deep (about 5 bytes a level). */
export function deepHtml(depth: number, tag = "div"): Uint8Array {
  return new TextEncoder().encode(
    `<html><body>${`<${tag}>`.repeat(depth)}deep${`</${tag}>`.repeat(depth)}</body></html>`,
  );
}

/** A PDF from numbered object bodies (1-based), with a correct cross-reference table. */
export function pdfFromObjects(objects: string[], root = 1): Uint8Array {
  let out = "%PDF-1.7\n%\xe2\xe3\xcf\xd3\n";
  const offsets: number[] = [];
  objects.forEach((body, i) => {
    offsets.push(Buffer.byteLength(out, "latin1"));
    out += `${i + 1} 0 obj\n${body}\nendobj\n`;
  });
  const xref = Buffer.byteLength(out, "latin1");
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const o of offsets) out += `${String(o).padStart(10, "0")} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root ${root} 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, "latin1");
}

function stream(content: string, dict = ""): string {
  return `<< /Length ${Buffer.byteLength(content, "latin1")} ${dict} >>\nstream\n${content}\nendstream`;
}

/**
 * PDFs whose objects loop: a page tree whose Kids lead back to itself (claiming a million pages),
 * and a page whose form XObject draws itself.
 */
export function pdfObjectLoops(): { pageTree: Uint8Array; selfDrawingForm: Uint8Array } {
  const pageTree = pdfFromObjects([
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [2 0 R 3 0 R 2 0 R] /Count 1000000 >>",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
    stream("BT /F1 12 Tf 72 712 Td (loop) Tj ET"),
  ]);
  const font = "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>";
  const selfDrawingForm = pdfFromObjects([
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /XObject << /X 5 0 R >> /Font << /F1 6 0 R >> >> >>`,
    stream("/X Do"),
    stream(
      "BT /F1 12 Tf 72 712 Td (again) Tj ET /X Do /X Do",
      "/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /XObject << /X 5 0 R >> /Font << /F1 6 0 R >> >>",
    ),
    font,
  ]);
  return { pageTree, selfDrawingForm };
}

/**
 * A one-page PDF whose content stream (FlateDecode) inflates to `inflatedMb` MB of spaces,
 * compressed piece by piece by zlib (the inflated bytes never sit in memory).
 */
export async function pdfFlateBomb(inflatedMb: number): Promise<Uint8Array> {
  const deflate = createDeflate({ level: 9 });
  const parts: Buffer[] = [];
  deflate.on("data", (chunk: Buffer) => parts.push(chunk));
  const done = new Promise((resolve) => deflate.on("end", resolve));
  const piece = Buffer.alloc(1 << 20, 0x20);
  for (let i = 0; i < inflatedMb; i++)
    if (!deflate.write(piece)) await new Promise((r) => deflate.once("drain", r));
  deflate.end();
  await done;
  const content = Buffer.concat(parts);
  return pdfFromObjects([
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
    `<< /Length ${content.length} /Filter /FlateDecode >>\nstream\n${content.toString("latin1")}\nendstream`,
  ]);
}
