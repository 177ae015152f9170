/**
 * The web ports (below the framework, like src/store): search providers, browsers (text and real),
 * the web archive and downloads, with one link policy and size and time caps on every fetch. The
 * assistant app's web tools and the research app's web source use them.
 */
export { WebError, webFailureOf, type WebFailure } from "./errors.ts";
export {
  BROWSER_USER_AGENT,
  httpGet,
  httpRequest,
  mediaTypeOf,
  parseWebUrl,
  type HttpPolicy,
  type HttpRequestInit,
  type HttpResponse,
} from "./http.ts";
export {
  BROWSER_MODES,
  PRIVATE_ADDRESS_HINT,
  SEARCH_ENDPOINTS,
  SEARCH_PROVIDERS,
  WAYBACK_AVAILABLE_URL,
  WEB_DEFAULTS,
  WebSettingsSchema,
  downloadPolicy,
  pagePolicy,
  resolveWebSettings,
  webSettingsFromEnv,
  type BrowserMode,
  type SearchProviderName,
  type WebSettings,
} from "./settings.ts";
export {
  createSearchProvider,
  formatSearchResults,
  type SearchProvider,
  type SearchResponse,
  type SearchResult,
} from "./search.ts";
export { htmlToMarkdown, htmlToMarkdownOffThread, type MarkdownPage } from "./html-markdown.ts";
export { isHtml, pageFromResponse, type WebPage } from "./page.ts";
export {
  WebBrowser,
  createAutoLoader,
  createTextLoader,
  type BrowserState,
  type PageLoader,
  type WebBrowserOptions,
} from "./browser.ts";
export { CHROMIUM_FLAGS, closeChromiumBrowsers, createChromiumLoader } from "./chromium.ts";
export { createPageLoader } from "./loaders.ts";
export { findAll, splitViewports, viewportAt } from "./viewports.ts";
export {
  archiveTimestamp,
  findSnapshot,
  formatTimestamp,
  type ArchiveSnapshot,
} from "./archive.ts";
export { describeDownload, downloadFile, safeFileName, type DownloadedFile } from "./download.ts";
