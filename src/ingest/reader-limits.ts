import { READER_ENV, readEnv, type CodehopEnv } from "../config/env.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";

/**
 * The bounds every document reader works within (docs/security.md, "Hostile files"). A file that
 * goes past one is refused with {@link InputLimitError} (code CODEHOP_INPUT_LIMIT) naming the file,
 * the limit and the variable that raises it — or, for time spent on a document with many parts
 * (pages, sheets, slides, chapters), read up to there and marked truncated.
 */
export interface ReaderLimits {
  /**
   * Time of one extraction, in ms: the CPU time of its process where Linux tells it (a loaded
   * machine does not make a file fail), wall time elsewhere. Documents with parts stop taking new
   * parts at 3/4 of it (the text so far is kept, marked truncated); at the full time the process
   * is killed and the file refused.
   */
  timeoutMs: number;
  /**
   * Memory of the extraction's process (MB): its resident size, and its V8 heap. A document whose
   * parse does not fit is refused.
   */
  memoryMb: number;
  /** Bytes inflated from one archive (DOCX, XLSX, PPTX, ODT, EPUB, ZIP members read), in MB. */
  maxInflatedMb: number;
  /** Entries an archive may list. */
  maxEntries: number;
  /** Inflated / compressed size of one archive entry, checked once the entry passes 1 MB. */
  maxRatio: number;
  /** Element nesting of XML (and of HTML) a reader accepts. */
  maxXmlDepth: number;
  /** PDF pages read (a PDF with more is read up to there, marked truncated). */
  maxPages: number;
}

/** Default limits: any file up to the 50 MB upload limit ends within about 5 s and 200 MB. */
export const READER_LIMITS: Readonly<ReaderLimits> = {
  timeoutMs: 4_000,
  // 8 MB under the 200 MB target: a parser's one allocation can land between two polls.
  memoryMb: 192,
  maxInflatedMb: 100,
  maxEntries: 10_000,
  maxRatio: 200,
  maxXmlDepth: 256,
  maxPages: 2_000,
};

/** What each limit is called in messages. */
const LIMIT_WORDS: Readonly<Record<keyof ReaderLimits, (max: number) => string>> = {
  timeoutMs: (max) => `the ${max / 1000} s reading time limit`,
  memoryMb: (max) => `the ${max} MB memory limit of a reader`,
  maxInflatedMb: (max) => `the ${max} MB limit on bytes inflated from an archive`,
  maxEntries: (max) => `the ${max} entry limit of an archive`,
  maxRatio: (max) => `the ${max}:1 compression ratio limit`,
  maxXmlDepth: (max) => `the ${max} level XML nesting limit`,
  maxPages: (max) => `the ${max} page limit`,
};

/** The limits from the environment (CODEHOP_READER_*) over the defaults. */
export function readerLimitsFromEnv(env: CodehopEnv = readEnv()): ReaderLimits {
  return { ...READER_LIMITS, ...env.readerLimits };
}

/** `limits` over the environment's (read when a limit is not given). */
export function resolveReaderLimits(limits: Partial<ReaderLimits> = {}): ReaderLimits {
  const all = Object.keys(READER_LIMITS).every(
    (k) => limits[k as keyof ReaderLimits] !== undefined,
  );
  return { ...(all ? READER_LIMITS : readerLimitsFromEnv()), ...definedOnly(limits) };
}

function definedOnly(limits: Partial<ReaderLimits>): Partial<ReaderLimits> {
  return Object.fromEntries(Object.entries(limits).filter(([, v]) => v !== undefined));
}

/**
 * A file went past a reader limit. `file` is the file's name (with the archive member, if any),
 * `limit` which limit and `max` its value; the message says all three and how to raise it.
 */
export class InputLimitError extends CodehopError {
  constructor(
    readonly file: string,
    readonly limit: keyof ReaderLimits | "xmlEntities" | "stack",
    readonly max: number,
    detail: string,
  ) {
    super(ErrorCodes.INPUT_LIMIT, `${file}: ${detail}${raiseHint(limit)}`);
    this.name = "InputLimitError";
  }
}

function raiseHint(limit: InputLimitError["limit"]): string {
  if (limit === "xmlEntities" || limit === "stack") return "";
  return ` (${READER_ENV[limit]} raises it)`;
}

/** An {@link InputLimitError} for `limit` with the standard wording: "<what> went past <limit>". */
export function limitError(
  file: string,
  limit: keyof ReaderLimits,
  max: number,
  what: string,
): InputLimitError {
  return new InputLimitError(file, limit, max, `${what} went past ${LIMIT_WORDS[limit](max)}`);
}

/** True for the errors a reader raises on bad input (unreadable or over a limit). */
export function isInputError(err: unknown): err is CodehopError {
  return (
    CodehopError.isInstance(err) &&
    (err.code === ErrorCodes.INPUT_INVALID || err.code === ErrorCodes.INPUT_LIMIT)
  );
}

/** Bytes in `mb` megabytes. */
export function mbToBytes(mb: number): number {
  return Math.round(mb * 1024 * 1024);
}
