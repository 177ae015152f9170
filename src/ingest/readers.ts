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
import { decodeBuffer, decodeText } from "./decode.ts";
import { readMediaWikiXml } from "./mediawiki-xml.ts";
import type { ReaderItem } from "./types.ts";

/** Input formats `codehop ingest` understands. */
export type IngestFormat = "jsonl" | "folder" | "mediawiki-xml";

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

/** Guesses the format from the path: a directory, *.jsonl / *.ndjson, a MediaWiki dump name (else INPUT_INVALID). */
export function detectFormat(path: string): IngestFormat {
  if (!existsSync(path))
    throw new CodehopError(ErrorCodes.INPUT_INVALID, `input ${path} does not exist`);
  if (statSync(path).isDirectory()) return "folder";
  const lower = path.toLowerCase();
  if (DUMP_NAME.test(basename(lower))) return "mediawiki-xml";
  if (lower.endsWith(".jsonl") || lower.endsWith(".ndjson")) return "jsonl";
  throw new CodehopError(
    ErrorCodes.INPUT_INVALID,
    `cannot tell the format of ${path}; pass --format jsonl|folder|mediawiki-xml`,
  );
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

/** Opens a reader for a JSONL file, a folder of .md/.txt files or a MediaWiki XML dump (.xml, .xml.bz2). */
export function openReader(
  path: string,
  format: IngestFormat = detectFormat(path),
): DocumentReader {
  if (!existsSync(path))
    throw new CodehopError(ErrorCodes.INPUT_INVALID, `input ${path} does not exist`);
  const st = statSync(path);
  const sourceKey = `${format}:${resolve(path)}:${st.size}:${Math.trunc(st.mtimeMs)}`;
  if (format === "folder") {
    if (!st.isDirectory())
      throw new CodehopError(ErrorCodes.INPUT_INVALID, `${path} is not a directory`);
    return folderReader(path);
  }
  if (st.isDirectory())
    throw new CodehopError(ErrorCodes.INPUT_INVALID, `${path} is a directory; use --format folder`);
  const counter = { bytes: 0 };
  const raw = () => {
    const s = createReadStream(path);
    s.on("data", (chunk) => (counter.bytes += chunk.length));
    return s;
  };
  const progress = () => ({ done: counter.bytes, total: st.size });
  if (format === "jsonl")
    return { format, sourceKey, unit: "bytes", items: readJsonl(raw()), progress };
  return {
    format,
    sourceKey,
    unit: "bytes",
    // By content, not name: a renamed or split dump is still recognised as compressed.
    items: readMediaWikiXml(raw(), { bzip2: isBzip2(path) }),
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

function jsonlRecord(line: string, where: string): ReaderItem {
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

const TEXT_EXTENSIONS = new Set([".md", ".markdown", ".txt"]);

function listFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    const entries = readdirSync(dir, { withFileTypes: true });
    entries.sort((a, b) => a.name.localeCompare(b.name));
    for (const e of entries) {
      if (e.name.startsWith(".")) continue;
      const full = join(dir, e.name);
      if (e.isDirectory()) walk(full);
      else if (e.isFile() && TEXT_EXTENSIONS.has(extname(e.name).toLowerCase())) out.push(full);
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
  const name = basename(relPath, extname(relPath)).replace(/[_-]+/g, " ").trim();
  return { title: name, text: text.trim() };
}

function folderReader(root: string): DocumentReader {
  const files = listFiles(root);
  // The resume key covers every file's path, size and mtime: any edit, addition or removal
  // starts a fresh run instead of skipping records that no longer line up.
  const fingerprint = createHash("sha1");
  for (const f of files) {
    const st = statSync(f);
    fingerprint.update(`${relative(root, f)}\0${st.size}\0${Math.trunc(st.mtimeMs)}\n`);
  }
  let done = 0;
  const items = async function* (): AsyncGenerator<ReaderItem> {
    for (const file of files) {
      const rel = relative(root, file);
      try {
        const { title, text } = fileToDocument(rel, decodeBuffer(await readFile(file)));
        yield { kind: "document", where: rel, doc: { title, text, source: rel } };
      } catch (err) {
        yield { kind: "skip", where: rel, reason: (err as Error).message };
      }
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
