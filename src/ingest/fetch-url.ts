import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import type { LookupFunction } from "node:net";
import ipaddr from "ipaddr.js";
import type { Dispatcher, Response } from "undici";
import { CodehopError, ErrorCodes } from "../errors.ts";

/**
 * Downloads a linked document for ingestion with hard limits: a deadline for the whole download,
 * a size cap enforced while reading (not trusted from Content-Length), and redirects followed one
 * by one up to a maximum, so a URL that never answers, redirects forever or streams gigabytes
 * ends with a clear INPUT_INVALID message instead of hanging or filling memory.
 *
 * A server fetching links its clients send must not become their way into its own network
 * (server-side request forgery): with `allowAddress` (e.g. {@link isPublicAddress}), every
 * connection — the first and each redirect's — goes only to addresses it allows, checked on the
 * addresses DNS returned, at connection time (so a name that resolves elsewhere the second time
 * gains nothing), and on IP literals before connecting. Downloads use undici (Node's own fetch
 * implementation, as a package) because its Agent lets the connection's DNS lookup be replaced.
 */

/** Limits of {@link fetchDocument}. */
export interface FetchLimits {
  /** Deadline for connecting, the headers and the whole body (default 15 s). */
  timeoutMs?: number;
  /** Largest body accepted (default 20 MB). */
  maxBytes?: number;
  /** Redirects followed (default 5). */
  maxRedirects?: number;
  /**
   * Addresses connections may go to (default: any). Checked for every address a host name
   * resolves to (one refused address refuses the host) and for IP literals, on every redirect.
   */
  allowAddress?: (address: string) => boolean;
  /** Said after the message when an address is refused (e.g. how an operator allows it). */
  refusedHint?: string;
}

/** Default limits. */
export const FETCH_DEFAULTS = {
  timeoutMs: 15_000,
  maxBytes: 20 * 1024 * 1024,
  maxRedirects: 5,
} as const;

/** A downloaded document. */
export interface FetchedDocument {
  /** The URL asked for. */
  url: string;
  /** The URL the content came from, after redirects. */
  finalUrl: string;
  bytes: Uint8Array;
  /** The Content-Type the server declared, if any. */
  mediaType?: string;
  /** A file name: Content-Disposition's, else the last path segment, else the host. */
  name: string;
}

function invalid(message: string, cause?: unknown): CodehopError {
  return new CodehopError(ErrorCodes.INPUT_INVALID, message, cause ? { cause } : undefined);
}

/** Size in MB for messages ("20 MB", "0.5 MB"). */
export function megabytes(bytes: number): string {
  const mb = bytes / (1024 * 1024);
  return `${mb >= 10 ? Math.round(mb) : Number(mb.toFixed(1))} MB`;
}

/** Parses an http(s) URL; INPUT_INVALID for anything else. */
export function parseHttpUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw invalid(`"${raw}" is not a valid URL (expected http:// or https://).`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw invalid(`${raw}: only http:// and https:// links can be attached (got ${url.protocol}).`);
  return url;
}

/**
 * True for public unicast addresses; false for private (10/8, 172.16/12, 192.168/16), loopback,
 * link-local (169.254/16 — cloud metadata services — and fe80::/10), unique-local (fc00::/7),
 * carrier-grade NAT, unspecified, multicast, reserved and documentation ranges, NAT64, 6to4 and
 * IPv4-compatible (::/96) addresses, and anything that is not an IP address. An IPv4-mapped IPv6
 * address (::ffff:a.b.c.d) is judged by the IPv4 address it carries (ipaddr.process unwraps it):
 * ::ffff:8.8.8.8 is public, ::ffff:127.0.0.1 is not. The ranges are ipaddr.js's (a well-kept table of the IANA
 * special-purpose registries).
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const ip = ipaddr.process(address);
  // IPv4-compatible addresses (::/96, deprecated by RFC 4291): ipaddr.js unwraps only the dotted
  // form (::127.0.0.1) and calls the hex form (::7f00:1) unicast. Never a public destination.
  if (ip.kind() === "ipv6" && ip.match(IPV4_COMPATIBLE)) return false;
  return ip.range() === "unicast";
}

const IPV4_COMPATIBLE = ipaddr.parseCIDR("::/96");

/** A connection refused by {@link FetchLimits.allowAddress} (also the web tools' policy, src/web/http.ts). */
export class RefusedAddressError extends Error {
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(`${host} resolves to ${address}, an address this fetch may not connect to`);
  }
}

/** A DNS lookup (net.connect's `lookup` option) that fails when any address is not allowed. */
export function guardedLookup(allow: (address: string) => boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return (callback as (e: Error) => void)(err);
      const refused = addresses.find((a) => !allow(a.address));
      if (refused || !addresses.length) {
        return (callback as (e: Error) => void)(
          new RefusedAddressError(hostname, refused?.address ?? "no address"),
        );
      }
      if ((options as { all?: boolean }).all)
        (callback as (e: null, a: LookupAddress[]) => void)(null, addresses);
      else callback(null, addresses[0].address, addresses[0].family);
    });
  };
}

/**
 * undici, loaded at the first request: ~1 MB of modules (~80 ms of CPU) that every process
 * importing a tool or app that can fetch (servers, the chat and assistant apps) would otherwise
 * load at start, whether or not anything is fetched.
 */
export async function loadUndici(): Promise<typeof import("undici")> {
  const mod = await import("undici");
  // Node's loader gives a CommonJS package's exports by name and as `default`; the chunk esbuild
  // makes of it for the bundled CLI only as `default`.
  return (mod as unknown as { default?: typeof mod }).default ?? mod;
}

/** undici Agents whose connections go only to allowed addresses, one per policy. */
const guardedAgents = new WeakMap<(address: string) => boolean, Dispatcher>();

export async function dispatcherFor(
  allow: ((address: string) => boolean) | undefined,
): Promise<Dispatcher | undefined> {
  if (!allow) return undefined;
  let agent = guardedAgents.get(allow);
  if (!agent) {
    const { Agent } = await loadUndici();
    agent = new Agent({ connect: { lookup: guardedLookup(allow) } });
    guardedAgents.set(allow, agent);
  }
  return agent;
}

/** The address of a URL whose host is an IP literal ("[::1]" → "::1"), else undefined. */
export function literalAddress(url: URL): string | undefined {
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  return ipaddr.isValid(host) ? host : undefined;
}

/** The RefusedAddressError behind a failed fetch, if that is why it failed. */
export function refusedCause(err: unknown): RefusedAddressError | undefined {
  for (let e = err; e && typeof e === "object"; e = (e as { cause?: unknown }).cause)
    if (e instanceof RefusedAddressError) return e;
  return undefined;
}

/** Why a network request failed, in words ("could not connect", "host not found" ...). */
export function networkReason(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  switch (cause?.code) {
    case "ECONNREFUSED":
      return "the server refused the connection";
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "the host name could not be resolved";
    case "ECONNRESET":
      return "the connection was reset";
    case "UND_ERR_HEADERS_TIMEOUT":
    case "UND_ERR_BODY_TIMEOUT":
      return "the server stopped answering";
    default:
      return cause?.message ?? (err as Error)?.message ?? String(err);
  }
}

export function fileNameOf(disposition: string | null, url: URL): string {
  const star = disposition && /filename\*\s*=\s*(?:UTF-8'')?([^;]+)/i.exec(disposition);
  if (star) {
    try {
      return decodeURIComponent(star[1].trim().replace(/^"|"$/g, ""));
    } catch {
      // fall through to the plain filename
    }
  }
  const plain = disposition && /filename\s*=\s*"?([^";]+)"?/i.exec(disposition);
  if (plain) return plain[1].trim();
  const segment = url.pathname.split("/").filter(Boolean).pop();
  if (segment) {
    try {
      return decodeURIComponent(segment);
    } catch {
      return segment;
    }
  }
  return url.host;
}

/**
 * Downloads `raw` within `limits`. INPUT_INVALID for a bad URL, an HTTP error status, a timeout, a
 * redirect loop, a body over the size limit or a network failure; `signal` (the run's) aborting
 * rethrows its reason, so a stopped run is not reported as a bad link.
 */
export async function fetchDocument(
  raw: string,
  limits: FetchLimits = {},
  signal?: AbortSignal,
): Promise<FetchedDocument> {
  const timeoutMs = limits.timeoutMs ?? FETCH_DEFAULTS.timeoutMs;
  const maxBytes = limits.maxBytes ?? FETCH_DEFAULTS.maxBytes;
  const maxRedirects = limits.maxRedirects ?? FETCH_DEFAULTS.maxRedirects;
  let url = parseHttpUrl(raw);
  const deadline = AbortSignal.timeout(timeoutMs);
  const abort = signal ? AbortSignal.any([signal, deadline]) : deadline;
  const dispatcher = await dispatcherFor(limits.allowAddress);
  const { fetch } = await loadUndici();
  const refused = (host: string, address: string, err?: unknown): never => {
    throw invalid(
      `${raw} leads to ${host} (${address}), a private, loopback or link-local address, which is not fetched here${limits.refusedHint ? ` (${limits.refusedHint})` : ""}.`,
      err,
    );
  };
  const failed = (err: unknown): never => {
    if (signal?.aborted) throw signal.reason;
    const refusal = refusedCause(err);
    if (refusal) refused(refusal.host, refusal.address, err);
    if (deadline.aborted)
      throw invalid(`${raw} did not answer within ${timeoutMs / 1000} s (timed out).`, err);
    throw invalid(`${raw} could not be fetched: ${networkReason(err)}.`, err);
  };
  let response: Response | undefined;
  for (let hop = 0; ; hop++) {
    // An IP literal is connected to without a DNS lookup: checked here instead.
    const literal = literalAddress(url);
    if (literal && limits.allowAddress && !limits.allowAddress(literal))
      refused(url.hostname, literal);
    try {
      response = await fetch(url, {
        redirect: "manual",
        signal: abort,
        headers: { "user-agent": "codehop (document attachment)", accept: "*/*" },
        ...(dispatcher ? { dispatcher } : {}),
      });
    } catch (err) {
      failed(err);
    }
    const status = response!.status;
    if (status >= 300 && status < 400 && response!.headers.get("location")) {
      await response!.body?.cancel().catch(() => {});
      if (hop >= maxRedirects) {
        throw invalid(
          `${raw} redirects more than ${maxRedirects} times (a redirect loop?); attach the final address instead.`,
        );
      }
      url = parseHttpUrl(new URL(response!.headers.get("location")!, url).href);
      continue;
    }
    break;
  }
  const res = response!;
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    throw invalid(
      `${raw} answered HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ""}; check the link.`,
    );
  }
  const declared = Number(res.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > maxBytes) {
    await res.body?.cancel().catch(() => {});
    throw invalid(`${raw} is ${megabytes(declared)}, over the ${megabytes(maxBytes)} limit.`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    if (res.body) {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        size += chunk.byteLength;
        if (size > maxBytes) {
          await res.body.cancel().catch(() => {});
          throw invalid(`${raw} is larger than the ${megabytes(maxBytes)} limit.`);
        }
        chunks.push(chunk);
      }
    }
  } catch (err) {
    if (CodehopError.isInstance(err)) throw err;
    failed(err);
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.byteLength;
  }
  return {
    url: raw,
    finalUrl: url.href,
    bytes,
    mediaType: res.headers.get("content-type") ?? undefined,
    name: fileNameOf(res.headers.get("content-disposition"), url),
  };
}
