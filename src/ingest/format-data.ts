import { detectEncoding } from "./decode.ts";
import { decodeDocumentText } from "./document-text.ts";
import { unreadable, type FormatReader } from "./format-types.ts";
import { limitError } from "./reader-limits.ts";
import { walkXml } from "./xml-limits.ts";

/**
 * JSON and XML files, as text an agent can read: JSON parsed (V8's parser does not recurse),
 * checked for nesting, and printed with two-space indents; XML checked by saxes (well-formed,
 * nesting, no entity declarations) and kept as written.
 */

/** The deepest nesting of a parsed JSON value, measured without recursion. */
function jsonDepth(value: unknown, stopAt: number): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== "object" || v === null) continue;
    deepest = Math.max(deepest, depth);
    if (deepest > stopAt) return deepest;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/**
 * The nesting of JSON text, counted over its bytes (brackets outside strings) before anything is
 * parsed: deeper than `stopAt` stops the count.
 */
function jsonTextDepth(bytes: Uint8Array, stopAt: number): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (inString) {
      if (b === 0x5c)
        i++; // a backslash escapes the next byte
      else if (b === 0x22) inString = false;
    } else if (b === 0x22) inString = true;
    else if (b === 0x5b || b === 0x7b) {
      if (++depth > deepest && (deepest = depth) > stopAt) return deepest;
    } else if (b === 0x5d || b === 0x7d) depth--;
  }
  return deepest;
}

export const readJson: FormatReader = async ({ name, bytes, mediaType }, { limits }) => {
  // Counted on the bytes first: V8's parser would build a 20-million-deep value before we looked.
  if (jsonTextDepth(bytes, limits.maxXmlDepth) > limits.maxXmlDepth)
    throw limitError(name, "maxXmlDepth", limits.maxXmlDepth, "the JSON's nesting");
  const text = decodeDocumentText(bytes, mediaType).trim();
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw unreadable(`${name} is not valid JSON (${(err as Error).message}).`, err);
  }
  if (jsonDepth(value, limits.maxXmlDepth) > limits.maxXmlDepth)
    throw limitError(name, "maxXmlDepth", limits.maxXmlDepth, "the JSON's nesting");
  return { text: JSON.stringify(value, null, 2) };
};

export const readXml: FormatReader = async ({ name, bytes, mediaType }, { limits }) => {
  let text: string;
  if (/charset=/i.test(mediaType ?? "")) text = decodeDocumentText(bytes, mediaType);
  else {
    try {
      text = new TextDecoder(detectEncoding(bytes.subarray(0, 1024), { xml: true }))
        .decode(bytes)
        .replace(/^\uFEFF/, "")
        .replace(/\r\n?/g, "\n");
    } catch (err) {
      throw unreadable(`${name}: ${(err as Error).message}.`, err);
    }
  }
  walkXml(text, name, limits, {});
  return { text: text.trim() };
};
