import * as XLSX from "@e965/xlsx";

/**
 * Real files for the assistant's offline demo, made at run time (nothing is shipped): a one-page
 * PDF (the simplest valid PDF: one Helvetica text stream, a correct cross-reference table; pdfkit is
 * only a development dependency) and an XLSX workbook written by SheetJS. Both are read back by
 * codehop's own document readers, as any user file is.
 */

/** A one-page PDF showing `lines` (ASCII) under `title`. */
export function makePdf(title: string, lines: readonly string[]): Uint8Array {
  const esc = (s: string) => s.replace(/[\\()]/g, (c) => `\\${c}`).replace(/[^\x20-\x7e]/g, "?");
  const text = [`BT /F1 16 Tf 72 730 Td 20 TL (${esc(title)}) Tj /F1 11 Tf T*`]
    .concat(lines.map((l) => `(${esc(l)}) Tj T*`))
    .concat(["ET"])
    .join("\n");
  const objects = [
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    `<< /Length ${Buffer.byteLength(text, "latin1")} >>\nstream\n${text}\nendstream`,
  ];
  let pdf = "%PDF-1.4\n";
  const offsets: number[] = [];
  objects.forEach((body, i) => {
    offsets.push(Buffer.byteLength(pdf, "latin1"));
    pdf += `${i + 1} 0 obj\n${body}\nendobj\n`;
  });
  const xref = Buffer.byteLength(pdf, "latin1");
  pdf += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const o of offsets) pdf += `${String(o).padStart(10, "0")} 00000 n \n`;
  pdf += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return new Uint8Array(Buffer.from(pdf, "latin1"));
}

/** A sheet: its name and its rows (strings and numbers). */
export interface DemoSheet {
  name: string;
  rows: ReadonlyArray<ReadonlyArray<string | number>>;
}

/** An XLSX workbook with `sheets` (written by SheetJS, the library codehop's sheet reader uses). */
export function makeXlsx(sheets: readonly DemoSheet[]): Uint8Array {
  const book = XLSX.utils.book_new();
  for (const sheet of sheets)
    XLSX.utils.book_append_sheet(
      book,
      XLSX.utils.aoa_to_sheet(sheet.rows.map((r) => [...r])),
      sheet.name,
    );
  return new Uint8Array(XLSX.write(book, { type: "buffer", bookType: "xlsx" }) as Buffer);
}
