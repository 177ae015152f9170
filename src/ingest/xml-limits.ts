import { SaxesParser } from "saxes";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { InputLimitError, limitError, type ReaderLimits } from "./reader-limits.ts";

/**
 * XML parsed by saxes within limits: element nesting up to `maxXmlDepth`, and no entity
 * declarations at all (saxes never expands them, but a document that declares entities is an
 * expansion bomb aimed at whatever parses it next — mammoth's XML DOM, for one — and office
 * formats never declare any). Checked during the one pass that reads the document.
 */

/** What {@link walkXml} calls for the document's events. */
export interface XmlHandlers {
  /** An element opens: its local name (prefix dropped: "w:p" → "p") and attributes by qualified name. */
  open?(name: string, attributes: Record<string, string>): void;
  /** An element closes. */
  close?(name: string): void;
  /** Character data (entity and character references decoded), CDATA included. */
  text?(text: string): void;
}

/** The local part of a qualified name ("w:p" → "p"). */
export function localName(qname: string): string {
  return qname.slice(qname.indexOf(":") + 1);
}

/**
 * Parses `xml` (named `where` in messages), calling `handlers`. INPUT_INVALID when it is not
 * well-formed; INPUT_LIMIT when it nests deeper than `limits.maxXmlDepth` or declares entities.
 */
export function walkXml(
  xml: string,
  where: string,
  limits: Pick<ReaderLimits, "maxXmlDepth">,
  handlers: XmlHandlers,
): void {
  const parser = new SaxesParser({ position: true });
  let depth = 0;
  parser.on("doctype", (doctype) => {
    if (/<!ENTITY/i.test(doctype)) {
      throw new InputLimitError(
        where,
        "xmlEntities",
        0,
        "the XML declares entities (an entity expansion bomb?), which documents are not allowed to do",
      );
    }
  });
  parser.on("opentag", (tag) => {
    depth++;
    if (depth > limits.maxXmlDepth)
      throw limitError(where, "maxXmlDepth", limits.maxXmlDepth, "the XML's element nesting");
    handlers.open?.(localName(tag.name), tag.attributes as Record<string, string>);
    // A self-closing tag gets its closetag event right after.
  });
  parser.on("closetag", (tag) => {
    depth--;
    handlers.close?.(localName(tag.name));
  });
  if (handlers.text) {
    parser.on("text", handlers.text);
    parser.on("cdata", handlers.text);
  }
  parser.on("error", (err) => {
    throw new CodehopError(
      ErrorCodes.INPUT_INVALID,
      `${where} is not well-formed XML (${err.message.split("\n")[0]}).`,
    );
  });
  parser.write(xml).close();
}
