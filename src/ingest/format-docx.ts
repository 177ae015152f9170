import { CodehopError } from "../errors.ts";
import { htmlToText } from "./html-to-text.ts";
import { unreadable, type FormatReader } from "./format-types.ts";
import { walkXml } from "./xml-limits.ts";
import { BoundedZip } from "./zip-archive.ts";

/**
 * DOCX text by mammoth (DOCX → semantic HTML, the document's headings kept) and turndown. mammoth
 * reads the archive through {@link BoundedZip} instead of its own JSZip: every part it asks for is
 * inflated within the archive limits, and every XML part is checked for depth and entity
 * declarations before mammoth's XML DOM sees it. Images are never read (only their alt text is
 * kept).
 */
export const readDocx: FormatReader = async ({ name, bytes }, { limits, maxHtmlChars }) => {
  const zip = await BoundedZip.open(bytes, name, limits, "DOCX file");
  try {
    if (!zip.has("word/document.xml"))
      throw unreadable(`${name} is a ZIP archive but not a Word document (no word/document.xml).`);
    const file = {
      exists: (path: string) => zip.has(path),
      read: async (path: string, encoding?: string) => {
        const data = await zip.read(path);
        if (!encoding) return data;
        const text = data.toString("utf8");
        if (/\.(xml|rels)$/i.test(path)) walkXml(text, `${name} (${path})`, limits, {});
        return text;
      },
    };
    const mammoth = (await import("mammoth")).default;
    let html: string;
    try {
      html = (
        await mammoth.convertToHtml({ file } as unknown as { buffer: Buffer }, {
          convertImage: mammoth.images.imgElement(async () => ({ src: "" })),
          includeEmbeddedStyleMap: false,
        })
      ).value;
    } catch (err) {
      if (CodehopError.isInstance(err)) throw err;
      throw unreadable(`${name} is not a readable Word document: ${(err as Error).message}`, err);
    }
    const cut = html.length > maxHtmlChars;
    return {
      text: htmlToText(cut ? html.slice(0, maxHtmlChars) : html),
      ...(cut
        ? {
            truncated: true,
            truncation: `converted the first ${maxHtmlChars} characters of the document's ${html.length}`,
          }
        : {}),
    };
  } finally {
    zip.close();
  }
};
