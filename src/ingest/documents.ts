import { basename, extname } from "node:path";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { looksBinary, textEncodingOf } from "./document-text.ts";
import { htmlToText } from "./html-to-text.ts";
import type { DocumentKind, FormatOutput } from "./format-types.ts";
import { readInProcess, type ReaderUsage } from "./reader-pool.ts";
import { resolveReaderLimits, type ReaderLimits } from "./reader-limits.ts";

export { htmlToText, looksBinary, textEncodingOf };
export { htmlTitle } from "./format-html.ts";
export { pageLabel, type DocumentKind } from "./format-types.ts";

/**
 * The document reader registry: one reader per format, shared by the chat app's attachments,
 * `codehop ingest` and the assistant's `inspect_file`. {@link extractDocument} tells the format
 * from the declared media type, the extension and the first bytes ({@link detectDocumentKind}),
 * then reads the file in a reader process (src/ingest/reader-pool.ts) within the reader limits
 * (src/ingest/reader-limits.ts: time, memory, archive and XML bounds), cancelled with the caller's
 * signal. Each reader is a well-kept library: unpdf (PDF.js's serverless build) for PDF, mammoth
 * for DOCX, turndown for HTML, marked for Markdown. The text keeps its structure as heading lines
 * the corpus chunker understands (src/store/chunking.ts): one `## p. N` section per PDF page, the
 * document's own headings otherwise — so every passage knows its page or section, which is what an
 * answer cites.
 *
 * A file that cannot be read is a CodehopError INPUT_INVALID whose message says what the file is
 * and what to do (an encrypted PDF, a corrupt file, an unsupported type, binary content); one that
 * goes past a limit is an InputLimitError (INPUT_LIMIT) naming the file, the limit and the
 * variable that raises it.
 */

/** What each document type is called, in messages and file lists. */
export const DOCUMENT_KIND_LABELS: Readonly<Record<DocumentKind, string>> = {
  pdf: "PDF",
  docx: "DOCX",
  html: "web page",
  markdown: "Markdown",
  text: "text",
};

/** File extensions of each type (lower case, with the dot). */
export const DOCUMENT_EXTENSIONS: Readonly<Record<DocumentKind, readonly string[]>> = {
  pdf: [".pdf"],
  docx: [".docx"],
  html: [".html", ".htm", ".xhtml"],
  markdown: [".md", ".markdown"],
  text: [".txt", ".text"],
};

const DOCX_MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";

/** Media types of each type, as servers send them (parameters such as charset stripped). */
const MEDIA_TYPES: Readonly<Record<string, DocumentKind>> = {
  "application/pdf": "pdf",
  [DOCX_MEDIA_TYPE]: "docx",
  "text/html": "html",
  "application/xhtml+xml": "html",
  "text/markdown": "markdown",
  "text/x-markdown": "markdown",
  "text/plain": "text",
};

/** What a file is called and, for a download, the media type its server declared. */
export interface DocumentSource {
  /** File name (a path or URL works: its last segment is used), e.g. "report.pdf". */
  name: string;
  /** Declared media type (HTTP Content-Type), if any; wins over the extension. */
  mediaType?: string;
}

/** Options of {@link extractDocument}. */
export interface ExtractOptions {
  /** Characters of text kept (default 2,000,000); the rest is cut and `truncated` set. */
  maxChars?: number;
  /** PDF pages read (default: the `maxPages` reader limit, 2,000). */
  maxPages?: number;
  /**
   * Characters of an HTML page (or a DOCX's HTML) converted (default 2,000,000): a larger page is
   * cut there, and `truncated` set (converting takes about a second per megabyte).
   */
  maxHtmlChars?: number;
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

/** The formats the readers read, in words (for messages). */
export const SUPPORTED_DOCUMENTS = "PDF, DOCX, HTML, Markdown (.md) or plain text (.txt)";
const SUPPORTED = SUPPORTED_DOCUMENTS;

function invalid(message: string, cause?: unknown): CodehopError {
  return new CodehopError(ErrorCodes.INPUT_INVALID, message, cause ? { cause } : undefined);
}

function startsWith(bytes: Uint8Array, magic: readonly number[]): boolean {
  return magic.every((b, i) => bytes[i] === b);
}

const PDF_MAGIC = [0x25, 0x50, 0x44, 0x46, 0x2d]; // %PDF-
const ZIP_MAGIC = [0x50, 0x4b, 0x03, 0x04]; // PK\3\4 (DOCX is a ZIP)
const OLE_MAGIC = [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]; // legacy .doc, encrypted Office files

/** Media type without parameters, lower case ("text/html; charset=utf-8" → "text/html"). */
function bareMediaType(mediaType: string | undefined): string | undefined {
  const t = mediaType?.split(";")[0]?.trim().toLowerCase();
  return t || undefined;
}

/**
 * The type of a document from its declared media type, its extension and its first bytes;
 * INPUT_INVALID naming what it seems to be when it is none of the supported types.
 */
export function detectDocumentKind(source: DocumentSource, bytes: Uint8Array): DocumentKind {
  const name = displayName(source.name);
  // The content decides for binary formats: a PDF renamed .txt is still a PDF.
  if (startsWith(bytes, PDF_MAGIC)) return "pdf";
  const media = bareMediaType(source.mediaType);
  const ext = extname(name).toLowerCase();
  if (startsWith(bytes, OLE_MAGIC)) {
    throw invalid(
      `${name} is a password-protected Office file or a legacy Word .doc; codehop reads ${SUPPORTED}. ` +
        "Remove the password or save it as .docx.",
    );
  }
  if (startsWith(bytes, ZIP_MAGIC)) {
    if (ext === ".docx" || media === DOCX_MEDIA_TYPE) return "docx";
    throw invalid(
      `${name} is a ZIP archive (${ext || media || "no extension"}), not a supported document: codehop reads ${SUPPORTED}.`,
    );
  }
  if (media?.startsWith("image/") || /^\.(png|jpe?g|gif|webp|bmp|tiff?)$/.test(ext)) {
    throw invalid(
      `${name} is an image (${media ?? ext}); codehop searches text, so it reads ${SUPPORTED}, not images.`,
    );
  }
  const byMedia = media ? MEDIA_TYPES[media] : undefined;
  if (byMedia && byMedia !== "pdf" && byMedia !== "docx")
    return textual(byMedia, name, bytes, source.mediaType);
  for (const [kind, exts] of Object.entries(DOCUMENT_EXTENSIONS) as [DocumentKind, string[]][]) {
    if (!exts.includes(ext)) continue;
    if (kind === "pdf") throw invalid(`${name} is not a PDF (it does not start with %PDF-).`);
    if (kind === "docx") throw invalid(`${name} is not a DOCX file (it is not a ZIP archive).`);
    return textual(kind, name, bytes, source.mediaType);
  }
  // A server that says "text/..." without saying which: read it as plain text.
  if (media?.startsWith("text/")) return textual("text", name, bytes, source.mediaType);
  if (looksBinary(bytes)) {
    throw invalid(
      `${name} is binary content (${media ?? (ext || "unknown type")}), not a supported document: codehop reads ${SUPPORTED}.`,
    );
  }
  throw invalid(
    `${name} has an unsupported type (${media ?? (ext || "no extension")}): codehop reads ${SUPPORTED}.`,
  );
}

/** A text type whose bytes must really be text. */
function textual(
  kind: DocumentKind,
  name: string,
  bytes: Uint8Array,
  mediaType?: string,
): DocumentKind {
  if (looksBinary(bytes, textEncodingOf(bytes, mediaType, kind === "html"))) {
    throw invalid(
      `${name} should be ${kind === "html" ? "HTML" : kind === "markdown" ? "Markdown" : "text"} but holds binary content; codehop reads ${SUPPORTED}.`,
    );
  }
  return kind;
}

/** The last path or URL segment, e.g. "report.pdf" for "/tmp/report.pdf". */
export function displayName(name: string): string {
  const clean = name.split(/[?#]/)[0].replace(/[/\\]+$/, "");
  return basename(clean) || name;
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
      bytes,
      limits,
      maxChars: options.maxChars ?? EXTRACT_DEFAULTS.maxChars,
      maxHtmlChars: options.maxHtmlChars ?? EXTRACT_DEFAULTS.maxHtmlChars,
    },
    options.signal,
    options.onUsage,
  );
  if (!out.text.replace(/^#{1,6}[ \t].*$/gm, "").trim()) {
    throw invalid(
      kind === "pdf"
        ? `${name} has no extractable text (a scanned PDF holds images of pages: run OCR on it first).`
        : `${name} is empty: it has no text to search.`,
    );
  }
  return { kind, ...out, truncated: out.truncated ?? false };
}

/** Whether a name has one of the supported extensions (for messages and file pickers). */
export function hasSupportedExtension(name: string): boolean {
  const ext = extname(displayName(name)).toLowerCase();
  return Object.values(DOCUMENT_EXTENSIONS).some((exts) => exts.includes(ext));
}
