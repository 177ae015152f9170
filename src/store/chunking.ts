import { RecursiveCharacterTextSplitter } from "@langchain/textsplitters";
import { CodehopError, ErrorCodes } from "../errors.ts";

/** Defaults of the reference design (docs/knowledge.md): 512-character passages overlapping by 256. */
export const DEFAULT_CHUNK_SIZE = 512;
export const DEFAULT_CHUNK_OVERLAP = 256;

/** Chunking parameters. */
export interface ChunkOptions {
  /** Maximum passage length in characters (default 512). */
  chunkSize?: number;
  /** Characters shared by consecutive passages of one section (default 256). */
  chunkOverlap?: number;
}

/** One section of a document: its heading ("" for the lead) and body text. */
export interface Section {
  heading: string;
  body: string;
}

/** One passage produced by {@link chunkDocument}. */
export interface Chunk {
  /** Section heading the passage sits under ("" for the lead). */
  section: string;
  text: string;
}

// Headings in both conventions we meet: Markdown ("## History", levels 1-6) as used by the demo
// corpus and folders of .md files, and MediaWiki ("== History ==") as produced by the MediaWiki API
// with exsectionformat=wiki. A heading line must stand alone.
const MARKDOWN_HEADING = /^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$/;
const WIKI_HEADING = /^(={2,6})[ \t]*(.+?)[ \t]*\1[ \t]*$/;

/** The heading text if `line` is a heading line, else undefined. */
export function parseHeading(line: string): string | undefined {
  const m = MARKDOWN_HEADING.exec(line) ?? null;
  if (m) return m[1].trim();
  const w = WIKI_HEADING.exec(line);
  if (w) return w[2].trim();
  return undefined;
}

/**
 * Splits a document into sections at heading lines. Text before the first heading is the lead
 * (heading ""). Sub-headings become their own sections; sections with no body are dropped.
 */
export function splitSections(text: string): Section[] {
  const sections: Section[] = [];
  let heading = "";
  let lines: string[] = [];
  const flush = () => {
    const body = lines.join("\n").trim();
    if (body) sections.push({ heading, body });
  };
  for (const line of text.replace(/\r\n?/g, "\n").split("\n")) {
    const h = parseHeading(line);
    if (h !== undefined) {
      flush();
      heading = h;
      lines = [];
    } else {
      lines.push(line);
    }
  }
  flush();
  return sections;
}

/** Validates chunk options (CONFIG_INVALID on nonsense such as overlap >= size). */
export function resolveChunkOptions(options: ChunkOptions = {}): Required<ChunkOptions> {
  const chunkSize = options.chunkSize ?? DEFAULT_CHUNK_SIZE;
  const chunkOverlap = options.chunkOverlap ?? DEFAULT_CHUNK_OVERLAP;
  if (!Number.isInteger(chunkSize) || chunkSize < 32) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `chunk size must be an integer >= 32, got ${chunkSize}`,
    );
  }
  if (!Number.isInteger(chunkOverlap) || chunkOverlap < 0 || chunkOverlap >= chunkSize) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `chunk overlap must be an integer in [0, chunk size), got ${chunkOverlap} with chunk size ${chunkSize}`,
    );
  }
  return { chunkSize, chunkOverlap };
}

/** The most characters handed to the recursive splitter at once. */
const MAX_SLAB_CHARS = 1_000_000;

/**
 * A section cut into slabs of at most {@link MAX_SLAB_CHARS}, at the last whitespace of each when
 * there is one: LangChain's splitter recurses down to single characters on text without
 * separators and overflowed the stack (a raw RangeError, 2.4 GB) on a 45 MB record of one word.
 */
function* slabs(text: string): Generator<string> {
  let from = 0;
  while (text.length - from > MAX_SLAB_CHARS) {
    let to = from + MAX_SLAB_CHARS;
    const space = text.lastIndexOf(" ", to);
    const line = text.lastIndexOf("\n", to);
    const cut = Math.max(space, line);
    if (cut > from + MAX_SLAB_CHARS / 2) to = cut + 1;
    yield text.slice(from, to);
    from = to;
  }
  yield text.slice(from);
}

/**
 * Text with none of the splitter's separators (no newline, no space: one long "word") cut straight
 * into windows of `size` characters overlapping by `overlap`: what the recursive splitter makes of
 * it too, after splitting it into single characters and merging them back (about 0.5 s and tens of
 * MB of garbage per million characters, and minutes on a worker whose heap is already large).
 */
function windows(text: string, size: number, overlap: number): string[] {
  const out: string[] = [];
  for (let from = 0; ; from += size - overlap) {
    out.push(text.slice(from, from + size));
    if (from + size >= text.length) return out;
  }
}

/** A reusable chunker (one splitter instance for many documents). */
export class Chunker {
  readonly options: Required<ChunkOptions>;
  private readonly splitter: RecursiveCharacterTextSplitter;

  constructor(options: ChunkOptions = {}) {
    this.options = resolveChunkOptions(options);
    this.splitter = new RecursiveCharacterTextSplitter({
      chunkSize: this.options.chunkSize,
      chunkOverlap: this.options.chunkOverlap,
    });
  }

  /**
   * Splits a document into passages: first into sections at headings, then each section with the
   * recursive splitter (paragraphs, lines, sentences, words), so no passage straddles two sections
   * and every passage knows its heading.
   */
  async chunk(text: string): Promise<Chunk[]> {
    const { chunkSize, chunkOverlap } = this.options;
    const out: Chunk[] = [];
    for (const section of splitSections(text)) {
      for (const slab of slabs(section.body)) {
        const pieces =
          slab.length <= chunkSize
            ? [slab]
            : /[ \n]/.test(slab)
              ? await this.splitter.splitText(slab)
              : windows(slab, chunkSize, chunkOverlap);
        for (const piece of pieces) {
          const t = piece.trim();
          if (t) out.push({ section: section.heading, text: t });
        }
      }
    }
    return out;
  }
}

/** One-off helper: {@link Chunker.chunk} with the given options. */
export async function chunkDocument(text: string, options: ChunkOptions = {}): Promise<Chunk[]> {
  return new Chunker(options).chunk(text);
}
