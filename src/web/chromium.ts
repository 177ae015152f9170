import { accessSync, constants } from "node:fs";
import type { Browser, BrowserContext, Frame, Page, Request, Route } from "playwright-core";
import pLimit from "p-limit";
import { WebError } from "./errors.ts";
import { htmlToMarkdownOffThread } from "./html-markdown.ts";
import { BROWSER_USER_AGENT, httpRequest, type HttpPolicy, type HttpResponse } from "./http.ts";
import { isHtml, pageFromResponse, type WebPage } from "./page.ts";
import { pagePolicy, type WebSettings } from "./settings.ts";
import type { PageLoader } from "./browser.ts";

/**
 * The real browser behind the browser port: Debian's Chromium (CODEHOP_CHROMIUM_PATH, default
 * /usr/bin/chromium — no browser download) driven by playwright-core, for pages their scripts build
 * and pages behind a cookie banner.
 *
 * - One Chromium per process and executable, started on first use with the flags below and a fresh
 *   profile (Playwright's `launch` makes a temporary user-data-dir and removes it on close), shut
 *   down after a minute unused and when the process exits. Every page gets a context of its own
 *   (no cookies or storage shared between pages or runs); at most two pages render at once.
 * - Chromium makes no connection of its own: every request of the page (the document, its scripts,
 *   XHR, redirects one by one) is routed through codehop's HTTP client (http.ts) and so held to the
 *   same link policy, deadline and size caps as the text browser; images, media, fonts, WebSockets
 *   and service workers are refused (not needed for text).
 * - After the page settles, a cookie or consent banner is accepted (a visible button or link saying
 *   "Accept", "I agree", "Allow all" ..., in the page or its frames) and the page is read again; the
 *   rendered DOM then goes through the same readable-content converter as the text browser's.
 * - A URL that is not a web page (a PDF, an image) is read from the document's own bytes, as the
 *   text browser would.
 */

/** Chromium's command-line flags (the brief's list; Playwright adds its own automation flags). */
export const CHROMIUM_FLAGS: readonly string[] = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

/** Requests one page may make (document, scripts, XHR ...). */
const MAX_REQUESTS_PER_PAGE = 150;
/** How long to wait for the network to go quiet after the document loaded (ms). */
const SETTLE_MS = 2_500;
/** Resource types a text reader does not need. */
const SKIPPED_RESOURCES = new Set(["image", "media", "font", "imageset", "texttrack"]);

/** What buttons accepting a cookie banner say. */
const CONSENT =
  /^\s*(accept( all)?( cookies)?|accept and (continue|close)|i accept|agree( and (continue|close))?|i agree|yes,? i agree|allow( all)?( cookies)?|ok(ay)?|got it|consent|continue)\s*[.!]?\s*$/i;

interface SharedBrowser {
  browser: Promise<Browser>;
  users: number;
  idle?: NodeJS.Timeout;
}

const browsers = new Map<string, SharedBrowser>();
const pages = pLimit(2);
let exitHook = false;

/** Closes every Chromium this process started (also done on exit). */
export async function closeChromiumBrowsers(): Promise<void> {
  const all = [...browsers.values()];
  browsers.clear();
  await Promise.all(
    all.map(async (b) => {
      clearTimeout(b.idle);
      await (await b.browser.catch(() => undefined))?.close().catch(() => {});
    }),
  );
}

async function acquire(executablePath: string, timeoutMs: number): Promise<Browser> {
  // Checked first: a failed launch leaves Playwright's temporary profile behind.
  try {
    accessSync(executablePath, constants.X_OK);
  } catch {
    throw new WebError(
      "browser",
      `The real browser is not installed here (${executablePath} is not an executable). Install Debian's chromium or set CODEHOP_CHROMIUM_PATH; CODEHOP_BROWSER=text reads pages without it.`,
    );
  }
  let shared = browsers.get(executablePath);
  if (!shared) {
    const started = (async () => {
      const { chromium } = await import("playwright-core");
      return chromium.launch({
        executablePath,
        headless: true,
        args: [...CHROMIUM_FLAGS],
        timeout: Math.max(timeoutMs, 30_000),
        handleSIGINT: false,
        handleSIGTERM: false,
      });
    })();
    shared = { browser: started, users: 0 };
    browsers.set(executablePath, shared);
    started.then(
      (browser) =>
        browser.on("disconnected", () => {
          if (browsers.get(executablePath)?.browser === started) browsers.delete(executablePath);
        }),
      () => browsers.delete(executablePath),
    );
    if (!exitHook) {
      exitHook = true;
      // A child process left behind would outlive the CLI: kill it on exit (synchronously).
      process.once("exit", () => {
        for (const b of browsers.values()) void b.browser.then((br) => br.close()).catch(() => {});
      });
    }
  }
  clearTimeout(shared.idle);
  shared.users++;
  try {
    return await shared.browser;
  } catch (err) {
    shared.users--;
    throw new WebError(
      "browser",
      `The real browser (${executablePath}) could not start: ${(err as Error).message.split("\n")[0]}. Install Debian's chromium or set CODEHOP_CHROMIUM_PATH; CODEHOP_BROWSER=text reads pages without it.`,
      { cause: err },
    );
  }
}

function release(executablePath: string): void {
  const shared = browsers.get(executablePath);
  if (!shared) return;
  shared.users = Math.max(0, shared.users - 1);
  if (shared.users === 0) {
    clearTimeout(shared.idle);
    shared.idle = setTimeout(() => {
      if (browsers.get(executablePath) !== shared || shared.users) return;
      browsers.delete(executablePath);
      void shared.browser.then((b) => b.close()).catch(() => {});
    }, 60_000);
    shared.idle.unref();
  }
}

/** Response headers Chromium may have, without those of a body undici already decoded. */
function fulfilledHeaders(res: HttpResponse): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(res.headers)) {
    if (["content-encoding", "content-length", "transfer-encoding", "connection"].includes(name))
      continue;
    headers[name] = value;
  }
  if (res.setCookies.length) headers["set-cookie"] = res.setCookies.join("\n");
  return headers;
}

/** Clicks the first visible consent button of the page or its frames; true when one was. */
async function acceptCookieBanner(page: Page): Promise<boolean> {
  const frames: Frame[] = [
    page.mainFrame(),
    ...page.frames().filter((f) => f !== page.mainFrame()),
  ];
  for (const frame of frames) {
    const candidates = frame.locator(
      "button, a, [role=button], input[type=button], input[type=submit]",
    );
    const count = Math.min(await candidates.count().catch(() => 0), 200);
    for (let i = 0; i < count; i++) {
      const el = candidates.nth(i);
      const label = await el
        .evaluate((node) => {
          const n = node as {
            innerText?: string;
            value?: string;
            getAttribute(a: string): string | null;
          };
          return (n.innerText || n.value || n.getAttribute("aria-label") || "").trim();
        })
        .catch(() => "");
      if (!label || label.length > 40 || !CONSENT.test(label)) continue;
      if (!(await el.isVisible().catch(() => false))) continue;
      const clicked = await el
        .click({ timeout: 2_000 })
        .then(() => true)
        .catch(() => false);
      if (clicked) return true;
    }
  }
  return false;
}

/** The real browser as a {@link PageLoader} (see the module comment). */
export function createChromiumLoader(settings: WebSettings): PageLoader {
  const policy: HttpPolicy = pagePolicy(settings);
  const executablePath = settings.chromiumPath;
  return {
    mode: "chromium",
    load: (url, signal) =>
      pages(async () => {
        signal?.throwIfAborted();
        const browser = await acquire(executablePath, settings.timeoutMs);
        let context: BrowserContext | undefined;
        try {
          context = await browser.newContext({
            userAgent: BROWSER_USER_AGENT,
            acceptDownloads: false,
            serviceWorkers: "block",
            viewport: { width: 1280, height: 900 },
          });
          return await render(context, url, policy, settings, signal);
        } catch (err) {
          if (signal?.aborted) throw signal.reason;
          if (err instanceof WebError) throw err;
          if (!browser.isConnected())
            throw new WebError("browser", `The real browser stopped while reading ${url}.`, {
              cause: err,
            });
          throw new WebError(
            "unreachable",
            `${url} could not be read by the real browser: ${(err as Error).message.split("\n")[0]}.`,
            { cause: err },
          );
        } finally {
          await context?.close().catch(() => {});
          release(executablePath);
        }
      }),
    close: async () => {},
  };
}

async function render(
  context: BrowserContext,
  url: string,
  policy: HttpPolicy,
  settings: WebSettings,
  signal?: AbortSignal,
): Promise<WebPage> {
  const deadline = AbortSignal.timeout(settings.timeoutMs);
  const abort = signal ? AbortSignal.any([signal, deadline]) : deadline;
  const onAbort = () => void context.close().catch(() => {});
  abort.addEventListener("abort", onAbort, { once: true });
  // The page's own document answers (each hop of a redirect), and why a request was refused.
  const documents: HttpResponse[] = [];
  let documentError: unknown;
  let requests = 0;
  try {
    await context.routeWebSocket(/.*/, (ws) => ws.close());
    await context.route("**/*", async (route: Route, request: Request) => {
      const target = request.url();
      if (!/^https?:/i.test(target)) return route.continue();
      const isDocument = request.isNavigationRequest() && request.frame().parentFrame() === null;
      if (
        !isDocument &&
        (SKIPPED_RESOURCES.has(request.resourceType()) || ++requests > MAX_REQUESTS_PER_PAGE)
      )
        return route.abort("blockedbyclient").catch(() => {});
      try {
        const headers = await request.allHeaders();
        const res = await httpRequest(
          target,
          {
            method: request.method(),
            headers: Object.fromEntries(
              Object.entries(headers).filter(([k]) => !k.startsWith(":") && k !== "host"),
            ),
            body: request.postDataBuffer() ?? undefined,
            redirect: "manual",
          },
          policy,
          abort,
        );
        if (isDocument) documents.push(res);
        await route
          .fulfill({
            status: res.status,
            headers: fulfilledHeaders(res),
            body: Buffer.from(res.bytes),
          })
          .catch(() => {});
      } catch (err) {
        if (isDocument) documentError = err;
        await route
          .abort(
            err instanceof WebError && err.failure === "refused" ? "blockedbyclient" : "failed",
          )
          .catch(() => {});
      }
    });
    const page = await context.newPage();
    let navigationError: unknown;
    await page
      .goto(url, { waitUntil: "domcontentloaded", timeout: settings.timeoutMs })
      .catch((err) => (navigationError = err));
    if (abort.aborted && signal?.aborted) throw signal.reason;
    if (documentError) throw documentError;
    const last = documents.at(-1);
    if (!last) {
      if (deadline.aborted)
        throw new WebError("timeout", `${url} did not load within ${settings.timeoutMs / 1000} s.`);
      throw navigationError ?? new WebError("unreachable", `${url} could not be loaded.`);
    }
    if (last.status >= 400)
      throw new WebError(
        "http_status",
        `${url} answered HTTP ${last.status}${last.statusText ? ` ${last.statusText}` : ""}${last.status === 404 ? ": the page does not exist" : ""}.`,
        { status: last.status },
      );
    // Not a web page (a PDF, an image, JSON): read from its bytes, as the text browser does.
    if (!isHtml(last.mediaType, last.bytes) || navigationError)
      return pageFromResponse({ ...last, url }, { browser: "chromium", signal });
    await page.waitForLoadState("networkidle", { timeout: SETTLE_MS }).catch(() => {});
    if (await acceptCookieBanner(page)) {
      await page.waitForLoadState("networkidle", { timeout: SETTLE_MS }).catch(() => {});
      await page.waitForTimeout(300);
    }
    const html = await page.content();
    const finalUrl = page.url();
    const converted = await htmlToMarkdownOffThread(html, finalUrl, signal);
    if (!converted.markdown.trim())
      throw new WebError("no_text", `${url} has no readable text, even after its scripts ran.`);
    return {
      url,
      finalUrl,
      title: converted.title || (await page.title().catch(() => "")),
      markdown: converted.markdown,
      mediaType: last.mediaType,
      browser: "chromium",
      readable: converted.readable,
      bytes: last.bytes.byteLength,
    };
  } finally {
    abort.removeEventListener("abort", onAbort);
  }
}
