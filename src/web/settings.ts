import { z } from "zod";
import { readEnv, type CodehopEnv } from "../config/env.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { isPublicAddress } from "../ingest/fetch-url.ts";
import type { HttpPolicy } from "./http.ts";

/**
 * The web tools' settings with their defaults in this one place: the search provider, the browser
 * and the limits and address policy of every fetch. They come from the environment (read in
 * src/config/env.ts) over the defaults; callers (the assistant app, the research app) may pass
 * overrides.
 */

/** The search providers, by the name CODEHOP_SEARCH_PROVIDER takes. */
export const SEARCH_PROVIDERS = ["searxng", "brave", "tavily", "serper"] as const;
/** A search provider's name. */
export type SearchProviderName = (typeof SEARCH_PROVIDERS)[number];

/** Which browser reads pages: the text browser, the real one, or text with Chromium as fallback. */
export const BROWSER_MODES = ["text", "chromium", "auto"] as const;
/** A browser mode. */
export type BrowserMode = (typeof BROWSER_MODES)[number];

/** The official endpoints of the hosted providers (SearxNG is self-hosted: no default). */
export const SEARCH_ENDPOINTS: Readonly<Record<SearchProviderName, string | undefined>> = {
  searxng: undefined,
  brave: "https://api.search.brave.com/res/v1/web/search",
  tavily: "https://api.tavily.com/search",
  serper: "https://google.serper.dev/search",
};

/** The Wayback Machine's availability API. */
export const WAYBACK_AVAILABLE_URL = "https://archive.org/wayback/available";

export const WebSettingsSchema = z.object({
  searchProvider: z.enum(SEARCH_PROVIDERS).describe("search provider"),
  searchUrl: z
    .string()
    .url()
    .optional()
    .describe("the provider's endpoint (SearxNG: its base URL); default: the provider's own"),
  searchApiKey: z.string().optional().describe("the provider's API key (Brave, Tavily, Serper)"),
  searchResults: z.number().int().min(1).max(20).describe("results a search returns"),
  searchTimeoutMs: z.number().int().positive().describe("deadline of one search request, in ms"),
  browser: z.enum(BROWSER_MODES).describe("text, chromium, or auto (text, Chromium as fallback)"),
  chromiumPath: z.string().min(1).describe("the Chromium executable of the real browser"),
  allowPrivateAddresses: z
    .boolean()
    .describe("fetches may go to private, loopback and link-local addresses"),
  timeoutMs: z.number().int().positive().describe("deadline of one page fetch, in ms"),
  maxPageBytes: z.number().int().positive().describe("largest page read, in bytes"),
  maxDownloadBytes: z.number().int().positive().describe("largest download, in bytes"),
  maxRedirects: z.number().int().min(0).describe("redirects followed"),
  viewportChars: z.number().int().min(500).describe("characters of a page shown at once"),
  archiveUrl: z.string().url().describe("the Wayback Machine availability API"),
});

/** Resolved web settings. */
export type WebSettings = z.infer<typeof WebSettingsSchema>;

/** Defaults of every web setting. */
export const WEB_DEFAULTS: Readonly<WebSettings> = {
  searchProvider: "searxng",
  searchResults: 8,
  searchTimeoutMs: 20_000,
  browser: "auto",
  chromiumPath: "/usr/bin/chromium",
  allowPrivateAddresses: false,
  timeoutMs: 20_000,
  maxPageBytes: 20 * 1024 * 1024,
  maxDownloadBytes: 50 * 1024 * 1024,
  maxRedirects: 5,
  // The GAIA submission's text browser showed 5 KiB of Markdown at a time.
  viewportChars: 5_120,
  archiveUrl: WAYBACK_AVAILABLE_URL,
};

/**
 * `overrides` over `base`, validated: CODEHOP_CONFIG_INVALID naming each bad setting and `where` it
 * came from.
 */
export function resolveWebSettings(
  overrides: Partial<WebSettings> | undefined,
  base: WebSettings = WEB_DEFAULTS,
  where = "the web settings",
): WebSettings {
  const parsed = WebSettingsSchema.safeParse({ ...base, ...(overrides ?? {}) });
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((i) => `${i.path.join(".") || "settings"}: ${i.message}`)
      .join("; ");
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Invalid web setting in ${where}: ${problems}`,
    );
  }
  return parsed.data;
}

/** The environment's web settings (CODEHOP_SEARCH_*, CODEHOP_BROWSER, CODEHOP_WEB_* ...). */
export function webSettingsFromEnv(env: CodehopEnv = readEnv()): WebSettings {
  const given: Record<string, unknown> = {};
  if (env.searchProvider !== undefined) given.searchProvider = env.searchProvider;
  if (env.searchUrl !== undefined) given.searchUrl = env.searchUrl;
  if (env.searchApiKey !== undefined) given.searchApiKey = env.searchApiKey;
  if (env.browser !== undefined) given.browser = env.browser;
  if (env.chromiumPath !== undefined) given.chromiumPath = env.chromiumPath;
  if (env.webAllowPrivateUrls !== undefined) given.allowPrivateAddresses = env.webAllowPrivateUrls;
  if (env.webTimeoutMs !== undefined) given.timeoutMs = env.webTimeoutMs;
  if (env.webMaxMb !== undefined) {
    given.maxPageBytes = Math.round(env.webMaxMb * 1024 * 1024);
    given.maxDownloadBytes = Math.round(env.webMaxMb * 1024 * 1024);
  }
  if (env.waybackUrl !== undefined) given.archiveUrl = env.waybackUrl;
  return resolveWebSettings(
    given as Partial<WebSettings>,
    WEB_DEFAULTS,
    "the CODEHOP_SEARCH_* / CODEHOP_BROWSER / CODEHOP_WEB_* environment variables",
  );
}

/** How an operator lets a server's web tools reach private addresses (said in refusals). */
export const PRIVATE_ADDRESS_HINT =
  "the operator may allow it with CODEHOP_WEB_ALLOW_PRIVATE_URLS=1";

/** The limits and address policy of a page fetch under `settings`. */
export function pagePolicy(settings: WebSettings): HttpPolicy {
  return {
    timeoutMs: settings.timeoutMs,
    maxBytes: settings.maxPageBytes,
    maxRedirects: settings.maxRedirects,
    ...(settings.allowPrivateAddresses
      ? {}
      : { allowAddress: isPublicAddress, refusedHint: PRIVATE_ADDRESS_HINT }),
  };
}

/** The policy of a download: a page fetch's, with the download size cap. */
export function downloadPolicy(settings: WebSettings): HttpPolicy {
  return { ...pagePolicy(settings), maxBytes: settings.maxDownloadBytes };
}
