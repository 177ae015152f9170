import { createHash } from "node:crypto";
import {
  closeSync,
  createReadStream,
  existsSync,
  openSync,
  readSync,
  readdirSync,
  statSync,
} from "node:fs";
import { readFile } from "node:fs/promises";
import { basename, extname, join, relative, resolve } from "node:path";
import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { decodeText, sniffUtf16 } from "./decode.ts";
import { looksBinary } from "./document-text.ts";
import {
  extractDocument,
  hasSupportedExtension,
  kindOfName,
  SUPPORTED_DOCUMENTS,
  type ExtractedDocument,
} from "./documents.ts";
import { isInputError, type ReaderLimits } from "./reader-limits.ts";
import { MAX_READER_PROCESSES } from "./reader-pool.ts";
import { readMediaWikiXml } from "./mediawiki-xml.ts";
import { FORMAT_HINT, type IngestDocument, type ReaderItem } from "./types.ts";

/**
 * Input formats `codehop ingest` understands: JSONL records, a folder of documents, a MediaWiki
 * XML dump, or one document (any format the reader registry reads: PDF, DOCX, HTML, Markdown,
 * text ...).
 */
export type IngestFormat = "jsonl" | "folder" | "mediawiki-xml" | "document";

/** A streaming reader over one input, with progress for a progress bar. */
export interface DocumentReader {
  readonly format: IngestFormat;
  /** Stable identity of the input (path + size + mtime) used to resume interrupted runs. */
  readonly sourceKey: string;
  /** Unit of {@link progress}: bytes of the input file, or files of a folder. */
  readonly unit: "bytes" | "files";
  /** Records, in input order. Iterate once. */
  readonly items: AsyncIterable<ReaderItem>;
  /** How much of the input has been consumed, and the total when known. */
  progress(): { done: number; total?: number };
}

/**
 * A MediaWiki dump's name: `*.xml`, `*.xml.bz2`, and Wikimedia's split dumps, which carry the page
 * id range after the extension (`enwiki-latest-pages-articles1.xml-p1p41242.bz2`).
 */
const DUMP_NAME = /\.xml(?:-p\d+p\d+[\w.-]*?)?(?:\.bz2)?$/i;

/**
 * Guesses the format from the path: a directory, *.jsonl / *.ndjson, a MediaWiki dump name, a
 * document the reader registry reads (by extension, or by content for PDF); else INPUT_INVALID.
 */
export function detectFormat(path: string): IngestFormat {
  if (!existsSync(path))
    throw new CodehopError(ErrorCodes.INPUT_INVALID, `input ${path} does not exist`);
  if (statSync(path).isDirectory()) return "folder";
  const lower = path.toLowerCase();
  if (DUMP_NAME.test(basename(lower)) && !startsWithPdf(path)) return "mediawiki-xml";
  if (lower.endsWith(".jsonl") || lower.endsWith(".ndjson")) return "jsonl";
  if (hasSupportedExtension(path) || startsWithPdf(path)) return "document";
  throw new CodehopError(
    ErrorCodes.INPUT_INVALID,
    `cannot tell the format of ${path} (codehop ingest reads JSONL, MediaWiki XML dumps, folders and ${SUPPORTED_DOCUMENTS}); pass ${FORMAT_HINT}`,
  );
}

function head(path: string, n: number): Buffer {
  const buf = Buffer.alloc(n);
  const fd = openSync(path, "r");
  try {
    return buf.subarray(0, readSync(fd, buf, 0, n, 0));
  } finally {
    closeSync(fd);
  }
}

function startsWithPdf(path: string): boolean {
  return head(path, 5).toString("latin1") === "%PDF-";
}

/**
 * Refuses, before anything is read, a file given as a MediaWiki XML dump that is plainly none:
 * a PDF, an archive, binary data — so `--format xml` on a PDF says what to do instead of
 * reading no pages.
 */
function checkLooksLikeXml(path: string, bzip2: boolean): void {
  if (bzip2) return;
  const bytes = head(path, 4096);
  const name = basename(path);
  let what: string | undefined;
  if (bytes.toString("latin1", 0, 5) === "%PDF-") what = "a PDF";
  else if (bytes.toString("latin1", 0, 4) === "PK\x03\x04")
    what = "a ZIP archive (or an office document)";
  else {
    // UTF-16 dumps (a BOM, or the zero bytes of ASCII) are read by the XML reader's decoder.
    const utf16 = /^(\xff\xfe|\xfe\xff)/.test(bytes.toString("latin1", 0, 2))
      ? bytes[0] === 0xff
        ? "utf-16le"
        : "utf-16be"
      : sniffUtf16(bytes);
    if (!utf16 && looksBinary(bytes)) what = "binary data";
    else {
      const text = utf16
        ? new TextDecoder(utf16).decode(bytes.subarray(0, bytes.length & ~1))
        : bytes.toString("latin1");
      const trimmed = text.replace(/^(\uFEFF|\xef\xbb\xbf)/, "").trimStart();
      if (trimmed && !trimmed.startsWith("<")) what = "not XML (it does not start with <)";
    }
  }
  if (what) {
    throw new CodehopError(
      ErrorCodes.INPUT_INVALID,
      `${name} is ${what}, not a MediaWiki XML dump; ` +
        (hasSupportedExtension(path) || what === "a PDF"
          ? "ingest it as a document: leave out --format (or pass --format document)"
          : `pass the right ${FORMAT_HINT}`),
    );
  }
}

/** True when the file starts with bzip2's magic bytes ("BZh" and a block size digit). */
function isBzip2(path: string): boolean {
  const head = Buffer.alloc(4);
  const fd = openSync(path, "r");
  try {
    const n = readSync(fd, head, 0, 4, 0);
    return n === 4 && head.toString("latin1", 0, 3) === "BZh" && head[3] >= 0x31 && head[3] <= 0x39;
  } finally {
    closeSync(fd);
  }
}

/** Options of {@link openReader}. */
export interface OpenReaderOptions {
  /** Reader limits for documents (unset ones from CODEHOP_READER_*, see reader-limits.ts). */
  limits?: Partial<ReaderLimits>;
  /** Stops reading documents (the read in progress is killed). */
  signal?: AbortSignal;
}

/**
 * Opens a reader for a JSONL file, a folder of documents, a MediaWiki XML dump (.xml, .xml.bz2)
 * or one document (PDF, DOCX, HTML, Markdown, text ...: every format the reader registry reads).
 */
export function openReader(
  path: string,
  format: IngestFormat = detectFormat(path),
  options: OpenReaderOptions = {},
): DocumentReader {
  if (!existsSync(path))
    throw new CodehopError(ErrorCodes.INPUT_INVALID, `input ${path} does not exist`);
  const st = statSync(path);
  const sourceKey = `${format}:${resolve(path)}:${st.size}:${Math.trunc(st.mtimeMs)}`;
  if (format === "folder") {
    if (!st.isDirectory())
      throw new CodehopError(ErrorCodes.INPUT_INVALID, `${path} is not a directory`);
    return folderReader(path, options);
  }
  if (st.isDirectory())
    throw new CodehopError(ErrorCodes.INPUT_INVALID, `${path} is a directory; use --format folder`);
  if (format === "document") return documentFileReader(path, sourceKey, options);
  const counter = { bytes: 0 };
  const raw = () => {
    const s = createReadStream(path);
    s.on("data", (chunk) => (counter.bytes += chunk.length));
    return s;
  };
  const progress = () => ({ done: counter.bytes, total: st.size });
  if (format === "jsonl")
    return { format, sourceKey, unit: "bytes", items: readJsonl(raw()), progress };
  const bzip2 = isBzip2(path);
  checkLooksLikeXml(path, bzip2);
  return {
    format,
    sourceKey,
    unit: "bytes",
    // By content, not name: a renamed or split dump is still recognised as compressed.
    items: readMediaWikiXml(raw(), { bzip2 }),
    progress,
  };
}

// Fields of a JSONL record with a meaning; everything else is kept as metadata.
const KNOWN_FIELDS = new Set(["title", "text", "source", "metadata", "aliases"]);

/**
 * Reads JSONL: one `{"title", "text", "source"?, "metadata"?, "aliases"?, ...}` object per line.
 * Extra fields (e.g. "url", "id") go into metadata. Blank lines are ignored; a line that is not
 * JSON is reported as skipped with its line number. UTF-8, or UTF-16 with or without a byte order
 * mark (see decodeText).
 */
export async function* readJsonl(stream: NodeJS.ReadableStream): AsyncGenerator<ReaderItem> {
  const text = Readable.from(decodeText(stream as AsyncIterable<Buffer>));
  const lines = createInterface({ input: text, crlfDelay: Infinity });
  let n = 0;
  try {
    for await (const line of lines) {
      n++;
      if (line.trim()) yield jsonlRecord(line, `line ${n}`);
    }
  } catch (err) {
    // Undecodable input (e.g. UTF-32) or a read error: say so instead of failing the ingest.
    yield {
      kind: "skip",
      where: `line ${n + 1}`,
      reason: `unreadable input, stopped reading: ${(err as Error).message}`,
    };
  }
}

/**
 * How far a JSONL record may nest, and how many keys plus array items it may hold: V8 parses any
 * depth without recursing, but storing the record (JSON.stringify, the metadata column) recurses
 * — a line nested 200,000 deep overflowed the stack and ended the ingest with a raw RangeError —
 * and a line of 2 million keys took 86 s and 1.2 GB to store. Real records are a few levels and
 * fields; the limits are the document readers' XML depth and the server's JSON keys.
 */
export const JSONL_RECORD_LIMITS = { maxDepth: 256, maxNodes: 100_000 } as const;

/**
 * Why a record's line is past {@link JSONL_RECORD_LIMITS}, or undefined: counted over its
 * characters before it is parsed (brackets and commas outside strings), since parsing a
 * 2-million-key line alone costs seconds and half a gigabyte.
 */
function recordTooLarge(line: string): string | undefined {
  const { maxDepth, maxNodes } = JSONL_RECORD_LIMITS;
  let depth = 0;
  let nodes = 0;
  let inString = false;
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > maxDepth) return `the record nests deeper than ${maxDepth} levels`;
    } else if (c === 0x5d || c === 0x7d) depth--;
    else if (c === 0x2c && ++nodes > maxNodes)
      return `the record has more than ${maxNodes} keys and array items`;
  }
  return undefined;
}

function jsonlRecord(line: string, where: string): ReaderItem {
  const tooLarge = recordTooLarge(line);
  if (tooLarge) return { kind: "skip", where, reason: `${tooLarge} [${ErrorCodes.INPUT_LIMIT}]` };
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (err) {
    return { kind: "skip", where, reason: `invalid JSON (${(err as Error).message})` };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return { kind: "skip", where, reason: "not a JSON object" };
  const rec = value as Record<string, unknown>;
  const extra: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(rec)) if (!KNOWN_FIELDS.has(k)) extra[k] = v;
  const metadata =
    rec.metadata && typeof rec.metadata === "object" && !Array.isArray(rec.metadata)
      ? { ...extra, ...(rec.metadata as Record<string, unknown>) }
      : rec.metadata === undefined
        ? extra
        : rec.metadata;
  // Validation (types, empty text) happens in ingestDocuments so it applies to every input.
  return {
    kind: "document",
    where,
    doc: {
      ...(rec as any),
      metadata: Object.keys(extra).length || rec.metadata !== undefined ? metadata : undefined,
    },
  };
}

/** Every file below `root` (hidden files and folders left out), in name order. */
function listFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    const entries = readdirSync(dir, { withFileTypes: true });
    entries.sort((a, b) => a.name.localeCompare(b.name));
    for (const e of entries) {
      if (e.name.startsWith(".")) continue;
      const full = join(dir, e.name);
      if (e.isDirectory()) walk(full);
      else if (e.isFile()) out.push(full);
    }
  };
  walk(root);
  return out;
}

/**
 * Turns a Markdown/text file into a document: the title is the first-line `# Heading` if there is
 * one (removed from the text), else the file name without extension, with _ and - as spaces.
 */
export function fileToDocument(relPath: string, content: string): { title: string; text: string } {
  const text = content.replace(/^\uFEFF/, "").replace(/\r\n?/g, "\n");
  const m = /^\s*#[ \t]+(.+?)[ \t]*#*[ \t]*\n/.exec(text);
  if (m) return { title: m[1].trim(), text: text.slice(m[0].length).trim() };
  return { title: titleFromFileName(relPath), text: text.trim() };
}

function titleFromFileName(relPath: string): string {
  return basename(relPath, extname(relPath)).replace(/[_-]+/g, " ").trim() || basename(relPath);
}

/**
 * A document read by the reader registry as a corpus record: its title is the document's own (a
 * Markdown document's opening `# Heading`, removed from the text; an HTML `<title>`), else the
 * file name; its metadata says its format, pages and what was left out.
 */
export function documentRecord(relPath: string, doc: ExtractedDocument): IngestDocument {
  let { text } = doc;
  let title = doc.title;
  if (doc.kind === "markdown") {
    const own = fileToDocument(relPath, text);
    ({ text } = own);
    title = own.title;
  }
  const metadata: Record<string, unknown> = { format: doc.kind };
  if (doc.pages !== undefined) metadata.pages = doc.pages;
  if (doc.truncated) metadata.truncated = doc.truncation ?? true;
  return { title: title?.trim() || titleFromFileName(relPath), text, source: relPath, metadata };
}

/** Reads one document file with the reader registry (within the reader limits). */
async function readDocumentFile(
  file: string,
  rel: string,
  options: OpenReaderOptions,
): Promise<ReaderItem> {
  try {
    const bytes = await readFile(file);
    if (bytes.length === 0) return { kind: "skip", where: rel, reason: "empty file" };
    const doc = await extractDocument({ name: basename(file) }, bytes, {
      ...(options.limits ? { limits: options.limits } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    return { kind: "document", where: rel, doc: documentRecord(rel, doc) };
  } catch (err) {
    if (options.signal?.aborted) throw err;
    if (!isInputError(err) && !(err as NodeJS.ErrnoException).code?.startsWith("E")) throw err;
    // The reader's message starts with the file name; the report already names it.
    const reason = (err as Error).message.replace(
      new RegExp(`^${escapeRegExp(basename(file))}:? `),
      "",
    );
    return { kind: "skip", where: rel, reason };
  }
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function documentFileReader(
  path: string,
  sourceKey: string,
  options: OpenReaderOptions,
): DocumentReader {
  let done = 0;
  const items = async function* (): AsyncGenerator<ReaderItem> {
    yield await readDocumentFile(path, basename(path), options);
    done = 1;
  };
  return {
    format: "document",
    sourceKey,
    unit: "files",
    items: items(),
    progress: () => ({ done, total: 1 }),
  };
}

/** Files read ahead of the one being ingested (each in a reader process of its own). */
const READ_AHEAD = MAX_READER_PROCESSES;

function folderReader(root: string, options: OpenReaderOptions): DocumentReader {
  const files = listFiles(root);
  // The resume key covers every file's path, size and mtime: any edit, addition or removal
  // starts a fresh run instead of skipping records that no longer line up.
  const fingerprint = createHash("sha1");
  for (const f of files) {
    const st = statSync(f);
    fingerprint.update(`${relative(root, f)}\0${st.size}\0${Math.trunc(st.mtimeMs)}\n`);
  }
  let done = 0;
  const read = (file: string): Promise<ReaderItem> => {
    const rel = relative(root, file);
    const ext = extname(file).toLowerCase();
    if (kindOfName(file) === "zip")
      return Promise.resolve({
        kind: "skip",
        where: rel,
        reason: "a ZIP archive: unpack it and ingest its folder",
      });
    if (!isIngestibleFile(file) || isMediaWikiDump(file)) {
      return Promise.resolve({
        kind: "skip",
        where: rel,
        reason:
          ext === ".jsonl" || ext === ".ndjson" || isMediaWikiDump(file)
            ? `a ${ext === ".jsonl" || ext === ".ndjson" ? "JSONL file" : "MediaWiki XML dump"}: ingest it on its own (codehop ingest ${rel})`
            : `unsupported format (${ext || "no extension"}): codehop ingests ${SUPPORTED_DOCUMENTS}`,
      });
    }
    return readDocumentFile(file, rel, options);
  };
  const items = async function* (): AsyncGenerator<ReaderItem> {
    // Files are read a few at a time, in order: ingesting one overlaps reading the next.
    const ahead: Promise<ReaderItem>[] = [];
    let next = 0;
    const fill = () => {
      while (ahead.length < READ_AHEAD && next < files.length) {
        const p = read(files[next++]);
        p.catch(() => {}); // awaited in order below; an early rejection is not unhandled
        ahead.push(p);
      }
    };
    fill();
    while (ahead.length) {
      const item = await ahead.shift()!;
      fill();
      yield item;
      done++;
    }
  };
  return {
    format: "folder",
    sourceKey: `folder:${resolve(root)}:${fingerprint.digest("hex")}`,
    unit: "files",
    items: items(),
    progress: () => ({ done, total: files.length }),
  };
}

/** Whether a folder's file is a MediaWiki dump (by name and root element; other XML is a document). */
function isMediaWikiDump(file: string): boolean {
  if (!DUMP_NAME.test(basename(file))) return false;
  try {
    return isBzip2(file) || /<mediawiki[\s>]/.test(head(file, 1024).toString("latin1"));
  } catch {
    return false;
  }
}

/** Whether a folder's file is read as a document (by extension, or a PDF by its first bytes). */
function isIngestibleFile(file: string): boolean {
  if (hasSupportedExtension(file)) return true;
  try {
    return startsWithPdf(file);
  } catch {
    return false;
  }
}
