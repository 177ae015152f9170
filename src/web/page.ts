import { extractDocument, looksBinary, textEncodingOf } from "../ingest/documents.ts";
import { megabytes } from "../ingest/fetch-url.ts";
import { CodehopError } from "../errors.ts";
import { WebError } from "./errors.ts";
import { htmlToMarkdownOffThread } from "./html-markdown.ts";
import type { HttpResponse } from "./http.ts";

/**
 * What a browser shows of a URL: the page as Markdown. HTML goes through the readable-content
 * converter (html-markdown.ts); plain text, Markdown, CSV and XML are shown as they are; JSON
 * pretty-printed; PDF and DOCX through codehop's document readers (src/ingest). Anything else —
 * images, audio, video, archives, executables — is not a page: a `binary` WebError naming its type,
 * so the caller can download it and inspect it with a file tool instead.
 */

/** A page as a browser shows it. */
export interface WebPage {
  /** The URL asked for. */
  url: string;
  /** The URL the content came from (after redirects; a snapshot's address for archived pages). */
  finalUrl: string;
  /** The page's title ("" when it has none). */
  title: string;
  /** Its content as Markdown. */
  markdown: string;
  /** The declared (or sniffed) media type. */
  mediaType?: string;
  /** Which browser read it. */
  browser: "text" | "chromium";
  /** HTML only: Readability's main content (true) or the whole body (false). */
  readable?: boolean;
  /** The size of what was downloaded, in bytes. */
  bytes: number;
  /**
   * HTML only: the page seems to need JavaScript to show its content (scripts and almost no text,
   * or a "please enable JavaScript" notice) — the auto browser then asks the real one.
   */
  needsJavaScript?: boolean;
}

const HTML_TYPES = new Set(["text/html", "application/xhtml+xml"]);
const DOCUMENT_TYPES = new Set([
  "application/pdf",
  "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
]);
const JSON_TYPE = /^application\/(.+\+)?json$/;
const TEXT_LIKE = /^(text\/|application\/(xml|.+\+xml|javascript|x-yaml|yaml|csv|x-csv)$)/;

/** True for HTML by its declared type, or by its first characters when the type says nothing. */
export function isHtml(mediaType: string | undefined, bytes: Uint8Array): boolean {
  if (mediaType && HTML_TYPES.has(mediaType)) return true;
  if (mediaType && mediaType !== "text/plain" && mediaType !== "application/octet-stream")
    return false;
  const head = Buffer.from(bytes.subarray(0, 512)).toString("latin1").trimStart().toLowerCase();
  return head.startsWith("<!doctype html") || head.startsWith("<html");
}

function decode(
  bytes: Uint8Array,
  mediaType: string | undefined,
  headers: Record<string, string>,
  html: boolean,
) {
  return new TextDecoder(textEncodingOf(bytes, headers["content-type"] ?? mediaType, html))
    .decode(bytes)
    .replace(/^\uFEFF/, "")
    .replace(/\r\n?/g, "\n");
}

function noText(url: string, why: string): WebError {
  return new WebError("no_text", `${url} ${why}`);
}

/**
 * The page in an HTTP answer (a 2xx one). `browser` says who fetched it. WebErrors: `binary` for
 * content that is not a page, `no_text` for a page without readable text; a document the readers
 * cannot read (an encrypted PDF ...) is `no_text` with their reason.
 */
export async function pageFromResponse(
  res: HttpResponse,
  options: { browser: "text" | "chromium"; signal?: AbortSignal },
): Promise<WebPage> {
  const { bytes, mediaType, headers } = res;
  const base = {
    url: res.url,
    finalUrl: res.finalUrl,
    mediaType,
    browser: options.browser,
    bytes: bytes.byteLength,
  };
  if (isHtml(mediaType, bytes)) {
    const html = decode(bytes, mediaType, headers, true);
    const page = await htmlToMarkdownOffThread(html, res.finalUrl, options.signal);
    if (!page.markdown.trim())
      throw noText(res.url, "has no readable text (an empty page, or one its scripts fill in).");
    const scripted = /<script\b/i.test(html);
    const needsJavaScript =
      scripted &&
      (page.markdown.length < 400 ||
        /(enable|requires?|turn on) javascript|javascript (is )?(disabled|required)/i.test(html));
    return {
      ...base,
      title: page.title,
      markdown: page.markdown,
      readable: page.readable,
      ...(needsJavaScript ? { needsJavaScript } : {}),
    };
  }
  const isDocument =
    (mediaType && DOCUMENT_TYPES.has(mediaType)) ||
    Buffer.from(bytes.subarray(0, 5)).toString("latin1") === "%PDF-";
  if (isDocument) {
    try {
      const doc = await extractDocument({ name: res.name, mediaType }, bytes, {
        signal: options.signal,
      });
      return { ...base, title: doc.title ?? res.name, markdown: doc.text };
    } catch (err) {
      if (options.signal?.aborted) throw err;
      if (CodehopError.isInstance(err)) throw noText(res.url, `could not be read: ${err.message}`);
      throw err;
    }
  }
  if (mediaType && JSON_TYPE.test(mediaType)) {
    const text = decode(bytes, mediaType, headers, false);
    let shown = text;
    try {
      shown = "```json\n" + JSON.stringify(JSON.parse(text), null, 2) + "\n```";
    } catch {
      // Not valid JSON after all: shown as it is.
    }
    if (!text.trim()) throw noText(res.url, "is empty.");
    return { ...base, title: res.name, markdown: shown };
  }
  const binaryType =
    mediaType &&
    (/^(image|audio|video|font)\//.test(mediaType) ||
      /^application\/(zip|gzip|x-tar|x-7z-compressed|octet-stream|x-rar|vnd\.|msword|x-msdownload)/.test(
        mediaType,
      ));
  if (binaryType || (!(mediaType && TEXT_LIKE.test(mediaType)) && looksBinary(bytes))) {
    throw new WebError(
      "binary",
      `${res.url} is not a web page but a file (${mediaType ?? "binary content"}, ${megabytes(bytes.byteLength)}).`,
      { mediaType: mediaType ?? "application/octet-stream" },
    );
  }
  const text = decode(bytes, mediaType, headers, false).trim();
  if (!text) throw noText(res.url, "is empty.");
  return { ...base, title: res.name, markdown: text };
}
