import { Lexer, type Token, type Tokens } from "marked";
import { decodeDocumentStart, neutralizeHeadings } from "./document-text.ts";
import type { FormatReader } from "./format-types.ts";

/**
 * Markdown and plain text. Markdown is tokenized by marked: every heading — ATX (`## Sub`) and
 * setext (`Title` over `=====`, `Sub` over `-----`) — becomes one ATX line with its plain text
 * (inline markup dropped), which is what the corpus chunker starts sections at; lines elsewhere
 * that merely look like headings (a `# comment` in a code block, a row of `=`) are kept from
 * starting one. Plain text has no headings at all.
 */
export const readMarkdown: FormatReader = async ({ bytes, mediaType }, { maxChars }) => {
  const start = decodeDocumentStart(bytes, maxChars + SLACK_CHARS, mediaType);
  const { text, title } = markdownToText(start.text);
  return { text, ...(title ? { title } : {}), ...cutNote(start, maxChars) };
};

/** Plain text: decoded, with heading-like lines neutralized. */
export const readText: FormatReader = async ({ bytes, mediaType }, { maxChars }) => {
  const start = decodeDocumentStart(bytes, maxChars + SLACK_CHARS, mediaType);
  return { text: neutralizeHeadings(start.text.trim()), ...cutNote(start, maxChars) };
};

/**
 * Characters decoded past `maxChars`: markup and whitespace the reader drops must not leave the
 * kept text short of `maxChars` (the reader process cuts the result to exactly `maxChars`).
 */
const SLACK_CHARS = 4096;

/** The truncation of a text read only in part. */
function cutNote(start: { cut: boolean; total: number }, maxChars: number) {
  return start.cut
    ? {
        truncated: true,
        truncation: `kept the first ${maxChars} characters of the text (${start.total} bytes)`,
      }
    : {};
}

/**
 * Markdown with its headings as ATX lines (see the module comment); `title` is the text of a
 * level-1 heading that opens the document.
 */
export function markdownToText(markdown: string): { text: string; title?: string } {
  const tokens = new Lexer({ gfm: true }).lex(markdown);
  const out: string[] = [];
  let title: string | undefined;
  let first = true;
  for (const token of tokens) {
    if (token.type === "space") {
      out.push(token.raw);
      continue;
    }
    if (token.type === "heading") {
      const heading = token as Tokens.Heading;
      const text = inlineText(heading.tokens).replace(/\s+/g, " ").trim();
      if (first && heading.depth === 1 && text) title = text;
      // The heading's own line ends (a heading right above a paragraph has one) are kept.
      const ends = /\n*$/.exec(heading.raw)![0];
      out.push(text ? `${"#".repeat(heading.depth)} ${text}${ends}` : ends);
    } else out.push(neutralizeHeadings(token.raw));
    first = false;
  }
  return { text: out.join("").trim(), ...(title ? { title } : {}) };
}

/** The plain text of inline tokens (emphasis, code spans, links: their text; images: alt text). */
function inlineText(tokens: readonly Token[] | undefined): string {
  let s = "";
  for (const t of tokens ?? []) {
    if (t.type === "html") continue;
    const children = (t as { tokens?: Token[] }).tokens;
    s += children?.length ? inlineText(children) : ((t as { text?: string }).text ?? "");
  }
  return s;
}
