import { basename, extname } from "node:path";
import { decodeHTML } from "entities";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { htmlToText, htmlToTextOffThread } from "./html-to-text.ts";

export { htmlToText };

/**
 * Text extraction from the document types users attach to a conversation (PDF, DOCX, HTML,
 * Markdown, plain text), each with a well-kept library: unpdf (PDF.js's serverless build) for PDF,
 * mammoth for DOCX, turndown for HTML. The text keeps its structure as heading lines the corpus
 * chunker understands (src/store/chunking.ts): one `## p. N` section per PDF page, the document's
 * own headings for DOCX, HTML and Markdown — so every passage knows its page or section, which is
 * what an answer cites.
 *
 * Anything that cannot be read is a CodehopError INPUT_INVALID whose message says what the file is
 * and what to do (an encrypted PDF, a corrupt file, an unsupported type, binary content).
 */

/** The document types {@link extractDocument} reads. */
export type DocumentKind = "pdf" | "docx" | "html" | "markdown" | "text";

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

/** Limits of {@link extractDocument}. */
export interface ExtractOptions {
  /** Characters of text kept (default 2,000,000); the rest is cut and `truncated` set. */
  maxChars?: number;
  /** PDF pages read (default 2,000). */
  maxPages?: number;
  /**
   * Characters of an HTML page converted (default 5,000,000): a larger page is cut there, and
   * `truncated` set (converting takes about a second per megabyte, off the main thread).
   */
  maxHtmlChars?: number;
  /** Aborting it stops a conversion in progress (a large page's thread is terminated). */
  signal?: AbortSignal;
}

/** Extracted text with the structure citations need. */
export interface ExtractedDocument {
  kind: DocumentKind;
  /** A title found inside the document (HTML `<title>`), if any. */
  title?: string;
  /** Plain text with heading lines (`## p. 3`, `## Budget`) marking pages or sections. */
  text: string;
  /** Pages of a PDF. */
  pages?: number;
  /** True when the text was cut at `maxChars` (or an HTML page at `maxHtmlChars`). */
  truncated: boolean;
}

/** Default limits. */
export const EXTRACT_DEFAULTS = {
  maxChars: 2_000_000,
  maxPages: 2_000,
  maxHtmlChars: 5_000_000,
} as const;

/** How a PDF page is labelled: the section heading of its passages and what answers cite. */
export function pageLabel(page: number): string {
  return `p. ${page}`;
}

const SUPPORTED = "PDF, DOCX, HTML, Markdown (.md) or plain text (.txt)";

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

/**
 * True for content that is not text: NUL bytes, or many bytes that are neither printable ASCII,
 * whitespace nor part of UTF-8 sequences (for text in UTF-8, the default `encoding`), in its
 * first 8 KB.
 */
export function looksBinary(bytes: Uint8Array, encoding = "utf-8"): boolean {
  const head = bytes.subarray(0, 8192);
  if (head.length === 0) return false;
  let odd = 0;
  for (const b of head) {
    if (b === 0) return true;
    if (b < 0x09 || (b > 0x0d && b < 0x20) || b === 0x7f) odd++;
  }
  if (odd / head.length > 0.1) return true;
  // Text declared in another encoding (windows-1251 ...) is not UTF-8, and need not be.
  if (encoding !== "utf-8") return false;
  // Invalid UTF-8 in more than a few places: an image, an archive, a legacy binary format.
  const decoded = new TextDecoder("utf-8", { fatal: false }).decode(head);
  const replaced = decoded.split("\uFFFD").length - 1;
  return replaced > 8 && replaced / decoded.length > 0.05;
}

/** The last path or URL segment, e.g. "report.pdf" for "/tmp/report.pdf". */
export function displayName(name: string): string {
  const clean = name.split(/[?#]/)[0].replace(/[/\\]+$/, "");
  return basename(clean) || name;
}

/** Reads a document's text (see the module comment); INPUT_INVALID when it cannot be read. */
export async function extractDocument(
  source: DocumentSource,
  bytes: Uint8Array,
  options: ExtractOptions = {},
): Promise<ExtractedDocument> {
  const kind = detectDocumentKind(source, bytes);
  const name = displayName(source.name);
  const maxChars = options.maxChars ?? EXTRACT_DEFAULTS.maxChars;
  let out: Omit<ExtractedDocument, "truncated">;
  let cut = false;
  switch (kind) {
    case "pdf":
      out = await extractPdf(name, bytes, options.maxPages ?? EXTRACT_DEFAULTS.maxPages);
      break;
    case "docx":
      out = { kind, text: await extractDocx(name, bytes, options.signal) };
      break;
    case "html": {
      let html = decodeText(bytes, source.mediaType, true);
      const maxHtml = options.maxHtmlChars ?? EXTRACT_DEFAULTS.maxHtmlChars;
      if (html.length > maxHtml) {
        html = html.slice(0, maxHtml);
        cut = true;
      }
      out = {
        kind,
        text: await htmlToTextOffThread(html, { name, signal: options.signal }),
        title: htmlTitle(html),
      };
      break;
    }
    case "markdown":
      out = { kind, text: decodeText(bytes, source.mediaType).trim() };
      break;
    case "text":
      out = { kind, text: neutralizeHeadings(decodeText(bytes, source.mediaType).trim()) };
      break;
  }
  if (!out.text.replace(/^#{1,6}[ \t].*$/gm, "").trim()) {
    throw invalid(
      kind === "pdf"
        ? `${name} has no extractable text (a scanned PDF holds images of pages: run OCR on it first).`
        : `${name} is empty: it has no text to search.`,
    );
  }
  const truncated = cut || out.text.length > maxChars;
  return { ...out, text: out.text.slice(0, maxChars), truncated };
}

/**
 * The character encoding of a text document: a byte-order mark, else the `charset` its server
 * declared (Content-Type), else, for HTML, a `<meta charset>` or `<meta http-equiv="Content-Type">`
 * in its first 4 KB — the order the HTML standard's encoding sniffing uses — else UTF-8. Labels
 * the platform's TextDecoder does not know fall back to UTF-8.
 */
export function textEncodingOf(bytes: Uint8Array, mediaType?: string, html = false): string {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return "utf-8";
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return "utf-16le";
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return "utf-16be";
  const declared = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(mediaType ?? "")?.[1];
  const head = html ? Buffer.from(bytes.subarray(0, 4096)).toString("latin1") : "";
  const meta = html
    ? /<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)/i.exec(head)?.[1]
    : undefined;
  for (const label of [declared, meta]) {
    if (!label) continue;
    try {
      return new TextDecoder(label).encoding;
    } catch {
      // An unknown label: the next source decides.
    }
  }
  return "utf-8";
}

/** Text in its encoding ({@link textEncodingOf}), without a byte-order mark, with \n line ends. */
function decodeText(bytes: Uint8Array, mediaType?: string, html = false): string {
  return new TextDecoder(textEncodingOf(bytes, mediaType, html))
    .decode(bytes)
    .replace(/^\uFEFF/, "")
    .replace(/\r\n?/g, "\n");
}

/**
 * Plain text has no headings: a line that merely looks like one ("# 1", "== x ==") is indented by
 * one space so the chunker does not start a section at it.
 */
function neutralizeHeadings(text: string): string {
  return text.replace(/^(?=#{1,6}[ \t]|={2,6}[^=\n]*={2,6}[ \t]*$)/gm, " ");
}

async function extractPdf(
  name: string,
  bytes: Uint8Array,
  maxPages: number,
): Promise<Omit<ExtractedDocument, "truncated">> {
  // Loaded on use: PDF.js is a large module most runs never need.
  const { getDocumentProxy } = await import("unpdf");
  let pdf: Awaited<ReturnType<typeof getDocumentProxy>>;
  try {
    // PDF.js takes ownership of (and detaches) the buffer it is given: hand it a copy.
    // verbosity 0: PDF.js's warnings ("Indexing all PDF objects") would go to the console.
    pdf = await getDocumentProxy(new Uint8Array(bytes), { isEvalSupported: false, verbosity: 0 });
  } catch (err) {
    const kind = (err as { name?: string })?.name ?? "";
    if (kind === "PasswordException") {
      throw invalid(
        `${name} is an encrypted (password-protected) PDF; codehop cannot read it. Remove the password (e.g. print it to a new PDF) and attach it again.`,
        err,
      );
    }
    if (kind === "InvalidPDFException" || kind === "FormatError") {
      throw invalid(`${name} is a corrupt or truncated PDF (${(err as Error).message}).`, err);
    }
    throw invalid(`${name} could not be read as a PDF: ${(err as Error).message}`, err);
  }
  try {
    const pages = Math.min(pdf.numPages, maxPages);
    const parts: string[] = [];
    for (let n = 1; n <= pages; n++) {
      const page = await pdf.getPage(n);
      const content = await page.getTextContent();
      const text = content.items
        .map((item) => ("str" in item ? item.str + (item.hasEOL ? "\n" : "") : ""))
        .join("")
        .replace(/[ \t]+\n/g, "\n")
        .trim();
      page.cleanup();
      if (text) parts.push(`## ${pageLabel(n)}\n${neutralizeHeadings(text)}`);
    }
    return { kind: "pdf", text: parts.join("\n\n"), pages: pdf.numPages };
  } catch (err) {
    throw invalid(`${name} is a damaged PDF: ${(err as Error).message}`, err);
  } finally {
    await pdf.destroy().catch(() => {});
  }
}

async function extractDocx(name: string, bytes: Uint8Array, signal?: AbortSignal): Promise<string> {
  const mammoth = (await import("mammoth")).default;
  let html: string;
  try {
    html = (await mammoth.convertToHtml({ buffer: Buffer.from(bytes) })).value;
  } catch (err) {
    const why = (err as Error).message ?? String(err);
    throw invalid(
      /central directory|zip/i.test(why)
        ? `${name} is a corrupt DOCX file (its ZIP structure is damaged).`
        : `${name} is not a readable Word document: ${why}`,
      err,
    );
  }
  return htmlToTextOffThread(html, { name, signal });
}

/**
 * The `<title>` of an HTML page, if it has one. Character references are decoded by `entities`
 * as the HTML standard says (a reference out of Unicode's range or to NUL becomes U+FFFD), so no
 * page, however malformed, can make decoding throw.
 */
export function htmlTitle(html: string): string | undefined {
  const m = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html);
  const title = m ? decodeHTML(m[1]).replace(/\s+/g, " ").trim() : "";
  return title || undefined;
}

/** Whether a name has one of the supported extensions (for messages and file pickers). */
export function hasSupportedExtension(name: string): boolean {
  const ext = extname(displayName(name)).toLowerCase();
  return Object.values(DOCUMENT_EXTENSIONS).some((exts) => exts.includes(ext));
}
