/**
 * Hostile files benchmark (issue 22): crafted bombs, each at most the 50 MB upload limit, read by
 * the reader registry with its default limits, next to ordinary documents of the same formats.
 * For each: the outcome (read, or refused with which limit), the wall time the caller waited, the
 * CPU time of the reader process, the reader process's peak resident size, and how much the
 * calling process grew meanwhile. Medians of 3 rounds, the files interleaved.
 */
import { extractDocument, type ExtractedDocument } from "../src/ingest/documents.ts";
import { READER_LIMITS } from "../src/ingest/reader-limits.ts";
import type { ReaderUsage } from "../src/ingest/reader-pool.ts";
import { makeDocx, makePdf } from "../test/chat/documents.ts";
import {
  billionLaughs,
  deepHtml,
  docxBillionLaughs,
  docxBomb,
  manyEntriesZip,
  pdfFlateBomb,
  pdfObjectLoops,
  zipStream,
} from "../test/ingest/hostile-files.ts";
import { makeWorkbook } from "../test/ingest/office-files.ts";
import { fmt, type BenchSection } from "./lib.ts";

const ROUNDS = 3;
const MB = 1024 * 1024;

interface Case {
  label: string;
  name: string;
  bytes: Uint8Array;
  member?: string;
}

async function cases(): Promise<Case[]> {
  const loops = pdfObjectLoops();
  const pages = Array.from(
    { length: 50 },
    (_, i) => `Page ${i + 1}. ${"Revenue grew. ".repeat(40)}`,
  );
  const deepDepth = Math.floor((49 * MB) / 11); // "<div>" + "</div>" per level: 49 MB
  return [
    { label: "ordinary PDF, 50 pages", name: "report.pdf", bytes: await makePdf(pages) },
    {
      label: "ordinary DOCX, 200 paragraphs",
      name: "budget.docx",
      bytes: await makeDocx([
        { heading: "Staff", paragraphs: Array.from({ length: 200 }, (_, i) => `Line ${i}.`) },
      ]),
    },
    {
      label: "ordinary XLSX, 2,000 rows",
      name: "sheet.xlsx",
      bytes: makeWorkbook({
        S: Array.from({ length: 2000 }, (_, i) => [`item ${i}`, i, i * 1.5]),
      }),
    },
    { label: "DOCX inflating to 400 MB (the issue's)", name: "bomb.docx", bytes: docxBomb(400) },
    { label: "DOCX billion laughs", name: "laughs.docx", bytes: docxBillionLaughs() },
    {
      label: "XLSX sheet inflating to 400 MB",
      name: "bomb.xlsx",
      bytes: zipStream({
        "xl/workbook.xml": "<workbook/>",
        "xl/worksheets/sheet1.xml": {
          head: "<worksheet><sheetData>",
          unit: "<row><c><v>1</v></c></row>",
          bytes: 400 * MB,
          tail: "</sheetData></worksheet>",
        },
      }),
    },
    {
      label: "ZIP member inflating to 1 GB",
      name: "bomb.zip",
      member: "huge.txt",
      bytes: zipStream({ "huge.txt": { unit: "A", bytes: 1024 * MB } }),
    },
    { label: "ZIP of 60,000 entries (listed)", name: "many.zip", bytes: manyEntriesZip(60_000) },
    { label: "XML billion laughs", name: "laughs.xml", bytes: Buffer.from(billionLaughs()) },
    { label: "PDF stream inflating to 1 GB", name: "flate.pdf", bytes: await pdfFlateBomb(1024) },
    { label: "PDF page tree looping (1M pages claimed)", name: "tree.pdf", bytes: loops.pageTree },
    { label: "PDF form drawing itself", name: "form.pdf", bytes: loops.selfDrawingForm },
    {
      label: `HTML nested ${(deepDepth / 1e6).toFixed(1)}M deep (49 MB)`,
      name: "deep.html",
      bytes: deepHtml(deepDepth),
    },
    {
      label: "JSON nested 20M deep (40 MB)",
      name: "deep.json",
      bytes: Buffer.from(`${"[".repeat(20_000_000)}${"]".repeat(20_000_000)}`),
    },
  ];
}

interface Outcome {
  result: string;
  wallMs: number;
  cpuMs?: number;
  peakRssMb?: number;
  callerGrowthMb: number;
}

async function measure(c: Case): Promise<Outcome> {
  let usage: ReaderUsage | undefined;
  const before = process.memoryUsage().rss;
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 10);
  const started = performance.now();
  let result: string;
  try {
    const doc: ExtractedDocument = await extractDocument({ name: c.name }, c.bytes, {
      ...(c.member ? { member: c.member } : {}),
      onUsage: (u) => (usage = u),
    });
    result = `read${doc.truncated ? " (truncated)" : ""}`;
  } catch (err) {
    const e = err as { code?: string; limit?: string; message: string };
    result = e.code === "CODEHOP_INPUT_LIMIT" ? `refused: ${e.limit}` : `refused: ${e.code}`;
    if (!e.code) result = `crashed: ${e.message}`;
  }
  const wallMs = performance.now() - started;
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage().rss);
  return {
    result,
    wallMs,
    ...(usage?.cpuMs !== undefined ? { cpuMs: usage.cpuMs } : {}),
    ...(usage?.peakRssMb !== undefined ? { peakRssMb: usage.peakRssMb } : {}),
    callerGrowthMb: (peak - before) / MB,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export default async function bench(): Promise<BenchSection> {
  const all = await cases();
  const runs = new Map<Case, Outcome[]>(all.map((c) => [c, []]));
  // Rounds interleave the files: a slow moment of a busy machine does not land on one file only.
  for (let round = 0; round < ROUNDS; round++)
    for (const c of all) runs.get(c)!.push(await measure(c));
  const rows: (string | number)[][] = [];
  let worstWall = 0;
  let worstCpu = 0;
  let worstRss = 0;
  for (const c of all) {
    const outs = runs.get(c)!;
    const wall = median(outs.map((o) => o.wallMs));
    const cpus = outs.flatMap((o) => (o.cpuMs === undefined ? [] : [o.cpuMs]));
    const rss = outs.flatMap((o) => (o.peakRssMb === undefined ? [] : [o.peakRssMb]));
    const cpu = cpus.length ? median(cpus) : NaN;
    const peak = rss.length ? Math.max(...rss) : NaN;
    if (!c.label.startsWith("ordinary")) {
      worstWall = Math.max(worstWall, wall);
      worstCpu = Math.max(worstCpu, Number.isNaN(cpu) ? 0 : cpu);
      worstRss = Math.max(worstRss, Number.isNaN(peak) ? 0 : peak);
    }
    rows.push([
      c.label,
      fmt(c.bytes.length / MB, 2),
      [...new Set(outs.map((o) => o.result))].join(" / "),
      fmt(wall, 0),
      fmt(cpu, 0),
      fmt(peak, 0),
      fmt(median(outs.map((o) => o.callerGrowthMb)), 0),
    ]);
  }
  return {
    title: "Hostile files: bombs against the document readers",
    description:
      `Each file read by extractDocument with the default reader limits (${READER_LIMITS.timeoutMs / 1000} s of reader CPU, ${READER_LIMITS.memoryMb} MB per reader process, ` +
      `${READER_LIMITS.maxInflatedMb} MB inflated per archive, ratio ${READER_LIMITS.maxRatio}:1, ${READER_LIMITS.maxEntries} entries, XML/HTML nesting ${READER_LIMITS.maxXmlDepth}), ` +
      `${ROUNDS} rounds with the files interleaved. Wall: what the caller waited, median (a warm reader process is reused across files; the first read of a round may start one). ` +
      "Reader CPU: CPU time of the reader process after its code loaded, median. Reader peak: the reader process's peak resident size (VmHWM, reset before each read), highest of the rounds. " +
      "Caller growth: how much the calling process's resident size rose during the read (it holds the file and gets the text back), median. bench/readers.bench.ts; the bombs are made by test/ingest/hostile-files.ts.",
    columns: [
      "file",
      "size MB",
      "outcome",
      "wall ms",
      "reader CPU ms",
      "reader peak MB",
      "caller growth MB",
    ],
    rows,
    verdicts: [
      `every bomb ends within 5 s of reader CPU: ${worstCpu <= 5000 ? "MET" : "NOT MET"} (worst ${fmt(worstCpu, 0)} ms CPU, ${fmt(worstWall, 0)} ms wall on this machine's load)`,
      `every bomb within 200 MB of extra memory: ${worstRss <= 200 ? "MET" : "NOT MET"} (worst reader peak ${fmt(worstRss, 0)} MB, which includes the reader process's own ~50-90 MB)`,
    ],
  };
}
