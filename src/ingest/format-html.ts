import { decodeHTML } from "entities";
import { Parser } from "htmlparser2";
import { decodeDocumentStart } from "./document-text.ts";
import { htmlToText } from "./html-to-text.ts";
import type { FormatReader } from "./format-types.ts";
import { limitError, type ReaderLimits } from "./reader-limits.ts";

/**
 * HTML pages as text with Markdown headings (turndown), their `<title>` kept. A page longer than
 * `maxHtmlChars` is cut there (converting takes about a second per megabyte) and marked truncated.
 */
export const readHtml: FormatReader = async (
  { name, bytes, mediaType },
  { limits, maxHtmlChars },
) => {
  const { text: html, cut } = decodeDocumentStart(bytes, maxHtmlChars, mediaType, true);
  checkHtmlNesting(html, name, limits);
  return {
    text: htmlToText(html),
    title: htmlTitle(html),
    ...(cut
      ? {
          truncated: true,
          truncation: `converted the first ${maxHtmlChars} characters of the page (${bytes.length} bytes)`,
        }
      : {}),
  };
};

/**
 * The `<title>` of an HTML page, if it has one. Character references are decoded by `entities`
 * as the HTML standard says (a reference out of Unicode's range or to NUL becomes U+FFFD), so no
 * page, however malformed, can make decoding throw.
 */
export function htmlTitle(html: string): string | undefined {
  // Index searches, not a regular expression: a page of many unclosed "<title" would make a
  // backtracking search quadratic.
  const lower = html.toLowerCase();
  const open = lower.indexOf("<title");
  const start = open < 0 ? -1 : lower.indexOf(">", open);
  const end = start < 0 ? -1 : lower.indexOf("</title>", start);
  if (end < 0) return undefined;
  const title = decodeHTML(html.slice(start + 1, end))
    .replace(/\s+/g, " ")
    .trim();
  return title || undefined;
}

/** Elements that never hold others. */
const VOID = new Set(
  "area base br col embed hr img input link meta param source track wbr".split(" "),
);
/** Start tags that close an open `<p>` (the HTML standard's list, abridged to common ones). */
const CLOSES_P = new Set(
  "address article aside blockquote details dialog div dl fieldset figcaption figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr main menu nav ol p pre section table ul li dd dt".split(
    " ",
  ),
);
/** Start tags that close an open element of the same family, up to (not past) a boundary. */
const SIBLINGS: Readonly<Record<string, { closes: string[]; boundary: string[] }>> = {
  li: { closes: ["li"], boundary: ["ul", "ol", "menu"] },
  dd: { closes: ["dd", "dt"], boundary: ["dl"] },
  dt: { closes: ["dd", "dt"], boundary: ["dl"] },
  tr: { closes: ["tr", "td", "th"], boundary: ["table", "tbody", "thead", "tfoot"] },
  td: { closes: ["td", "th"], boundary: ["tr", "table"] },
  th: { closes: ["td", "th"], boundary: ["tr", "table"] },
  option: { closes: ["option"], boundary: ["select", "datalist"] },
};

/**
 * Refuses HTML nested deeper than `maxXmlDepth` elements (INPUT_LIMIT). turndown's DOM parser
 * looks through the open elements at every tag: a page of 100,000 nested `<div>`s would keep it
 * busy for minutes. The depth is measured in one linear pass over htmlparser2's tags, with the
 * HTML standard's common implied end tags (an unclosed `<p>`, `<li>`, `<td>` ... closed by the
 * next one), so sloppy but ordinary pages are not taken for deep ones.
 */
export function checkHtmlNesting(
  html: string,
  where: string,
  limits: Pick<ReaderLimits, "maxXmlDepth">,
): void {
  const stack: string[] = [];
  const popTo = (names: readonly string[], boundary: readonly string[]) => {
    for (let i = stack.length - 1; i >= 0 && !boundary.includes(stack[i]); i--) {
      if (names.includes(stack[i])) {
        stack.length = i;
        return;
      }
    }
  };
  const parser = new Parser(
    {
      onopentagname(raw) {
        const name = raw.toLowerCase();
        if (CLOSES_P.has(name) && stack[stack.length - 1] === "p") stack.pop();
        const sibling = SIBLINGS[name];
        if (sibling) popTo(sibling.closes, sibling.boundary);
        if (VOID.has(name)) return;
        stack.push(name);
        if (stack.length > limits.maxXmlDepth)
          throw limitError(where, "maxXmlDepth", limits.maxXmlDepth, "the HTML's element nesting");
      },
      onclosetag(raw, implied) {
        // htmlparser2's own implied closes differ from the standard's: the stack above decides.
        if (!implied) popTo([raw.toLowerCase()], []);
      },
    },
    { decodeEntities: false, lowerCaseTags: false },
  );
  parser.end(html);
}
