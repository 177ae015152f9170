import { WebError } from "./errors.ts";
import { httpRequest, parseWebUrl } from "./http.ts";
import type { WebSettings } from "./settings.ts";

/**
 * Web archive look-up through the Wayback Machine's availability API (CODEHOP_WAYBACK_URL, default
 * https://archive.org/wayback/available): `GET ?url=<page>&timestamp=<YYYYMMDD>` answers
 * `{ archived_snapshots: { closest: { available, url, timestamp, status } } }`, or an empty
 * `archived_snapshots` when the page was never archived. As the GAIA submission's archive tool did,
 * a look-up with a date that finds nothing is tried once more without one. The API's address is the
 * operator's choice (not held to the link policy); the snapshot itself is then read like any page.
 */

/** The snapshot closest to a date. */
export interface ArchiveSnapshot {
  /** The page asked for. */
  original: string;
  /** The snapshot's own URL (to read it). */
  url: string;
  /** The snapshot's time, YYYYMMDDhhmmss. */
  timestamp: string;
  /** The date asked for, normalized (YYYYMMDD or a prefix of it), if any. */
  requested?: string;
}

/**
 * A date the archive API takes (YYYY, YYYYMM, YYYYMMDD ..., digits only) from what a model writes:
 * "2021-03-05", "20210305", "2021", "March 5, 2021". A `bad_url` WebError for anything else.
 */
export function archiveTimestamp(date: string): string {
  const raw = String(date ?? "").trim();
  if (/^\d{4}(?:[-/.]?\d{2}(?:[-/.]?\d{2}(?:[T ]?\d{2}:?\d{2}(?::?\d{2})?)?)?)?Z?$/.test(raw)) {
    const digits = raw.replace(/\D/g, "");
    return digits.slice(0, 14);
  }
  const parsed = Date.parse(raw);
  if (raw && Number.isFinite(parsed)) {
    const d = new Date(parsed);
    const pad = (n: number) => String(n).padStart(2, "0");
    return `${d.getUTCFullYear()}${pad(d.getUTCMonth() + 1)}${pad(d.getUTCDate())}`;
  }
  throw new WebError(
    "bad_url",
    `"${date}" is not a date the archive understands: give it as YYYY-MM-DD (e.g. 2019-05-17) or YYYYMMDD.`,
  );
}

/** "20190517083000" → "2019-05-17 08:30:00" (as much as the timestamp has). */
export function formatTimestamp(timestamp: string): string {
  const t = timestamp.replace(/\D/g, "");
  const date = [t.slice(0, 4), t.slice(4, 6), t.slice(6, 8)].filter(Boolean).join("-");
  const time = [t.slice(8, 10), t.slice(10, 12), t.slice(12, 14)].filter(Boolean).join(":");
  return time ? `${date} ${time}` : date;
}

async function closest(
  settings: WebSettings,
  url: string,
  timestamp: string | undefined,
  signal?: AbortSignal,
): Promise<{ url: string; timestamp: string } | undefined> {
  const api = new URL(settings.archiveUrl);
  api.searchParams.set("url", url);
  if (timestamp) api.searchParams.set("timestamp", timestamp);
  const policy = {
    timeoutMs: settings.timeoutMs,
    maxBytes: 1024 * 1024,
    maxRedirects: settings.maxRedirects,
    userAgent: "codehop (web archive)",
  };
  let json: any;
  try {
    const res = await httpRequest(
      api.href,
      { headers: { accept: "application/json" } },
      policy,
      signal,
    );
    if (res.status < 200 || res.status >= 300)
      throw new Error(`HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ""}`);
    json = JSON.parse(Buffer.from(res.bytes).toString("utf8"));
  } catch (err) {
    if (signal?.aborted) throw err;
    throw new WebError(
      "provider",
      `The web archive (${settings.archiveUrl}) could not be asked: ${(err as Error).message}. Try again later, or read the live page with visit_page.`,
      { cause: err },
    );
  }
  const found = json?.archived_snapshots?.closest;
  if (!found || found.available === false || typeof found.url !== "string") return undefined;
  return { url: found.url, timestamp: String(found.timestamp ?? "") };
}

/**
 * The archived snapshot of `url` closest to `date` (any date when none is given, or when none is
 * found near it). A `bad_url` WebError for a bad URL or date, `http_status` (404) when the archive
 * has no snapshot at all, `provider` when the archive cannot be asked.
 */
export async function findSnapshot(
  url: string,
  date: string | undefined,
  settings: WebSettings,
  signal?: AbortSignal,
): Promise<ArchiveSnapshot> {
  const original = parseWebUrl(url).href;
  const requested = date && String(date).trim() ? archiveTimestamp(date) : undefined;
  const hit =
    (await closest(settings, original, requested, signal)) ??
    (requested ? await closest(settings, original, undefined, signal) : undefined);
  if (!hit) {
    throw new WebError(
      "http_status",
      `The web archive has no snapshot of ${original}. Check the address, or try the live page.`,
      { status: 404 },
    );
  }
  return { original, url: hit.url, timestamp: hit.timestamp, ...(requested ? { requested } : {}) };
}
