import { Marked, type Tokens } from "marked";
import type { Citation } from "../base/state.ts";

/** What the HTML page is rendered from: the report's Markdown and its citations. */
export interface ReportHtmlInput {
  markdown: string;
  citations: readonly Citation[];
}

function escapeHtml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

/** Only web, mail and in-page links survive (the text comes from a model: no `javascript:`). */
function safeHref(href: string): string | undefined {
  return /^(?:https?:|mailto:|#)/i.test(href.trim()) ? href.trim() : undefined;
}

// Raw HTML in the model's text is shown as text, never interpreted.
const marked = new Marked({
  gfm: true,
  renderer: {
    html(token: Tokens.HTML | Tokens.Tag) {
      return escapeHtml(token.text);
    },
    link(this: any, token: Tokens.Link) {
      const inner = this.parser.parseInline(token.tokens);
      const href = safeHref(token.href);
      return href ? `<a href="${escapeHtml(href)}">${inner}</a>` : inner;
    },
    image(token: Tokens.Image) {
      return escapeHtml(token.text);
    },
  },
});

const STYLE = `
body { font: 16px/1.55 system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 48rem; margin: 2rem auto; padding: 0 1rem; color: #1d1d1f; }
h1 { font-size: 1.8rem; margin-bottom: .5rem; } h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
a.cite { text-decoration: none; font-size: .8em; vertical-align: super; }
ol.references li { margin: .4rem 0; } ol.references details { color: #444; font-size: .9em; }
ol.references li:target { background: #fff6d6; }
.meta { color: #666; font-size: .9em; }
`;

/**
 * The report as one self-contained HTML page (inline CSS, no script, nothing fetched): the body
 * rendered from its Markdown, each `[n]` a link to its reference, and the References as a list
 * whose entries show the cited passage's text. Raw HTML in the Markdown is escaped.
 */
export function renderReportHtml(input: ReportHtmlInput): string {
  const md = input.markdown.replace(/\r\n/g, "\n");
  const title = /^#\s+(.+)$/m.exec(md)?.[1]?.trim() ?? "Report";
  // The body is everything before the References section; the references are rendered from data.
  const refAt = md.search(/^## References\s*$/m);
  const verifyAt = md.search(/^---\s*$/m);
  const bodyMd = refAt === -1 ? md : md.slice(0, refAt);
  const tail = verifyAt > refAt && refAt !== -1 ? md.slice(verifyAt) : "";
  const known = new Set(input.citations.map((c) => c.n));
  const linked = bodyMd.replace(/\[(\d{1,4})\]/g, (whole, n: string) =>
    known.has(Number(n)) ? `[\\[${n}\\]](#ref-${n})` : whole,
  );
  let body = marked.parse(linked, { async: false }) as string;
  body = body.replace(/<a href="#ref-(\d+)">/g, '<a class="cite" href="#ref-$1">');
  const refs = input.citations
    .map((c) => {
      const where = c.section ? `, section “${escapeHtml(c.section)}”` : "";
      const link = c.url
        ? ` — <a href="${escapeHtml(safeHref(c.url) ?? "#")}">${escapeHtml(c.url)}</a>`
        : "";
      return (
        `<li id="ref-${c.n}"><strong>${escapeHtml(c.title)}</strong>${where} <span class="meta">(passage ${escapeHtml(c.passage_id)}, ${escapeHtml(c.source)})</span>${link}` +
        `<details><summary>cited passage</summary><p>${escapeHtml(c.text)}</p></details></li>`
      );
    })
    .join("\n");
  const references = refs
    ? `<h2 id="references">References</h2>\n<ol class="references">\n${refs}\n</ol>`
    : "";
  const footer = tail ? (marked.parse(tail, { async: false }) as string) : "";
  return [
    "<!doctype html>",
    '<html lang="en">',
    "<head>",
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(title)}</title>`,
    `<style>${STYLE}</style>`,
    "</head>",
    "<body>",
    body,
    references,
    footer,
    "</body>",
    "</html>",
    "",
  ].join("\n");
}
