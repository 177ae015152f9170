import { basename, extname } from "node:path";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { looksBinary, textEncodingOf } from "./document-text.ts";
import type { DocumentKind } from "./format-types.ts";

/**
 * Which reader reads a file: the document types, their extensions, media types and labels, and
 * {@link detectDocumentKind}, which tells a file's type from its first bytes, its declared media
 * type and its extension.
 */

/** What each document type is called, in messages and file lists. */
export const DOCUMENT_KIND_LABELS: Readonly<Record<DocumentKind, string>> = {
  pdf: "PDF",
  docx: "DOCX",
  html: "web page",
  markdown: "Markdown",
  text: "text",
  xlsx: "XLSX spreadsheet",
  ods: "ODS spreadsheet",
  xls: "XLS spreadsheet",
  csv: "CSV table",
  pptx: "PPTX slides",
  odt: "ODT document",
  epub: "EPUB book",
  json: "JSON",
  xml: "XML",
  zip: "ZIP archive",
};

/** File extensions of each type (lower case, with the dot). */
export const DOCUMENT_EXTENSIONS: Readonly<Record<DocumentKind, readonly string[]>> = {
  pdf: [".pdf"],
  docx: [".docx"],
  html: [".html", ".htm", ".xhtml"],
  markdown: [".md", ".markdown"],
  text: [".txt", ".text"],
  xlsx: [".xlsx", ".xlsm"],
  ods: [".ods"],
  xls: [".xls"],
  csv: [".csv", ".tsv"],
  pptx: [".pptx"],
  odt: [".odt"],
  epub: [".epub"],
  json: [".json"],
  xml: [".xml"],
  zip: [".zip"],
};

/** The formats the readers read, in words (for messages). */
export const SUPPORTED_DOCUMENTS =
  "PDF, DOCX, HTML, Markdown (.md), plain text (.txt), spreadsheets (XLSX, XLS, ODS, CSV), PPTX, ODT, EPUB, JSON, XML or ZIP";

/** Types stored in a ZIP container. */
const ZIP_KINDS: ReadonlySet<DocumentKind> = new Set([
  "docx",
  "xlsx",
  "ods",
  "pptx",
  "odt",
  "epub",
  "zip",
]);
/** Types stored in an OLE (Compound File) container. */
const OLE_KINDS: ReadonlySet<DocumentKind> = new Set(["xls"]);

/** Media types of each type, as servers send them (parameters such as charset stripped). */
const MEDIA_TYPES: Readonly<Record<string, DocumentKind>> = {
  "application/pdf": "pdf",
  "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
  "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
  "application/vnd.ms-excel.sheet.macroenabled.12": "xlsx",
  "application/vnd.oasis.opendocument.spreadsheet": "ods",
  "application/vnd.ms-excel": "xls",
  "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
  "application/vnd.oasis.opendocument.text": "odt",
  "application/epub+zip": "epub",
  "application/zip": "zip",
  "application/x-zip-compressed": "zip",
  "text/html": "html",
  "application/xhtml+xml": "html",
  "text/markdown": "markdown",
  "text/x-markdown": "markdown",
  "text/plain": "text",
  "text/csv": "csv",
  "text/tab-separated-values": "csv",
  "application/json": "json",
  "application/xml": "xml",
  "text/xml": "xml",
};

/** What a file is called and, for a download, the media type its server declared. */
export interface DocumentSource {
  /** File name (a path or URL works: its last segment is used), e.g. "report.pdf". */
  name: string;
  /** Declared media type (HTTP Content-Type), if any; wins over the extension. */
  mediaType?: string;
}

function invalid(message: string): CodehopError {
  return new CodehopError(ErrorCodes.INPUT_INVALID, message);
}

function startsWith(bytes: Uint8Array, magic: readonly number[], at = 0): boolean {
  return magic.every((b, i) => bytes[at + i] === b);
}

const PDF_MAGIC = [0x25, 0x50, 0x44, 0x46, 0x2d]; // %PDF-
const ZIP_MAGIC = [0x50, 0x4b, 0x03, 0x04]; // PK\3\4 (DOCX, XLSX, ODT, EPUB ... are ZIPs)
const EMPTY_ZIP_MAGIC = [0x50, 0x4b, 0x05, 0x06]; // an archive with no entries
const OLE_MAGIC = [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]; // XLS, legacy .doc, encrypted Office files

/** Media type without parameters, lower case ("text/html; charset=utf-8" → "text/html"). */
function bareMediaType(mediaType: string | undefined): string | undefined {
  const t = mediaType?.split(";")[0]?.trim().toLowerCase();
  return t || undefined;
}

/** The type a file name's extension says, if any. */
export function kindOfName(name: string): DocumentKind | undefined {
  const ext = extname(displayName(name)).toLowerCase();
  for (const [kind, exts] of Object.entries(DOCUMENT_EXTENSIONS) as [DocumentKind, string[]][])
    if (exts.includes(ext)) return kind;
  return undefined;
}

/**
 * The ODF or EPUB type of a ZIP whose first entry is the uncompressed `mimetype` those formats
 * start with, if it is one of them.
 */
function zipMimetype(bytes: Uint8Array): DocumentKind | undefined {
  const nameLength = bytes[26] | (bytes[27] << 8);
  const extraLength = bytes[28] | (bytes[29] << 8);
  const name = Buffer.from(bytes.subarray(30, 30 + nameLength)).toString("latin1");
  if (name !== "mimetype") return undefined;
  const start = 30 + nameLength + extraLength;
  const value = Buffer.from(bytes.subarray(start, start + 60)).toString("latin1");
  if (value.startsWith("application/epub+zip")) return "epub";
  if (value.startsWith("application/vnd.oasis.opendocument.text")) return "odt";
  if (value.startsWith("application/vnd.oasis.opendocument.spreadsheet")) return "ods";
  return undefined;
}

/**
 * The type of a document from its first bytes, its declared media type and its extension;
 * INPUT_INVALID naming what it seems to be when it is none of the supported types.
 */
export function detectDocumentKind(source: DocumentSource, bytes: Uint8Array): DocumentKind {
  const name = displayName(source.name);
  // The content decides for binary formats: a PDF renamed .txt is still a PDF.
  if (startsWith(bytes, PDF_MAGIC)) return "pdf";
  const media = bareMediaType(source.mediaType);
  const ext = extname(name).toLowerCase();
  const byMedia = media ? MEDIA_TYPES[media] : undefined;
  const byName = kindOfName(name);
  if (startsWith(bytes, ZIP_MAGIC) || startsWith(bytes, EMPTY_ZIP_MAGIC)) {
    const declared = [byMedia, byName].find((k) => k && ZIP_KINDS.has(k));
    return declared ?? zipMimetype(bytes) ?? "zip";
  }
  if (startsWith(bytes, OLE_MAGIC)) {
    if ([byMedia, byName].some((k) => k && OLE_KINDS.has(k))) return "xls";
    throw invalid(
      `${name} is a password-protected Office file or a legacy Word .doc / PowerPoint .ppt; codehop reads ${SUPPORTED_DOCUMENTS}. ` +
        "Remove the password or save it as .docx / .pptx.",
    );
  }
  if (media?.startsWith("image/") || /^\.(png|jpe?g|gif|webp|bmp|tiff?)$/.test(ext)) {
    throw invalid(
      `${name} is an image (${media ?? ext}); codehop reads text, so it reads ${SUPPORTED_DOCUMENTS}, not images.`,
    );
  }
  for (const kind of [byMedia, byName]) {
    if (!kind) continue;
    if (kind === "pdf") throw invalid(`${name} is not a PDF (it does not start with %PDF-).`);
    if (ZIP_KINDS.has(kind))
      throw invalid(`${name} is not a ${DOCUMENT_KIND_LABELS[kind]} (it is not a ZIP archive).`);
    if (OLE_KINDS.has(kind))
      throw invalid(`${name} is not an XLS spreadsheet (it is not an Office binary file).`);
    return textual(kind, name, bytes, source.mediaType);
  }
  // A server that says "text/..." without saying which: read it as plain text.
  if (media?.startsWith("text/")) return textual("text", name, bytes, source.mediaType);
  if (looksBinary(bytes)) {
    throw invalid(
      `${name} is binary content (${media ?? (ext || "unknown type")}), not a supported document: codehop reads ${SUPPORTED_DOCUMENTS}.`,
    );
  }
  throw invalid(
    `${name} has an unsupported type (${media ?? (ext || "no extension")}): codehop reads ${SUPPORTED_DOCUMENTS}.`,
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
      `${name} should be ${DOCUMENT_KIND_LABELS[kind]} but holds binary content; codehop reads ${SUPPORTED_DOCUMENTS}.`,
    );
  }
  return kind;
}

/** The last path or URL segment, e.g. "report.pdf" for "/tmp/report.pdf". */
export function displayName(name: string): string {
  const clean = name.split(/[?#]/)[0].replace(/[/\\]+$/, "");
  return basename(clean) || name;
}

/** Whether a name has one of the supported extensions (for messages and file pickers). */
export function hasSupportedExtension(name: string): boolean {
  return kindOfName(name) !== undefined;
}
