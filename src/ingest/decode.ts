import { TextDecoder } from "node:util";
/**
 * Text decoding for ingest inputs: the encoding is detected from the first bytes (a byte order
 * mark, the zero bytes of UTF-16 without one, or an XML declaration's `encoding`), then decoded
 * with the platform's TextDecoder. Wikimedia dumps are UTF-8, but files re-saved on Windows are
 * often UTF-16 ("Unicode" in Notepad, PowerShell's `>`): read as UTF-8 they would yield nothing.
 */

/** An input in an encoding codehop cannot decode (e.g. UTF-32, or an unknown declared charset). */
export class UnsupportedEncodingError extends Error {
  override readonly name = "UnsupportedEncodingError";
}

/** Bytes looked at before choosing an encoding (enough for an XML declaration). */
const SNIFF_BYTES = 1024;

/**
 * The encoding of a text whose first bytes are `head` (a WHATWG encoding label for TextDecoder).
 * With `xml`, an `<?xml ... encoding="..."?>` declaration is honoured. Throws
 * UnsupportedEncodingError for UTF-32 and for declared encodings TextDecoder does not know.
 */
export function detectEncoding(head: Uint8Array, options: { xml?: boolean } = {}): string {
  const b = head;
  if (b[0] === 0x00 && b[1] === 0x00 && b[2] === 0xfe && b[3] === 0xff) throw utf32();
  if (b[0] === 0xff && b[1] === 0xfe && b[2] === 0x00 && b[3] === 0x00) throw utf32();
  if (b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf) return "utf-8";
  if (b[0] === 0xff && b[1] === 0xfe) return "utf-16le";
  if (b[0] === 0xfe && b[1] === 0xff) return "utf-16be";
  const utf16 = sniffUtf16(b);
  if (utf16) return utf16;
  if (options.xml) {
    const decl = /^<\?xml[^>]*?\bencoding\s*=\s*["']([A-Za-z0-9._:-]+)["']/.exec(
      Buffer.from(b.subarray(0, 200)).toString("latin1"),
    );
    if (decl) {
      const label = decl[1].toLowerCase();
      try {
        new TextDecoder(label);
      } catch {
        throw new UnsupportedEncodingError(
          `the XML declares encoding "${decl[1]}", which cannot be decoded here; convert the file to UTF-8 (e.g. iconv -f ${decl[1]} -t UTF-8)`,
        );
      }
      // A UTF-16 declaration without zero bytes is wrong: the bytes are what they are.
      if (!label.startsWith("utf-16")) return label;
    }
  }
  return "utf-8";
}

/**
 * UTF-16 without a byte order mark, told by its zero bytes: in UTF-16, ASCII characters (markup,
 * digits, spaces) have a zero byte — the second of the pair in little endian, the first in big
 * endian. UTF-8 text has none. Undefined when `head` does not look like UTF-16.
 */
export function sniffUtf16(head: Uint8Array): "utf-16le" | "utf-16be" | undefined {
  const b = head;
  const pairs = Math.min(b.length >> 1, 128);
  let zeroFirst = 0;
  let zeroSecond = 0;
  for (let i = 0; i < pairs; i++) {
    if (b[2 * i] === 0) zeroFirst++;
    if (b[2 * i + 1] === 0) zeroSecond++;
  }
  if (pairs >= 2 && zeroSecond >= pairs / 4 && zeroFirst <= zeroSecond / 8) return "utf-16le";
  if (pairs >= 2 && zeroFirst >= pairs / 4 && zeroSecond <= zeroFirst / 8) return "utf-16be";
  return undefined;
}

function utf32(): UnsupportedEncodingError {
  return new UnsupportedEncodingError(
    "the file is UTF-32 encoded, which cannot be decoded here; convert it to UTF-8 (e.g. iconv -f UTF-32 -t UTF-8)",
  );
}

/**
 * Decodes a byte stream to text chunks in the encoding detected from its first bytes (see
 * {@link detectEncoding}). Characters split across chunks are kept whole; the byte order mark is
 * dropped; malformed bytes become U+FFFD.
 */
export async function* decodeText(
  stream: AsyncIterable<Buffer | Uint8Array | string>,
  options: { xml?: boolean } = {},
): AsyncGenerator<string> {
  let decoder: TextDecoder | undefined;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  for await (const chunk of stream) {
    if (typeof chunk === "string") {
      yield chunk;
      continue;
    }
    if (!decoder) {
      pending.push(Buffer.from(chunk));
      pendingBytes += chunk.length;
      if (pendingBytes < SNIFF_BYTES) continue;
      const head = Buffer.concat(pending);
      pending = [];
      decoder = new TextDecoder(detectEncoding(head, options));
      yield decoder.decode(head, { stream: true });
      continue;
    }
    yield decoder.decode(chunk, { stream: true });
  }
  if (!decoder) {
    const head = Buffer.concat(pending);
    if (head.length === 0) return;
    decoder = new TextDecoder(detectEncoding(head, options));
    yield decoder.decode(head, { stream: true });
  }
  const rest = decoder.decode();
  if (rest) yield rest;
}

/** Decodes a whole file's bytes (see {@link detectEncoding}). */
export function decodeBuffer(bytes: Uint8Array): string {
  return new TextDecoder(detectEncoding(bytes)).decode(bytes);
}
