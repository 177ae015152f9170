import { CodehopError, ErrorCodes } from "../errors.ts";
import type { ReaderLimits } from "./reader-limits.ts";

/**
 * What one format's reader gets and gives (the readers run in a reader process: see
 * reader-pool.ts). A reader throws CodehopError INPUT_INVALID for a file it cannot read and
 * InputLimitError (INPUT_LIMIT) for one past a limit.
 */

/** The document types the readers read. */
export type DocumentKind =
  | "pdf"
  | "docx"
  | "html"
  | "markdown"
  | "text"
  | "xlsx"
  | "ods"
  | "xls"
  | "csv"
  | "pptx"
  | "odt"
  | "epub"
  | "json"
  | "xml"
  | "zip";

/** One entry of an archive's listing. */
export interface ArchiveEntry {
  /** Path inside the archive. */
  name: string;
  /** Inflated size in bytes, as the archive declares it. */
  size: number;
  /** The document type codehop would read it as (by its name), if any. */
  kind?: DocumentKind;
}

/** One file for a reader. */
export interface FormatInput {
  kind: DocumentKind;
  /** File name, for messages ("report.pdf"). */
  name: string;
  bytes: Uint8Array;
  /** Declared media type (with its charset parameter, if any). */
  mediaType?: string;
  /** For an archive: the entry to read instead of listing the archive. */
  member?: string;
}

/** What a reader may spend, and how to tell when to stop taking new parts. */
export interface FormatContext {
  limits: ReaderLimits;
  /** Characters of text kept; the rest is cut and the document marked truncated. */
  maxChars: number;
  /** Characters of HTML converted; a longer page is cut there (marked truncated). */
  maxHtmlChars: number;
  /**
   * True once 3/4 of the reading time is spent: a reader of a document with parts (pages,
   * sheets, slides, chapters) stops there and says so in `truncation`.
   */
  overTime(): boolean;
}

/** A reader's result (src/ingest/documents.ts's ExtractedDocument is this with `kind`). */
export interface FormatOutput {
  /** Plain text with heading lines (`## p. 3`, `## Budget`) marking pages or sections. */
  text: string;
  /** A title found inside the document (HTML `<title>`), if any. */
  title?: string;
  /** Pages of a PDF. */
  pages?: number;
  /** Sheet names of a spreadsheet, in order. */
  sheets?: string[];
  /** Slides of a presentation. */
  slides?: number;
  /** Chapters of an e-book. */
  chapters?: number;
  /** An archive's entries (its listing). */
  entries?: ArchiveEntry[];
  /** For an archive's member: the member's path and its document type (the archive's is `zip`). */
  member?: { name: string; kind: DocumentKind };
  /** True when part of the document was left out (see `truncation`). */
  truncated?: boolean;
  /** What was left out and why, in words ("read 120 of 500 pages within the 4 s time limit"). */
  truncation?: string;
}

/** A reader of one format. */
export type FormatReader = (input: FormatInput, context: FormatContext) => Promise<FormatOutput>;

/** INPUT_INVALID with `message` (the file cannot be read). */
export function unreadable(message: string, cause?: unknown): CodehopError {
  return new CodehopError(ErrorCodes.INPUT_INVALID, message, cause ? { cause } : undefined);
}

/** How a PDF page is labelled: the section heading of its passages and what answers cite. */
export function pageLabel(page: number): string {
  return `p. ${page}`;
}
