import { PassThrough } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import { SaxesParser } from "saxes";
import bz2 from "unbzip2-stream";
import wtf from "wtf_wikipedia";
import type { ReaderItem } from "./types.ts";

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
  ns: number;
  redirect?: string;
  text: string;
}

/**
 * Converts one page's wikitext into clean text with Markdown section headings (wtf_wikipedia does
 * the wikitext parsing: templates, references, links and tables are removed or flattened).
 */
export function wikitextToDocument(
  title: string,
  wikitext: string,
): {
  text: string;
  disambiguation?: string[];
} {
  const doc = wtf(wikitext, { title });
  if (doc.isDisambiguation()) {
    const options = [
      ...new Set(
        doc
          .links()
          .map((l: any) => l.page())
          .filter((p: unknown): p is string => typeof p === "string" && !!p),
      ),
    ];
    return { text: doc.text({}).trim(), disambiguation: options };
  }
  const parts: string[] = [];
  for (const section of doc.sections()) {
    const heading = section.title().trim();
    if (DROPPED_SECTIONS.has(heading.toLowerCase())) continue;
    const body = section.text({}).trim();
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

  parser.on("opentag", (tag) => {
    path.push(tag.name);
    if (tag.name === "page") page = { title: "", ns: 0, text: "" };
    else if (tag.name === "redirect" && page) page.redirect = String(tag.attributes.title ?? "");
    buf = "";
  });
  parser.on("text", (t) => (buf += t));
  parser.on("cdata", (t) => (buf += t));
  parser.on("closetag", (tag) => {
    const parent = path[path.length - 2];
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
      if (!keep.has(p.ns)) continue;
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

  // A StringDecoder keeps multi-byte UTF-8 characters that straddle two chunks intact.
  const decoder = new StringDecoder("utf8");
  try {
    for await (const chunk of stream as AsyncIterable<Buffer | string>) {
      parser.write(typeof chunk === "string" ? chunk : decoder.write(chunk));
      yield* drain();
      if (xmlError) break;
    }
  } catch (err) {
    xmlError ??= err as Error;
  }
  if (!xmlError) {
    try {
      const rest = decoder.end();
      if (rest) parser.write(rest);
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
