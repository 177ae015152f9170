import { WebError } from "./errors.ts";
import { httpGet } from "./http.ts";
import { pageFromResponse, type WebPage } from "./page.ts";
import { pagePolicy, type WebSettings } from "./settings.ts";
import { findAll, splitViewports, viewportAt } from "./viewports.ts";

/**
 * The browser port: a {@link PageLoader} reads a URL into a {@link WebPage} (Markdown), and a
 * {@link WebBrowser} — one per agent run — shows pages a viewport at a time ("viewport 2 of 7"),
 * scrolls, finds text and remembers where it is. Two loaders sit behind the port: the text browser
 * ({@link createTextLoader}: HTTP fetch, readable content, Markdown) and the real browser
 * (chromium.ts: Debian's Chromium driven by playwright-core, for pages their scripts build), plus
 * the auto loader that asks the real one only when the text browser finds a JavaScript page.
 */

/** Reads one URL into a page. */
export interface PageLoader {
  /** Which browser this is. */
  readonly mode: "text" | "chromium" | "auto";
  /** The page at `url`; WebErrors for what the agent can act on; `signal` is the run's. */
  load(url: string, signal?: AbortSignal): Promise<WebPage>;
  /** Releases what the loader holds (a browser process). */
  close(): Promise<void>;
}

/** The text browser: one HTTP GET within the settings' limits and link policy, then Markdown. */
export function createTextLoader(settings: WebSettings): PageLoader {
  const policy = pagePolicy(settings);
  return {
    mode: "text",
    async load(url, signal) {
      const res = await httpGet(url, policy, signal);
      return pageFromResponse(res, { browser: "text", signal });
    },
    close: async () => {},
  };
}

/**
 * Text first, the real browser when the text browser finds a page that needs JavaScript (scripts
 * and almost no text, or an empty page). `real` is created on first need; when it cannot start
 * (no Chromium), the text browser's page — or its error — stands, with a note.
 */
export function createAutoLoader(text: PageLoader, real: () => PageLoader | undefined): PageLoader {
  let chromium: PageLoader | undefined;
  return {
    mode: "auto",
    async load(url, signal) {
      let page: WebPage | undefined;
      let failure: unknown;
      try {
        page = await text.load(url, signal);
        if (!page.needsJavaScript) return page;
      } catch (err) {
        if (!(err instanceof WebError) || err.failure !== "no_text") throw err;
        failure = err;
      }
      chromium ??= real();
      if (!chromium) {
        if (page) return page;
        throw failure;
      }
      try {
        return await chromium.load(url, signal);
      } catch (err) {
        if (signal?.aborted) throw err;
        if (page) return page;
        throw err;
      }
    },
    async close() {
      await Promise.all([text.close(), chromium?.close()]);
    },
  };
}

/** What a browser session remembers, in a form that survives a process (see {@link WebBrowser.state}). */
export interface BrowserState {
  /** The page shown (its URL as visited), if any. */
  url?: string;
  /** The viewport shown (0-based). */
  viewport: number;
  /** The last find: its text and which match (0-based) is shown. */
  find?: { query: string; match: number };
}

/** Options of a {@link WebBrowser}. */
export interface WebBrowserOptions {
  /** Characters of a viewport. */
  viewportChars: number;
  /** Pages kept in memory for page_up / find / revisits (default 16). */
  cachePages?: number;
}

interface OpenPage {
  page: WebPage;
  bounds: Array<[number, number]>;
  /** A line said above the header (an archived snapshot's date ...). */
  note?: string;
}

/**
 * One agent's browser: the page it looks at, the viewport, the last find. Every method returns
 * what the agent sees: a header (address, title, "viewport i of n") and the viewport's Markdown.
 * Methods that need a page when none is open throw an Error telling the agent to visit one.
 */
export class WebBrowser {
  private current: OpenPage | undefined;
  private viewport = 0;
  private search: { query: string; matches: number[]; match: number } | undefined;
  private readonly cache = new Map<string, WebPage>();

  constructor(
    private readonly loader: PageLoader,
    private readonly options: WebBrowserOptions,
  ) {}

  /** Where the browser is: the visited URL, the viewport and the last find. */
  state(): BrowserState {
    return {
      ...(this.current ? { url: this.current.page.url } : {}),
      viewport: this.viewport,
      ...(this.search ? { find: { query: this.search.query, match: this.search.match } } : {}),
    };
  }

  /** The page shown, if any. */
  page(): WebPage | undefined {
    return this.current?.page;
  }

  /** Loads `url` (from the cache when it was read in this session) and shows its first viewport. */
  async visit(url: string, signal?: AbortSignal): Promise<string> {
    const page = await this.load(url, signal);
    this.open(page);
    return this.render();
  }

  /** Shows `page` (fetched elsewhere: an archived snapshot) with `note` above its header. */
  show(page: WebPage, note?: string): string {
    this.cache.set(page.url, page);
    this.open(page, note);
    return this.render();
  }

  /** The next viewport (the last one stays, with a note, at the end). */
  pageDown(): string {
    const open = this.need();
    if (this.viewport >= open.bounds.length - 1)
      return this.render("This is the last viewport of the page.");
    this.viewport++;
    return this.render();
  }

  /** The previous viewport (the first one stays, with a note, at the top). */
  pageUp(): string {
    this.need();
    if (this.viewport <= 0) return this.render("This is the first viewport of the page.");
    this.viewport--;
    return this.render();
  }

  /**
   * Jumps to the first match of `query` at or after the start of the current viewport (wrapping
   * to the top), and shows its viewport.
   */
  find(query: string): string {
    const open = this.need();
    const matches = findAll(open.page.markdown, query);
    if (!matches.length) {
      this.search = undefined;
      return `The text "${query}" was not found on this page (${open.page.finalUrl}).`;
    }
    const from = open.bounds[this.viewport][0];
    let match = matches.findIndex((offset) => offset >= from);
    if (match < 0) match = 0;
    this.search = { query, matches, match };
    this.viewport = viewportAt(open.bounds, matches[match]);
    return this.render(this.findNote());
  }

  /** The next match of the last find in a later viewport (wrapping to the top). */
  findNext(): string {
    const open = this.need();
    if (!this.search) throw new Error("Nothing to find next: call find_in_page(text) first.");
    const { matches } = this.search;
    const current = this.search.match;
    // The next match shown in another viewport (all in this one: simply the next match).
    let next = (current + 1) % matches.length;
    for (let i = 1; i <= matches.length; i++) {
      const candidate = (current + i) % matches.length;
      if (viewportAt(open.bounds, matches[candidate]) !== this.viewport) {
        next = candidate;
        break;
      }
    }
    this.search.match = next;
    this.viewport = viewportAt(open.bounds, matches[next]);
    return this.render(
      next <= current ? `${this.findNote()} (no later match: back at the first)` : this.findNote(),
    );
  }

  /**
   * Puts the browser back where `state` says (after a process restart): reloads the page and
   * repeats the find. A page that cannot be loaded again leaves the browser without one.
   */
  async restore(state: BrowserState, signal?: AbortSignal): Promise<void> {
    this.current = undefined;
    this.search = undefined;
    this.viewport = 0;
    if (!state.url) return;
    try {
      this.open(await this.load(state.url, signal));
    } catch (err) {
      if (signal?.aborted) throw err;
      return;
    }
    const open = this.current!;
    this.viewport = Math.min(Math.max(0, state.viewport), open.bounds.length - 1);
    if (state.find) {
      const matches = findAll(open.page.markdown, state.find.query);
      if (matches.length)
        this.search = {
          query: state.find.query,
          matches,
          match: Math.min(state.find.match, matches.length - 1),
        };
    }
  }

  /** Closes the loader (a real browser's process). */
  async close(): Promise<void> {
    await this.loader.close();
  }

  private async load(url: string, signal?: AbortSignal): Promise<WebPage> {
    const cached = this.cache.get(url);
    if (cached) {
      // Most recently used last.
      this.cache.delete(url);
      this.cache.set(url, cached);
      return cached;
    }
    const page = await this.loader.load(url, signal);
    this.cache.set(url, page);
    const max = this.options.cachePages ?? 16;
    while (this.cache.size > max) this.cache.delete(this.cache.keys().next().value!);
    return page;
  }

  private open(page: WebPage, note?: string): void {
    this.current = {
      page,
      bounds: splitViewports(page.markdown, this.options.viewportChars),
      note,
    };
    this.viewport = 0;
    this.search = undefined;
  }

  private need(): OpenPage {
    if (!this.current) throw new Error("No page is open: call visit_page(url) first.");
    return this.current;
  }

  private findNote(): string {
    const s = this.search!;
    return `Found "${s.query}": match ${s.match + 1} of ${s.matches.length}.`;
  }

  private render(note?: string): string {
    const { page, bounds, note: pageNote } = this.need();
    const [start, end] = bounds[this.viewport];
    const lines = [
      ...(pageNote ? [pageNote] : []),
      ...(note ? [note] : []),
      `Address: ${page.finalUrl}`,
      ...(page.title ? [`Title: ${page.title}`] : []),
      `Position: viewport ${this.viewport + 1} of ${bounds.length}`,
      "=======================",
      page.markdown.slice(start, end).trim(),
    ];
    return lines.join("\n");
  }
}
