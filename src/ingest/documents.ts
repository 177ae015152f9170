import { CodehopError, ErrorCodes } from "../errors.ts";
import { detectDocumentKind, displayName, type DocumentSource } from "./document-kinds.ts";
import { looksBinary, textEncodingOf } from "./document-text.ts";
import type { DocumentKind, FormatOutput } from "./format-types.ts";
import { readInProcess, type ReaderUsage } from "./reader-pool.ts";
import { resolveReaderLimits, type ReaderLimits } from "./reader-limits.ts";

// (htmlToText is in ./html-to-text.ts: turndown and its DOM, ~700 KB, are loaded by the readers
// that convert HTML, not by every module that names a document kind.)
export { looksBinary, textEncodingOf };
export { pageLabel, type ArchiveEntry, type DocumentKind } from "./format-types.ts";
export {
  DOCUMENT_EXTENSIONS,
  DOCUMENT_KIND_LABELS,
  SUPPORTED_DOCUMENTS,
  detectDocumentKind,
  displayName,
  hasSupportedExtension,
  kindOfName,
  type DocumentSource,
} from "./document-kinds.ts";

/**
 * The document reader registry: one reader per format, shared by the chat app's attachments,
 * `codehop ingest` and the assistant's `inspect_file`. {@link extractDocument} tells the format
 * from the declared media type, the extension and the first bytes ({@link detectDocumentKind}),
 * then reads the file in a reader process (src/ingest/reader-pool.ts) within the reader limits
 * (src/ingest/reader-limits.ts: time, memory, archive and XML bounds), cancelled with the caller's
 * signal. Each reader is a well-kept library: unpdf (PDF.js's serverless build) for PDF, mammoth
 * for DOCX, turndown for HTML (and EPUB chapters), marked for Markdown, SheetJS for XLSX/ODS/XLS,
 * papaparse for CSV, saxes for the XML of PPTX, ODT, EPUB and XML files, yauzl for every ZIP
 * container (see the format-*.ts files). The text keeps its structure as heading lines
 * the corpus chunker understands (src/store/chunking.ts): one `## p. N` section per PDF page, the
 * document's own headings otherwise — so every passage knows its page or section, which is what an
 * answer cites.
 *
 * A file that cannot be read is a CodehopError INPUT_INVALID whose message says what the file is
 * and what to do (an encrypted PDF, a corrupt file, an unsupported type, binary content); one that
 * goes past a limit is an InputLimitError (INPUT_LIMIT) naming the file, the limit and the
 * variable that raises it.
 */

/** Options of {@link extractDocument}. */
export interface ExtractOptions {
  /** Characters of text kept (default 2,000,000); the rest is cut and `truncated` set. */
  maxChars?: number;
  /** PDF pages read (default: the `maxPages` reader limit, 2,000). */
  maxPages?: number;
  /**
   * Characters of an HTML page (or a DOCX's HTML, an EPUB's chapters) converted (default
   * 2,000,000): a larger page is cut there, and `truncated` set (converting takes about a second
   * per megabyte).
   */
  maxHtmlChars?: number;
  /**
   * For an archive (ZIP): the entry to read, as the archive's listing names it, instead of the
   * listing. The entry is read with the reader of its own type, within the same limits.
   */
  member?: string;
  /**
   * Reader limits (time, memory, archive and XML bounds); unset ones come from the environment
   * (CODEHOP_READER_*) or the defaults (READER_LIMITS).
   */
  limits?: Partial<ReaderLimits>;
  /** The run's signal: aborting it stops the read in progress (its process is killed). */
  signal?: AbortSignal;
  /** Told what the read cost (time, peak memory of its process), whether it succeeded or not. */
  onUsage?: (usage: ReaderUsage) => void;
}

/** Extracted text with the structure citations need. */
export interface ExtractedDocument extends FormatOutput {
  kind: DocumentKind;
  /** True when part of the document was left out (`truncation` says what and why). */
  truncated: boolean;
}

/** Default limits of the text kept and the HTML converted. */
export const EXTRACT_DEFAULTS = {
  maxChars: 2_000_000,
  maxPages: 2_000,
  maxHtmlChars: 2_000_000,
} as const;

function invalid(message: string, cause?: unknown): CodehopError {
  return new CodehopError(ErrorCodes.INPUT_INVALID, message, cause ? { cause } : undefined);
}

/**
 * Reads a document's text with the reader of its format, in a reader process within the limits
 * (see the module comment). INPUT_INVALID when it cannot be read, INPUT_LIMIT past a limit; the
 * signal's reason when it aborts.
 */
export async function extractDocument(
  source: DocumentSource,
  bytes: Uint8Array,
  options: ExtractOptions = {},
): Promise<ExtractedDocument> {
  options.signal?.throwIfAborted();
  const kind = detectDocumentKind(source, bytes);
  const name = displayName(source.name);
  const limits = resolveReaderLimits({
    ...(options.maxPages !== undefined ? { maxPages: options.maxPages } : {}),
    ...options.limits,
  });
  const out = await readInProcess(
    {
      kind,
      name,
      ...(source.mediaType ? { mediaType: source.mediaType } : {}),
      ...(options.member !== undefined ? { member: options.member } : {}),
      bytes,
      limits,
      maxChars: options.maxChars ?? EXTRACT_DEFAULTS.maxChars,
      maxHtmlChars: options.maxHtmlChars ?? EXTRACT_DEFAULTS.maxHtmlChars,
    },
    options.signal,
    options.onUsage,
  );
  // A member is known by its own type (the archive is only its container).
  const own = out.member?.kind ?? kind;
  const shown = out.member ? `${name} (${out.member.name})` : name;
  if (!out.text.replace(/^#{1,6}[ \t].*$/gm, "").trim()) {
    throw invalid(
      own === "pdf"
        ? `${shown} has no extractable text (a scanned PDF holds images of pages: run OCR on it first).`
        : `${shown} is empty: it has no text to search.`,
    );
  }
  return { kind: own, ...out, truncated: out.truncated ?? false };
}
