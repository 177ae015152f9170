import { posix } from "node:path";
import { unreadable, type FormatReader } from "./format-types.ts";
import { walkXml } from "./xml-limits.ts";
import { BoundedZip } from "./zip-archive.ts";

/**
 * PPTX slides and ODT documents, read straight from their XML parts with saxes (through
 * {@link walkXml}, so the XML depth and entity limits apply in the one pass that reads them) from
 * codehop's bounded ZIP reader: the archive limits apply to every part read.
 */

/** Relationship targets of an OOXML part's .rels, by id (and the type of each). */
function relationships(
  xml: string,
  where: string,
  base: string,
  limits: { maxXmlDepth: number },
): Map<string, { target: string; type: string }> {
  const out = new Map<string, { target: string; type: string }>();
  walkXml(xml, where, limits, {
    open(name, a) {
      if (name !== "Relationship" || !a.Id || !a.Target || a.TargetMode === "External") return;
      const target = a.Target.startsWith("/")
        ? a.Target.slice(1)
        : posix.normalize(posix.join(base, a.Target));
      out.set(a.Id, { target, type: a.Type ?? "" });
    },
  });
  return out;
}

/** The .rels part of an OOXML part ("ppt/slides/slide1.xml" → "ppt/slides/_rels/slide1.xml.rels"). */
function relsOf(part: string): string {
  return posix.join(posix.dirname(part), "_rels", `${posix.basename(part)}.rels`);
}

/** Placeholders whose text is furniture, not content (slide numbers, dates, footers, images). */
const FURNITURE = new Set(["sldNum", "dt", "ftr", "hdr", "sldImg"]);

/** The text of a slide or notes part: paragraphs as lines, and the title placeholder's text. */
function slideText(
  xml: string,
  where: string,
  limits: { maxXmlDepth: number },
): { title: string; lines: string[] } {
  const lines: string[] = [];
  let title = "";
  let paragraph = "";
  let shapeKind = "";
  let inText = false;
  walkXml(xml, where, limits, {
    open(name, a) {
      if (name === "sp") shapeKind = "";
      else if (name === "ph") shapeKind = a.type ?? "body";
      else if (name === "p") paragraph = "";
      else if (name === "t") inText = true;
      else if (name === "br") paragraph += "\n";
      else if (name === "tab") paragraph += "\t";
    },
    close(name) {
      if (name === "t") inText = false;
      else if (name === "p") {
        const text = paragraph.trim();
        if (!text || FURNITURE.has(shapeKind)) return;
        if ((shapeKind === "title" || shapeKind === "ctrTitle") && !title) title = text;
        else lines.push(text);
      }
    },
    text(t) {
      if (inText) paragraph += t;
    },
  });
  // Slides made without a title placeholder: their first line stands for the title.
  if (!title && lines.length > 1) title = lines.shift()!;
  return { title: title.replace(/\s+/g, " "), lines };
}

/** A notes part's text (its title, if any, is text like the rest). */
function notesText(xml: string, where: string, limits: { maxXmlDepth: number }): string[] {
  const { title, lines } = slideText(xml, where, limits);
  return title ? [title, ...lines] : lines;
}

/**
 * PPTX: one `## Slide N: <title>` section per slide, in the presentation's order, with its text
 * and its speaker notes (`Notes: ...`). Slides past the reading time are left out and said so.
 */
export const readPptx: FormatReader = async ({ name, bytes }, { limits, overTime }) => {
  const zip = await BoundedZip.open(bytes, name, limits, "PPTX presentation");
  try {
    const main = "ppt/presentation.xml";
    if (!zip.has(main))
      throw unreadable(`${name} is a ZIP archive but not a PowerPoint presentation (no ${main}).`);
    const rels = zip.has(relsOf(main))
      ? relationships(await zip.text(relsOf(main)), `${name} (${relsOf(main)})`, "ppt", limits)
      : new Map();
    const order: string[] = [];
    walkXml(await zip.text(main), `${name} (${main})`, limits, {
      open(el, a) {
        const id = a["r:id"];
        if (el === "sldId" && id && rels.get(id)) order.push(rels.get(id)!.target);
      },
    });
    const parts: string[] = [];
    let read = 0;
    for (const [i, slide] of order.entries()) {
      if (i > 0 && overTime()) break;
      if (!zip.has(slide)) continue;
      const where = `${name} (${slide})`;
      const { title, lines } = slideText(await zip.text(slide), where, limits);
      let notes: string[] = [];
      if (zip.has(relsOf(slide))) {
        const slideRels = relationships(
          await zip.text(relsOf(slide)),
          `${name} (${relsOf(slide)})`,
          posix.dirname(slide),
          limits,
        );
        const note = [...slideRels.values()].find((r) => r.type.endsWith("/notesSlide"));
        if (note && zip.has(note.target))
          notes = notesText(await zip.text(note.target), `${name} (${note.target})`, limits);
      }
      read = i + 1;
      const body = [...lines, ...(notes.length ? [`Notes: ${notes.join("\n")}`] : [])];
      parts.push(`## Slide ${i + 1}${title ? `: ${title}` : ""}\n${body.join("\n")}`.trim());
    }
    return {
      text: parts.join("\n\n"),
      slides: order.length,
      ...(read < order.length
        ? {
            truncated: true,
            truncation: `read ${read} of ${order.length} slides within the ${limits.timeoutMs / 1000} s reading time limit (CODEHOP_READER_TIMEOUT_MS raises it)`,
          }
        : {}),
    };
  } finally {
    zip.close();
  }
};

/**
 * ODT (OpenDocument text): headings (`text:h`, by outline level) as `#` lines, paragraphs, list
 * items as `- ` lines, table rows as cells joined by ` | `; `text:s`, `text:tab` and
 * `text:line-break` as the spaces and breaks they stand for.
 */
export const readOdt: FormatReader = async ({ name, bytes }, { limits }) => {
  const zip = await BoundedZip.open(bytes, name, limits, "ODT document");
  try {
    if (!zip.has("content.xml"))
      throw unreadable(`${name} is a ZIP archive but not an OpenDocument text (no content.xml).`);
    const blocks: string[] = [];
    let current: string | undefined;
    let prefix = "";
    let listDepth = 0;
    let row: string[] | undefined;
    let cell: string[] | undefined;
    let skip = 0;
    const flush = () => {
      if (current === undefined) return;
      const text = current.replace(/[ \t]+\n/g, "\n").trim();
      if (text) {
        if (cell) cell.push(text);
        else blocks.push(prefix + text);
      }
      current = undefined;
      prefix = "";
    };
    walkXml(await zip.text("content.xml"), `${name} (content.xml)`, limits, {
      open(el, a) {
        if (skip) {
          skip++;
          return;
        }
        if (el === "note-citation" || el === "tracked-changes" || el === "annotation") skip = 1;
        else if (el === "h") {
          flush();
          current = "";
          prefix = `${"#".repeat(Math.min(6, Math.max(1, Number(a["text:outline-level"]) || 1)))} `;
        } else if (el === "p") {
          flush();
          current = "";
          prefix = listDepth ? `${"  ".repeat(listDepth - 1)}- ` : "";
        } else if (el === "list") listDepth++;
        else if (el === "table-row") row = [];
        else if (el === "table-cell") cell = [];
        else if (el === "s") current = (current ?? "") + " ".repeat(Number(a["text:c"]) || 1);
        else if (el === "tab") current = (current ?? "") + "\t";
        else if (el === "line-break") current = (current ?? "") + "\n";
      },
      close(el) {
        if (skip) {
          skip--;
          return;
        }
        if (el === "h" || el === "p") flush();
        else if (el === "list") listDepth--;
        else if (el === "table-cell") {
          row?.push((cell ?? []).join(" "));
          cell = undefined;
        } else if (el === "table-row") {
          if (row?.some((c) => c)) blocks.push(row.join(" | "));
          row = undefined;
        }
      },
      text(t) {
        if (!skip && current !== undefined) current += t;
      },
    });
    return { text: blocks.join("\n\n") };
  } finally {
    zip.close();
  }
};
