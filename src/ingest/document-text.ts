import { sniffUtf16 } from "./decode.ts";

/**
 * Text helpers the document readers share: the encoding of a text document, its decoding, the
 * binary-content check, and keeping lines that merely look like headings from starting sections.
 */

/**
 * The character encoding of a text document: a byte-order mark, else the `charset` its server
 * declared (Content-Type), else, for HTML, a `<meta charset>` or `<meta http-equiv="Content-Type">`
 * in its first 4 KB — the order the HTML standard's encoding sniffing uses — else UTF-8. Labels
 * the platform's TextDecoder does not know fall back to UTF-8.
 */
export function textEncodingOf(bytes: Uint8Array, mediaType?: string, html = false): string {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return "utf-8";
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return "utf-16le";
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return "utf-16be";
  // Text saved as "Unicode" on Windows often has no byte order mark: its zero bytes tell.
  const utf16 = sniffUtf16(bytes.subarray(0, 256));
  if (utf16) return utf16;
  const declared = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(mediaType ?? "")?.[1];
  const head = html ? Buffer.from(bytes.subarray(0, 4096)).toString("latin1") : "";
  const meta = html
    ? /<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)/i.exec(head)?.[1]
    : undefined;
  for (const label of [declared, meta]) {
    if (!label) continue;
    try {
      return new TextDecoder(label).encoding;
    } catch {
      // An unknown label: the next source decides.
    }
  }
  return "utf-8";
}

/** Text in its encoding ({@link textEncodingOf}), without a byte-order mark, with \n line ends. */
export function decodeDocumentText(bytes: Uint8Array, mediaType?: string, html = false): string {
  let text = new TextDecoder(textEncodingOf(bytes, mediaType, html)).decode(bytes);
  // Each replace copies the text: only when there is something to replace (a 50 MB file).
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  return text.includes("\r") ? text.replace(/\r\n?/g, "\n") : text;
}

/**
 * The beginning of a text document, at most `maxChars` characters, decoded from only the bytes
 * they can take (4 per character at most), so a 50 MB file is never decoded whole to keep 2 MB of
 * it; `cut` when some was left out.
 */
export function decodeDocumentStart(
  bytes: Uint8Array,
  maxChars: number,
  mediaType?: string,
  html = false,
): { text: string; cut: boolean; total: number } {
  const limit = maxChars * 4 + 4;
  const head = bytes.length > limit ? bytes.subarray(0, limit) : bytes;
  const text = decodeDocumentText(head, mediaType, html);
  const cut = head !== bytes || text.length > maxChars;
  return {
    text: text.length > maxChars ? text.slice(0, maxChars) : text,
    cut,
    total: bytes.length,
  };
}

/**
 * True for content that is not text: NUL bytes, or many bytes that are neither printable ASCII,
 * whitespace nor part of UTF-8 sequences (for text in UTF-8, the default `encoding`), in its
 * first 8 KB.
 */
export function looksBinary(bytes: Uint8Array, encoding = "utf-8"): boolean {
  const head = bytes.subarray(0, 8192);
  if (head.length === 0) return false;
  if (encoding.startsWith("utf-16")) {
    // Zero bytes are half of UTF-16's ASCII: judge the characters instead.
    const chars = new TextDecoder(encoding).decode(head.subarray(0, head.length & ~1));
    let control = 0;
    for (const ch of chars) {
      const c = ch.charCodeAt(0);
      if (c === 0) return true;
      if (c < 0x09 || (c > 0x0d && c < 0x20) || c === 0x7f || c === 0xfffd) control++;
    }
    return control / Math.max(1, chars.length) > 0.1;
  }
  let odd = 0;
  for (const b of head) {
    if (b === 0) return true;
    if (b < 0x09 || (b > 0x0d && b < 0x20) || b === 0x7f) odd++;
  }
  if (odd / head.length > 0.1) return true;
  // Text declared in another encoding (windows-1251 ...) is not UTF-8, and need not be.
  if (encoding !== "utf-8") return false;
  // Invalid UTF-8 in more than a few places: an image, an archive, a legacy binary format.
  const decoded = new TextDecoder("utf-8", { fatal: false }).decode(head);
  const replaced = decoded.split("\uFFFD").length - 1;
  return replaced > 8 && replaced / decoded.length > 0.05;
}

/**
 * Text that has no headings of its own: a line that merely looks like one ("# 1", "== x ==",
 * "=====") is indented by one space so the corpus chunker does not start a section at it.
 */
export function neutralizeHeadings(text: string): string {
  return text.replace(/^(?=#{1,6}[ \t]|={2,}.*={2,}[ \t]*$)/gm, " ");
}
