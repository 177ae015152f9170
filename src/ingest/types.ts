/** A document to put into a corpus. */
export interface IngestDocument {
  /** Page title; unique per corpus (case-insensitive). Re-ingesting a title replaces the page. */
  title: string;
  /** Plain text; section headings as Markdown ("## History") or MediaWiki ("== History ==") lines. */
  text: string;
  /** Where it came from (file path, dataset name, ...). */
  source?: string;
  /** Free-form JSON metadata. `{ disambiguation: true, options: [...] }` marks a disambiguation page. */
  metadata?: Record<string, unknown>;
  /** Other titles that lead to this page (redirects). */
  aliases?: string[];
}

/**
 * What a reader yields: a document, a redirect, or a record it could not read (kept so the ingest
 * report can list skipped records with their line or page number).
 */
export type ReaderItem =
  | { kind: "document"; doc: IngestDocument; where: string }
  | { kind: "redirect"; from: string; to: string; where: string }
  | { kind: "skip"; where: string; reason: string };

/** A record that was not ingested, with where it was and why. */
export interface SkippedRecord {
  /** e.g. "line 17", "page 42 (Foo)", "notes/a.md". */
  where: string;
  reason: string;
}

/** The `--format` hint of `codehop ingest`'s messages (its names: `xml` is a MediaWiki dump). */
export const FORMAT_HINT = "--format jsonl|folder|xml|document";
