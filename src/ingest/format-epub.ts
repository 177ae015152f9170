import { posix } from "node:path";
import { checkHtmlNesting } from "./format-html.ts";
import { unreadable, type FormatReader } from "./format-types.ts";
import { htmlToText } from "./html-to-text.ts";
import { walkXml } from "./xml-limits.ts";
import { BoundedZip } from "./zip-archive.ts";

/**
 * EPUB e-books: the package document (META-INF/container.xml → the OPF) gives the title and the
 * reading order (its spine); each chapter's XHTML is checked for nesting and turned into text with
 * its headings (turndown), under a `## Chapter N` heading when it does not open with one of its
 * own. Chapters past the reading time or the HTML budget are left out and said so.
 */
export const readEpub: FormatReader = async (
  { name, bytes },
  { limits, overTime, maxHtmlChars },
) => {
  const zip = await BoundedZip.open(bytes, name, limits, "EPUB book");
  try {
    const container = "META-INF/container.xml";
    if (!zip.has(container))
      throw unreadable(`${name} is a ZIP archive but not an EPUB book (no ${container}).`);
    let opf = "";
    walkXml(await zip.text(container), `${name} (${container})`, limits, {
      open(el, a) {
        if (el === "rootfile" && !opf && a["full-path"]) opf = a["full-path"];
      },
    });
    if (!opf || !zip.has(opf))
      throw unreadable(`${name} is a damaged EPUB book (its package document is missing).`);
    const base = posix.dirname(opf);
    const manifest = new Map<string, { href: string; type: string }>();
    const spine: string[] = [];
    let title = "";
    let inTitle = false;
    walkXml(await zip.text(opf), `${name} (${opf})`, limits, {
      open(el, a) {
        if (el === "item" && a.id && a.href) {
          let href = a.href.split("#")[0];
          try {
            href = decodeURIComponent(href);
          } catch {
            // A malformed escape: the name as written.
          }
          manifest.set(a.id, {
            href: posix.normalize(posix.join(base, href)),
            type: a["media-type"] ?? "",
          });
        } else if (el === "itemref" && a.idref && a.linear !== "no") spine.push(a.idref);
        else if (el === "title" && !title) inTitle = true;
      },
      close(el) {
        if (el === "title") inTitle = false;
      },
      text(t) {
        if (inTitle) title += t;
      },
    });
    const chapters = spine
      .map((id) => manifest.get(id))
      .filter((m): m is { href: string; type: string } => !!m && /html/i.test(m.type));
    const parts: string[] = [];
    let read = 0;
    let htmlChars = 0;
    let why = "";
    for (const [i, chapter] of chapters.entries()) {
      if (i > 0 && overTime()) {
        why = `within the ${limits.timeoutMs / 1000} s reading time limit (CODEHOP_READER_TIMEOUT_MS raises it)`;
        break;
      }
      if (!zip.has(chapter.href)) continue;
      const html = await zip.text(chapter.href);
      if (i > 0 && htmlChars + html.length > maxHtmlChars) {
        why = `within the ${maxHtmlChars} characters of HTML converted per document`;
        break;
      }
      htmlChars += html.length;
      checkHtmlNesting(html, `${name} (${chapter.href})`, limits);
      const text = htmlToText(html);
      read = i + 1;
      if (!text.trim()) continue;
      parts.push(/^#{1,6} /.test(text) ? text : `## Chapter ${i + 1}\n${text}`);
    }
    return {
      text: parts.join("\n\n"),
      ...(title.trim() ? { title: title.replace(/\s+/g, " ").trim() } : {}),
      chapters: chapters.length,
      ...(why
        ? { truncated: true, truncation: `read ${read} of ${chapters.length} chapters ${why}` }
        : {}),
    };
  } finally {
    zip.close();
  }
};
