/**
 * Ingestion: readers for JSONL, folders, documents and MediaWiki XML dumps, the corpus writer,
 * and the document reader registry (every format, bounded, in reader processes).
 */
import { type IngestOptions, type IngestReport, ingestDocuments } from "./ingest.ts";
import { type IngestFormat, openReader } from "./readers.ts";

export {
  ingestDocuments,
  removeDocument,
  validateDocument,
  type IngestOptions,
  type IngestProgress,
  type IngestReport,
} from "./ingest.ts";
export {
  openReader,
  detectFormat,
  readJsonl,
  fileToDocument,
  type DocumentReader,
  type IngestFormat,
} from "./readers.ts";
export { readMediaWikiXml, wikitextToDocument, type MediaWikiXmlOptions } from "./mediawiki-xml.ts";
export type { IngestDocument, ReaderItem, SkippedRecord } from "./types.ts";
export {
  extractDocument,
  detectDocumentKind,
  pageLabel,
  DOCUMENT_EXTENSIONS,
  DOCUMENT_KIND_LABELS,
  EXTRACT_DEFAULTS,
  SUPPORTED_DOCUMENTS,
  type ArchiveEntry,
  type DocumentKind,
  type DocumentSource,
  type ExtractedDocument,
  type ExtractOptions,
} from "./documents.ts";
export { htmlToText } from "./html-to-text.ts";
export {
  InputLimitError,
  isInputError,
  READER_LIMITS,
  readerLimitsFromEnv,
  type ReaderLimits,
} from "./reader-limits.ts";
export type { ReaderUsage } from "./reader-pool.ts";
export {
  fetchDocument,
  isPublicAddress,
  FETCH_DEFAULTS,
  type FetchedDocument,
  type FetchLimits,
} from "./fetch-url.ts";

/**
 * Ingests a file or folder (format detected from the path unless given) into the corpus at
 * `dbPath`, resumable: an interrupted run of the same unchanged input continues where it stopped.
 */
export async function ingestPath(
  dbPath: string,
  inputPath: string,
  options: IngestOptions & { format?: IngestFormat } = {},
): Promise<IngestReport> {
  const reader = openReader(inputPath, options.format);
  return ingestDocuments(dbPath, reader.items, {
    sourceKey: reader.sourceKey,
    defaultSource: inputPath,
    ...options,
  });
}
