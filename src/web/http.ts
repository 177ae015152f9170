import type { Response } from "undici";
import {
  dispatcherFor,
  loadUndici,
  fileNameOf,
  literalAddress,
  megabytes,
  networkReason,
  refusedCause,
} from "../ingest/fetch-url.ts";
import { WebError } from "./errors.ts";

/**
 * HTTP for the web tools: every request has a deadline for the whole exchange, a size cap enforced
 * while reading (not trusted from Content-Length), redirects followed one by one up to a maximum,
 * and — when the policy has `allowAddress` — connections only to allowed addresses, checked on the
 * addresses DNS returned at connection time (a name that resolves elsewhere the second time gains
 * nothing) and on IP literals before connecting, for the first request and every redirect. That is
 * the chat's link policy (src/ingest/fetch-url.ts, which downloads attachments); this module also
 * sends POST bodies and hands back non-2xx answers and their headers, which the search providers
 * and the real browser's request routing need.
 */

/** Limits and the address policy of a request. */
export interface HttpPolicy {
  /** Deadline for connecting, the headers and the whole body (ms). */
  timeoutMs: number;
  /** Largest body read (bytes). */
  maxBytes: number;
  /** Redirects followed. */
  maxRedirects: number;
  /**
   * Addresses connections may go to (default: any). One refused address of a host name refuses
   * the host.
   */
  allowAddress?: (address: string) => boolean;
  /** Said after the refusal message (how an operator allows it). */
  refusedHint?: string;
  /** User-Agent header (default: a desktop browser's, which many sites require). */
  userAgent?: string;
}

/** A browser-like User-Agent: many sites answer 403 or an empty page to unknown clients. */
export const BROWSER_USER_AGENT =
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36 codehop";

/** What a request returned (any status). */
export interface HttpResponse {
  /** The URL asked for. */
  url: string;
  /** The URL the answer came from, after redirects. */
  finalUrl: string;
  status: number;
  statusText: string;
  /** Response headers, lower-case names (Set-Cookie in {@link setCookies}). */
  headers: Record<string, string>;
  /** Every Set-Cookie header, in order. */
  setCookies: string[];
  /** The Content-Type without parameters, lower case, if declared. */
  mediaType?: string;
  bytes: Uint8Array;
  /** A file name: Content-Disposition's, else the last path segment, else the host. */
  name: string;
}

/** What to send. */
export interface HttpRequestInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** "manual": a redirect is answered as it is (the real browser follows it, through us again). */
  redirect?: "follow" | "manual";
}

/** Parses an http(s) URL; a `bad_url` WebError for anything else. */
export function parseWebUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(String(raw).trim());
  } catch {
    throw new WebError("bad_url", `"${raw}" is not a valid URL (expected http:// or https://).`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new WebError("bad_url", `${raw}: only http:// and https:// URLs can be opened.`);
  return url;
}

/**
 * Sends a request within `policy` and reads the whole answer, whatever its status. A `WebError`
 * for a bad URL (`bad_url`), a refused address (`refused`), the deadline (`timeout`), a body over
 * the cap (`too_large`), a redirect loop (`bad_url`) or a network failure (`unreachable`);
 * `signal` (the run's) aborting rethrows its reason, so a stopped run is not reported as a bad page.
 */
export async function httpRequest(
  raw: string,
  init: HttpRequestInit,
  policy: HttpPolicy,
  signal?: AbortSignal,
): Promise<HttpResponse> {
  let url = parseWebUrl(raw);
  const deadline = AbortSignal.timeout(policy.timeoutMs);
  const abort = signal ? AbortSignal.any([signal, deadline]) : deadline;
  const dispatcher = await dispatcherFor(policy.allowAddress);
  const { fetch } = await loadUndici();
  let method = (init.method ?? "GET").toUpperCase();
  let body = init.body;
  const refused = (host: string, address: string, err?: unknown): never => {
    throw new WebError(
      "refused",
      `${raw} leads to ${host} (${address}), a private, loopback or link-local address, which is not fetched here${policy.refusedHint ? ` (${policy.refusedHint})` : ""}.`,
      { cause: err },
    );
  };
  const failed = (err: unknown): never => {
    if (signal?.aborted) throw signal.reason;
    if (err instanceof WebError) throw err;
    const refusal = refusedCause(err);
    if (refusal) refused(refusal.host, refusal.address, err);
    if (deadline.aborted)
      throw new WebError("timeout", `${raw} did not answer within ${policy.timeoutMs / 1000} s.`, {
        cause: err,
      });
    throw new WebError("unreachable", `${raw} could not be reached: ${networkReason(err)}.`, {
      cause: err,
    });
  };
  let response: Response | undefined;
  for (let hop = 0; ; hop++) {
    const literal = literalAddress(url);
    if (literal && policy.allowAddress && !policy.allowAddress(literal))
      refused(url.hostname, literal);
    try {
      response = await fetch(url, {
        method,
        redirect: "manual",
        signal: abort,
        headers: {
          "user-agent": policy.userAgent ?? BROWSER_USER_AGENT,
          accept: "text/html,application/xhtml+xml,application/json;q=0.9,*/*;q=0.8",
          ...init.headers,
        },
        ...(body === undefined || method === "GET" || method === "HEAD" ? {} : { body }),
        ...(dispatcher ? { dispatcher } : {}),
      });
    } catch (err) {
      failed(err);
    }
    const status = response!.status;
    const location = response!.headers.get("location");
    if (status >= 300 && status < 400 && location && init.redirect !== "manual") {
      await response!.body?.cancel().catch(() => {});
      if (hop >= policy.maxRedirects)
        throw new WebError(
          "bad_url",
          `${raw} redirects more than ${policy.maxRedirects} times (a redirect loop?).`,
        );
      url = parseWebUrl(new URL(location, url).href);
      // 301/302/303 turn a POST into a GET, as browsers do.
      if (status !== 307 && status !== 308) {
        method = "GET";
        body = undefined;
      }
      continue;
    }
    break;
  }
  const res = response!;
  const declared = Number(res.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > policy.maxBytes) {
    await res.body?.cancel().catch(() => {});
    throw new WebError(
      "too_large",
      `${raw} is ${megabytes(declared)}, over the ${megabytes(policy.maxBytes)} limit.`,
      { mediaType: mediaTypeOf(res.headers.get("content-type")) },
    );
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    if (res.body) {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        size += chunk.byteLength;
        if (size > policy.maxBytes) {
          await res.body.cancel().catch(() => {});
          throw new WebError(
            "too_large",
            `${raw} is larger than the ${megabytes(policy.maxBytes)} limit.`,
            { mediaType: mediaTypeOf(res.headers.get("content-type")) },
          );
        }
        chunks.push(chunk);
      }
    }
  } catch (err) {
    failed(err);
  }
  const bytes = Buffer.concat(chunks, size);
  const headers: Record<string, string> = {};
  res.headers.forEach((value, name) => {
    if (name !== "set-cookie") headers[name] = value;
  });
  return {
    url: raw,
    finalUrl: url.href,
    status: res.status,
    statusText: res.statusText,
    headers,
    setCookies: res.headers.getSetCookie(),
    mediaType: mediaTypeOf(res.headers.get("content-type")),
    bytes: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength),
    name: fileNameOf(headers["content-disposition"] ?? null, url),
  };
}

/** "text/html; charset=utf-8" → "text/html". */
export function mediaTypeOf(contentType: string | null | undefined): string | undefined {
  const type = contentType?.split(";")[0].trim().toLowerCase();
  return type || undefined;
}

/**
 * GET `raw` within `policy`: like {@link httpRequest}, and an HTTP error status is an
 * `http_status` WebError ("answered HTTP 404 Not Found").
 */
export async function httpGet(
  raw: string,
  policy: HttpPolicy,
  signal?: AbortSignal,
  headers?: Record<string, string>,
): Promise<HttpResponse> {
  const res = await httpRequest(raw, { method: "GET", headers }, policy, signal);
  if (res.status < 200 || res.status >= 300) {
    throw new WebError(
      "http_status",
      `${raw} answered HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ""}${res.status === 404 ? ": the page does not exist" : ""}.`,
      { status: res.status },
    );
  }
  return res;
}
