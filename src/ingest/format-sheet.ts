import Papa from "papaparse";
import { decodeDocumentText } from "./document-text.ts";
import { unreadable, type FormatContext, type FormatReader } from "./format-types.ts";
import { walkXml } from "./xml-limits.ts";
import { BoundedZip } from "./zip-archive.ts";

/**
 * Spreadsheets as Markdown tables: XLSX, ODS and legacy XLS by SheetJS (the @e965/xlsx build of
 * SheetJS 0.20.3, past the fixes for its prototype-pollution and ReDoS advisories that the npm
 * `xlsx` package, stuck at 0.18.5, lacks), CSV and TSV by papaparse. Each sheet is a `## Sheet:
 * <name>` section with its table (first row as header), formatted values as the sheet shows them.
 * A ZIP-based workbook is first inflated and checked by codehop's bounded ZIP reader (SheetJS
 * inflates every entry itself); rows past {@link MAX_ROWS} per sheet, and sheets past the reading
 * time, are left out and said so.
 */

/** Rows read per sheet. */
export const MAX_ROWS = 20_000;
/** Columns kept per row. */
export const MAX_COLUMNS = 200;

/** A Markdown table of `rows` (the first is the header); empty trailing columns dropped. */
export function markdownTable(rows: readonly (readonly string[])[]): string {
  const width = Math.min(
    MAX_COLUMNS,
    rows.reduce((w, r) => {
      let n = r.length;
      while (n > 0 && !r[n - 1]) n--;
      return Math.max(w, n);
    }, 0),
  );
  if (width === 0) return "";
  const cell = (v: string | undefined) =>
    (v ?? "").replace(/\r?\n/g, " ").replace(/\|/g, "\\|").trim();
  const line = (r: readonly string[]) =>
    `| ${Array.from({ length: width }, (_, i) => cell(r[i])).join(" | ")} |`;
  const [header, ...body] = rows;
  return [line(header), `| ${Array(width).fill("---").join(" | ")} |`, ...body.map(line)].join(
    "\n",
  );
}

export const readSheet: FormatReader = async (input, context) => {
  if (input.kind === "csv") return readCsv(input.name, input.bytes, input.mediaType);
  return readWorkbook(input.name, input.kind, input.bytes, context);
};

function readCsv(name: string, bytes: Uint8Array, mediaType?: string) {
  const text = decodeDocumentText(bytes, mediaType);
  const parsed = Papa.parse<string[]>(text, { skipEmptyLines: "greedy" });
  if (!parsed.data.length) throw unreadable(`${name} is empty: it has no rows.`);
  const rows = parsed.data.slice(0, MAX_ROWS);
  const left = parsed.data.length - rows.length;
  return {
    text: markdownTable(rows),
    ...(left > 0
      ? {
          truncated: true,
          truncation: `kept the first ${MAX_ROWS} of ${parsed.data.length} rows`,
        }
      : {}),
  };
}

async function readWorkbook(
  name: string,
  kind: string,
  bytes: Uint8Array,
  { limits, overTime }: FormatContext,
) {
  if (kind !== "xls") {
    const zip = await BoundedZip.open(
      bytes,
      name,
      limits,
      kind === "ods" ? "ODS spreadsheet" : "XLSX workbook",
    );
    try {
      await zip.checkAll((xml, where) => walkXml(xml, where, limits, {}));
    } finally {
      zip.close();
    }
  }
  const XLSX = await import("@e965/xlsx");
  let book: import("@e965/xlsx").WorkBook;
  try {
    book = XLSX.read(bytes, {
      type: "buffer",
      dense: true,
      sheetRows: MAX_ROWS + 1,
      cellFormula: false,
      cellHTML: false,
      cellStyles: false,
      bookVBA: false,
    });
  } catch (err) {
    const why = (err as Error).message ?? String(err);
    throw unreadable(
      /password|encrypt/i.test(why)
        ? `${name} is a password-protected workbook; codehop cannot read it. Remove the password and try again.`
        : `${name} is not a readable spreadsheet (${why}).`,
      err,
    );
  }
  const parts: string[] = [];
  const sheets: string[] = [];
  const notes: string[] = [];
  for (const sheetName of book.SheetNames) {
    if (sheets.length > 0 && overTime()) {
      notes.push(
        `read ${sheets.length} of ${book.SheetNames.length} sheets within the ${limits.timeoutMs / 1000} s reading time limit (CODEHOP_READER_TIMEOUT_MS raises it)`,
      );
      break;
    }
    sheets.push(sheetName);
    const sheet = book.Sheets[sheetName];
    const data = ((sheet?.["!data"] ?? []) as ({ w?: string; v?: unknown } | undefined)[][]).slice(
      0,
      MAX_ROWS + 1,
    );
    if (data.length > MAX_ROWS) {
      data.length = MAX_ROWS;
      notes.push(`kept the first ${MAX_ROWS} rows of sheet ${sheetName}`);
    }
    const rows = data
      .map((row) =>
        Array.from(
          { length: Math.min(row?.length ?? 0, MAX_COLUMNS) },
          (_, i) => row[i]?.w ?? (row[i]?.v === undefined ? "" : String(row[i]!.v)),
        ),
      )
      .filter((r) => r.some((v) => v.trim()));
    const table = markdownTable(rows);
    parts.push(`## Sheet: ${sheetName}\n${table || "(empty)"}`);
  }
  return {
    text: parts.join("\n\n"),
    sheets,
    ...(notes.length ? { truncated: true, truncation: notes.join("; ") } : {}),
  };
}
