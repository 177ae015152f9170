import { readFileSync } from "node:fs";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { detectDocumentKind, displayName } from "./document-kinds.ts";
import type { DocumentKind, FormatInput, FormatOutput, FormatReader } from "./format-types.ts";
import { InputLimitError, type ReaderLimits } from "./reader-limits.ts";
import { BoundedZip } from "./zip-archive.ts";

/**
 * The program of a reader process (see reader-pool.ts): it reads one file at a time with the
 * reader of its kind, and answers with the text or with the error, as plain data.
 */

/** One file to read, as the pool sends it. */
export interface ReaderJob {
  id: number;
  kind: DocumentKind;
  name: string;
  mediaType?: string;
  /** For an archive: the entry to read instead of listing the archive. */
  member?: string;
  /** The file's bytes, or (for a large file) empty with `bytesFile` set. */
  bytes: Uint8Array;
  /**
   * A private temporary file holding the bytes: a large file is handed over this way, read once
   * here, instead of through the IPC channel (which would hold it two or three times over).
   */
  bytesFile?: string;
  limits: ReaderLimits;
  maxChars: number;
  maxHtmlChars: number;
}

/** An error as it crosses the process boundary. */
export interface ReaderFailure {
  code?: string;
  message: string;
  /** For INPUT_LIMIT: which limit, its value and the file. */
  limit?: InputLimitError["limit"];
  max?: number;
  file?: string;
}

/** Tells an idle process to load the reader of a type before a file comes (no answer). */
export interface ReaderWarmUp {
  warm: DocumentKind;
}

/** What the process answers. */
export type ReaderReply =
  | { id: number; type: "loaded" }
  | { id: number; type: "done"; result: FormatOutput }
  | { id: number; type: "failed"; error: ReaderFailure };

/** The reader of each kind, loaded on first use (PDF.js, mammoth and SheetJS are large). */
const READERS: Readonly<Record<DocumentKind, () => Promise<FormatReader>>> = {
  pdf: async () => (await import("./format-pdf.ts")).readPdf,
  docx: async () => (await import("./format-docx.ts")).readDocx,
  html: async () => (await import("./format-html.ts")).readHtml,
  markdown: async () => (await import("./format-text.ts")).readMarkdown,
  text: async () => (await import("./format-text.ts")).readText,
  xlsx: async () => (await import("./format-sheet.ts")).readSheet,
  ods: async () => (await import("./format-sheet.ts")).readSheet,
  xls: async () => (await import("./format-sheet.ts")).readSheet,
  csv: async () => (await import("./format-sheet.ts")).readSheet,
  pptx: async () => (await import("./format-office.ts")).readPptx,
  odt: async () => (await import("./format-office.ts")).readOdt,
  epub: async () => (await import("./format-epub.ts")).readEpub,
  json: async () => (await import("./format-data.ts")).readJson,
  xml: async () => (await import("./format-data.ts")).readXml,
  zip: async () => (await import("./format-zip.ts")).readZip,
};

/**
 * The file a job reads: the job's own, or, with `member`, that entry of the archive (inflated
 * within the archive limits), with its own type.
 */
async function jobInput(job: ReaderJob): Promise<FormatInput> {
  if (job.member === undefined)
    return { kind: job.kind, name: job.name, bytes: job.bytes, mediaType: job.mediaType };
  if (job.kind === "docx" || job.kind === "zip" || ZIP_BASED.has(job.kind)) {
    const zip = await BoundedZip.open(job.bytes, job.name, job.limits);
    try {
      const bytes = await zip.read(job.member);
      const name = `${job.name} (${job.member})`;
      try {
        return { kind: detectDocumentKind({ name: job.member }, bytes), name, bytes };
      } catch (err) {
        // Said of the member's own name: say which archive holds it.
        if (CodehopError.isInstance(err))
          err.message = err.message.replace(displayName(job.member), name);
        throw err;
      }
    } finally {
      zip.close();
    }
  }
  throw new CodehopError(
    ErrorCodes.INPUT_INVALID,
    `${job.name} is not an archive: it has no member ${job.member} to read.`,
  );
}

/** Types whose files are ZIP archives (their parts can be read as members). */
const ZIP_BASED: ReadonlySet<DocumentKind> = new Set(["xlsx", "ods", "pptx", "odt", "epub"]);

/** Reads one job's file (in this process); the caller sends the reply. */
export async function runJob(
  given: ReaderJob,
  onLoaded: () => void = () => {},
): Promise<FormatOutput> {
  const job = given.bytesFile ? { ...given, bytes: readFileSync(given.bytesFile) } : given;
  const input = await jobInput(job);
  const reader = await READERS[input.kind]();
  onLoaded();
  // The time counted is this process's CPU time, as the pool counts it.
  const clock = () => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  };
  const started = clock();
  const softMs = job.limits.timeoutMs * 0.75;
  const read = await reader(input, {
    limits: job.limits,
    maxChars: job.maxChars,
    maxHtmlChars: job.maxHtmlChars,
    overTime: () => clock() - started > softMs,
  });
  const result =
    job.member === undefined ? read : { ...read, member: { name: job.member, kind: input.kind } };
  if (result.text.length > job.maxChars) {
    return {
      ...result,
      text: result.text.slice(0, job.maxChars),
      truncated: true,
      truncation: [result.truncation, `kept the first ${job.maxChars} characters of the text`]
        .filter(Boolean)
        .join("; "),
    };
  }
  return result;
}

/** An error as plain data (see {@link ReaderFailure}); a stack overflow is a nesting limit. */
export function toFailure(err: unknown, name: string): ReaderFailure {
  if (err instanceof RangeError && /call stack/i.test(err.message)) {
    const limit = new InputLimitError(
      name,
      "stack",
      0,
      "the document nests too deeply to be read (the reader's stack ran out)",
    );
    return { code: limit.code, message: limit.message, limit: "stack", max: 0, file: name };
  }
  if (err instanceof InputLimitError)
    return { code: err.code, message: err.message, limit: err.limit, max: err.max, file: err.file };
  if (CodehopError.isInstance(err)) return { code: err.code, message: err.message };
  return {
    code: ErrorCodes.INPUT_INVALID,
    message: `${name} could not be read: ${(err as Error)?.message ?? String(err)}`,
  };
}

/** True when this module is the program of a reader process (not imported by another). */
function isReaderProcess(): boolean {
  return typeof process.send === "function" && /reader-process\.[jt]s$/.test(process.argv[1] ?? "");
}

if (isReaderProcess()) {
  // The parent gone, there is no one to answer: a reader never outlives it.
  process.on("disconnect", () => process.exit(0));
  process.on("message", (job: ReaderJob | ReaderWarmUp) => {
    if ("warm" in job) {
      READERS[job.warm]?.().catch(() => {});
      return;
    }
    const send = (reply: ReaderReply) => process.send!(reply);
    runJob(job, () => send({ id: job.id, type: "loaded" })).then(
      (result) => send({ id: job.id, type: "done", result }),
      (err: unknown) => send({ id: job.id, type: "failed", error: toFailure(err, job.name) }),
    );
  });
}
