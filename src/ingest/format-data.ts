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

export const readJson: FormatReader = async ({ name, bytes, mediaType }, { limits }) => {
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
