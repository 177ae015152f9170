import { PassThrough } from "node:stream";
import { decodeHTML } from "entities";
import { SaxesParser } from "saxes";
import bz2 from "unbzip2-stream";
import wtf from "wtf_wikipedia";
import { ErrorCodes } from "../errors.ts";
import { decodeText } from "./decode.ts";
import { READER_LIMITS } from "./reader-limits.ts";
import type { ReaderItem } from "./types.ts";

/** The deepest element nesting a dump may have (the document readers' XML limit). */
const MAX_DUMP_DEPTH = READER_LIMITS.maxXmlDepth;

/** Options for {@link readMediaWikiXml}. */
export interface MediaWikiXmlOptions {
  /** The stream is bzip2-compressed (.xml.bz2). */
  bzip2?: boolean;
  /** Namespaces to keep (default [0], articles). */
  namespaces?: number[];
}

// Trailing sections that are lists of links or citations, not prose worth retrieving.
const DROPPED_SECTIONS = new Set([
  "see also",
  "references",
  "external links",
  "further reading",
  "notes",
  "bibliography",
  "sources",
  "citations",
]);

interface RawPage {
  title: string;
  /** From `<ns>`; exports before MediaWiki 1.11 have none (see namespaceOf). */
  ns?: number;
  redirect?: string;
  text: string;
}

/**
 * Namespace names of English Wikipedia (canonical ones included), for exports that have neither
 * `<ns>` elements nor a `<siteinfo><namespaces>` list.
 */
const DEFAULT_NAMESPACES: Record<string, number> = {
  media: -2,
  special: -1,
  talk: 1,
  user: 2,
  "user talk": 3,
  project: 4,
  "project talk": 5,
  wikipedia: 4,
  "wikipedia talk": 5,
  file: 6,
  image: 6,
  "file talk": 7,
  "image talk": 7,
  mediawiki: 8,
  "mediawiki talk": 9,
  template: 10,
  "template talk": 11,
  help: 12,
  "help talk": 13,
  category: 14,
  "category talk": 15,
  portal: 100,
  "portal talk": 101,
  draft: 118,
  "draft talk": 119,
  module: 828,
  "module talk": 829,
};

/** Namespace key of a name as it appears in a title prefix ("User_talk" = "user talk"). */
function namespaceKey(name: string): string {
  return name.replace(/_/g, " ").replace(/\s+/g, " ").trim().toLowerCase();
}

/** A title's namespace from its prefix ("Talk:Foo" → 1), for pages without `<ns>`. */
function namespaceOf(title: string, names: Map<string, number>): number {
  const colon = title.indexOf(":");
  if (colon <= 0) return 0;
  const prefix = namespaceKey(title.slice(0, colon));
  return names.get(prefix) ?? DEFAULT_NAMESPACES[prefix] ?? 0;
}

// {{legend|color|label}} draws a coloured key for a table or map; wtf_wikipedia keeps its raw
// wikitext. Without the colours the label means nothing: drop it. (wtf.extend is global to the
// process; codehop is wtf_wikipedia's only user here.)
wtf.extend((_models: unknown, templates: Record<string, unknown>) => {
  templates.legend = () => "";
});

/** The start of a link to a file or image. */
const FILE_LINK = /\[\[\s*(?:file|image|media)\s*:/gi;

/**
 * Removes `[[File:...]]` / `[[Image:...]]` links, nested links in their captions included.
 * wtf_wikipedia drops them from paragraphs, but not from list items, where
 * `[[Image:Scheme.png|250px|[[Clemmensen reduction]]]]` would stay as text.
 */
export function removeFileLinks(wikitext: string): string {
  let out = "";
  let from = 0;
  FILE_LINK.lastIndex = 0;
  for (let m = FILE_LINK.exec(wikitext); m; m = FILE_LINK.exec(wikitext)) {
    let depth = 0;
    let i = m.index;
    for (; i < wikitext.length - 1; i++) {
      if (wikitext[i] === "[" && wikitext[i + 1] === "[") {
        depth++;
        i++;
      } else if (wikitext[i] === "]" && wikitext[i + 1] === "]") {
        depth--;
        i++;
        if (depth === 0) break;
      }
    }
    // An unclosed link is left alone (the parser deals with it as it can).
    if (depth !== 0) break;
    out += wikitext.slice(from, m.index);
    from = i + 1;
    FILE_LINK.lastIndex = from;
  }
  return out + wikitext.slice(from);
}

/**
 * Last touches on rendered text: HTML list and break tags that survive parsing become lines,
 * leftover bold/italic quote runs (unbalanced in the source) are dropped, and character
 * references (`&#91;`, `&eta;`) are decoded — after parsing, so a decoded "[[" is never markup.
 */
export function finishText(text: string): string {
  return decodeHTML(
    text
      .replace(/<li\b[^>]*>/gi, "\n * ")
      .replace(/<br\b[^>]*>/gi, "\n")
      .replace(/<\/?(?:ol|ul|li|small|big|center|span|div|p|poem|sup|sub|s|u|abbr)\b[^>]*>/gi, "")
      .replace(/'{2,}/g, ""),
  )
    .replace(/[ \t]+\n/g, "\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

// Infobox fields that hold pictures and layout, not facts.
const FILE_VALUE = /\.(?:svg|png|jpe?g|gif|tiff?|webp|xcf|ogg|ogv|oga|webm|mp3|pdf)$/i;
const LAYOUT_KEY =
  /^(?:image|img|logo|flag|seal|coat|map|pushpin|photo|signature|alt)|(?:size|width|upright|link|[ _]alt|[ _]height)$/i;

/** One text line per value: multi-line values (lists inside a cell) joined with "; ". */
function oneLine(value: string): string {
  return value
    .split(/\n+/)
    .map((l) => l.replace(/^[\s*#:;•]+/, "").trim())
    .filter(Boolean)
    .join("; ");
}

/** An infobox as "field: value" lines (wtf_wikipedia's keyValue), pictures and layout left out. */
function infoboxLines(infobox: any): string[] {
  const lines: string[] = [];
  for (const [key, raw] of Object.entries(infobox.keyValue() as Record<string, unknown>)) {
    const value = oneLine(String(raw ?? ""));
    if (!value || FILE_VALUE.test(value) || LAYOUT_KEY.test(key) || /^\d+\s*px$/i.test(value))
      continue;
    lines.push(`${key.replace(/_/g, " ").trim()}: ${value}`);
  }
  return lines;
}

/**
 * A table as one line per row (wtf_wikipedia's keyValue): "Header: value; Header: value", or the
 * bare values when the table has no header row.
 */
function tableLines(table: any): string[] {
  const lines: string[] = [];
  for (const row of table.keyValue() as Record<string, unknown>[]) {
    const cells = Object.entries(row)
      .map(([k, v]) => [k.trim(), oneLine(String(v ?? ""))])
      .filter(([, v]) => v);
    if (cells.length === 0) continue;
    lines.push(cells.map(([k, v]) => (!k || /^col\d+$/i.test(k) ? v : `${k}: ${v}`)).join("; "));
  }
  return lines;
}

/**
 * Converts one page's wikitext into clean text with Markdown section headings. wtf_wikipedia
 * does the parsing: templates, references and links are removed or flattened, lists kept as
 * " * item" lines; infoboxes and tables, which it leaves out of its text, are added after their
 * section's prose as readable rows ("capital: Montgomery", "Rank: 1; City: Birmingham"), since a
 * page's key facts often live there.
 */
export function wikitextToDocument(
  title: string,
  wikitext: string,
): {
  text: string;
  disambiguation?: string[];
} {
  const doc = wtf(removeFileLinks(wikitext), { title });
  if (doc.isDisambiguation()) {
    const options = [
      ...new Set(
        doc
          .links()
          .map((l: any) => l.page())
          .filter((p: unknown): p is string => typeof p === "string" && !!p),
      ),
    ];
    return { text: finishText(doc.text({})), disambiguation: options };
  }
  const parts: string[] = [];
  for (const section of doc.sections()) {
    const heading = section.title().trim();
    if (DROPPED_SECTIONS.has(heading.toLowerCase())) continue;
    const blocks: string[] = [
      section.text({}),
      ...(section.infoboxes() as any[]).map((i) => infoboxLines(i).join("\n")),
      ...(section.tables() as any[]).map((t) => tableLines(t).join("\n")),
    ];
    const body = finishText(blocks.filter((b) => b.trim()).join("\n\n"));
    if (!body) continue;
    parts.push(
      heading ? `${"#".repeat(Math.min(6, 2 + section.depth()))} ${heading}\n${body}` : body,
    );
  }
  return { text: parts.join("\n\n") };
}

/**
 * Streams a MediaWiki XML export (Special:Export or a database dump) page by page with a SAX
 * parser, so memory stays constant however large the dump. Yields documents for articles,
 * redirects as aliases, and skip items for pages that fail to parse. Pages outside `namespaces`
 * are passed over silently (they are not errors).
 */
export async function* readMediaWikiXml(
  input: NodeJS.ReadableStream,
  options: MediaWikiXmlOptions = {},
): AsyncGenerator<ReaderItem> {
  const keep = new Set(options.namespaces ?? [0]);
  let stream: NodeJS.ReadableStream = input;
  if (options.bzip2) {
    // unbzip2-stream is an old-style `through` stream (not async-iterable): pipe it into a
    // PassThrough and forward errors so corrupt data ends the loop below with a clear message.
    const out = new PassThrough();
    const decoder = bz2();
    decoder.on("error", (err: Error) => out.destroy(new Error(`bzip2: ${err.message}`)));
    input.on("error", (err: Error) => out.destroy(err));
    input.pipe(decoder).pipe(out);
    stream = out;
  }
  const parser = new SaxesParser();
  const ready: RawPage[] = [];
  const path: string[] = [];
  let page: RawPage | undefined;
  let buf = "";
  let pageNo = 0;
  let xmlError: Error | undefined;
  // <siteinfo><namespaces>: name → number, to place pages of exports without <ns>.
  const namespaces = new Map<string, number>();
  let namespaceNumber: number | undefined;

  parser.on("opentag", (tag) => {
    path.push(tag.name);
    // An export nests a few levels (mediawiki > page > revision > text); markup inside <text> is
    // escaped. Millions of open elements made saxes report each one unclosed at the end (a 15 MB
    // file ran past 2 minutes and 1.6 GB): stop at the document readers' nesting limit instead.
    if (path.length > MAX_DUMP_DEPTH)
      throw new Error(
        `the XML nests deeper than ${MAX_DUMP_DEPTH} levels (a MediaWiki export nests about 5) [${ErrorCodes.INPUT_LIMIT}]`,
      );
    if (tag.name === "page") page = { title: "", text: "" };
    else if (tag.name === "redirect" && page) page.redirect = String(tag.attributes.title ?? "");
    else if (tag.name === "namespace" && !page) namespaceNumber = Number(tag.attributes.key);
    buf = "";
  });
  parser.on("text", (t) => (buf += t));
  parser.on("cdata", (t) => (buf += t));
  parser.on("closetag", (tag) => {
    const parent = path[path.length - 2];
    if (tag.name === "namespace" && parent === "namespaces" && namespaceNumber !== undefined) {
      if (buf.trim() && Number.isInteger(namespaceNumber))
        namespaces.set(namespaceKey(buf), namespaceNumber);
      namespaceNumber = undefined;
    }
    if (page) {
      if (tag.name === "title" && parent === "page") page.title = buf;
      else if (tag.name === "ns" && parent === "page") page.ns = Number(buf);
      else if (tag.name === "text" && parent === "revision") page.text = buf;
      else if (tag.name === "page") {
        // After an XML error the parser recovers but what it reads is unreliable: keep nothing.
        if (!xmlError) ready.push(page);
        page = undefined;
      }
    }
    path.pop();
    buf = "";
  });
  parser.on("error", (err) => {
    xmlError ??= err;
  });

  const drain = function* (): Generator<ReaderItem> {
    while (ready.length > 0) {
      const p = ready.shift()!;
      pageNo++;
      const where = `page ${pageNo} (${p.title || "untitled"})`;
      if (!keep.has(p.ns ?? namespaceOf(p.title, namespaces))) continue;
      if (!p.title.trim()) {
        yield { kind: "skip", where, reason: "page has no title" };
        continue;
      }
      if (p.redirect !== undefined || /^\s*#redirect\s*\[\[/i.test(p.text)) {
        const target = p.redirect || /\[\[([^\]|#]+)/.exec(p.text)?.[1] || "";
        if (target.trim()) yield { kind: "redirect", from: p.title, to: target.trim(), where };
        continue;
      }
      try {
        const { text, disambiguation } = wikitextToDocument(p.title, p.text);
        if (disambiguation) {
          yield {
            kind: "document",
            where,
            doc: {
              title: p.title,
              text: text || `${p.title} may refer to several pages.`,
              source: "mediawiki-xml",
              metadata: { disambiguation: true, options: disambiguation },
            },
          };
        } else if (!text) {
          yield { kind: "skip", where, reason: "no text after removing markup" };
        } else {
          yield { kind: "document", where, doc: { title: p.title, text, source: "mediawiki-xml" } };
        }
      } catch (err) {
        yield { kind: "skip", where, reason: `cannot parse wikitext: ${(err as Error).message}` };
      }
    }
  };

  try {
    // Decoded by the encoding its first bytes show (UTF-8, or UTF-16 with or without a BOM);
    // characters split across chunks are kept whole.
    for await (const text of decodeText(stream as AsyncIterable<Buffer>, { xml: true })) {
      parser.write(text);
      yield* drain();
      if (xmlError) break;
    }
  } catch (err) {
    xmlError ??= err as Error;
  }
  if (!xmlError) {
    try {
      parser.close();
    } catch (err) {
      xmlError ??= err as Error;
    }
  }
  yield* drain();
  if (xmlError) {
    yield {
      kind: "skip",
      where: `after page ${pageNo}`,
      reason: `unreadable input, stopped reading: ${xmlError.message}`,
    };
  }
}
