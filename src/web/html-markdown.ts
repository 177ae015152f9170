import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import pLimit from "p-limit";
import { WebError } from "./errors.ts";

/**
 * HTML → readable Markdown for the browsers: linkedom parses the page (a light DOM, no jsdom); the
 * page's own main-content landmark (`<main>`, a single `<article>`, Wikipedia's content div) or
 * else Mozilla's Readability (Firefox's Reader View) picks the main content; turndown writes
 * Markdown — headings, lists, tables as pipe tables, links and images with absolute
 * URLs (the agent follows links and shows images to the visualizer). When Readability finds no
 * article, or keeps too little of the page (a list, a table, a search page), the whole body is
 * converted instead: the agent must not lose the data a reader view drops.
 *
 * Parsing and converting are synchronous and take about a second per megabyte: a large page is
 * converted on a worker thread (bounded in number, with a deadline and a heap limit), so a server
 * running many assistants stays responsive.
 */

/** A page as Markdown. */
export interface MarkdownPage {
  /** The page's title (Readability's, else `<title>`), possibly empty. */
  title: string;
  markdown: string;
  /** True when only the main content was kept (a landmark, or Readability's), false for the whole body. */
  readable: boolean;
}

/** The libraries the converter needs, passed in so the same source runs on a worker thread. */
interface ConverterLibs {
  parseHTML: (html: string) => { document: any };
  Readability: new (doc: any, options?: Record<string, unknown>) => { parse(): any };
  Turndown: new (options: Record<string, unknown>) => any;
}

/**
 * Builds the converter. Self-contained — no imports, no outer variables — because a worker thread
 * runs its source text.
 *
 * Two measured costs shape it. Turndown's output grows by string concatenation that copies what it
 * has so far at every node (quadratic: 0.5 s for a 500-row table, minutes for 4,000), so the page
 * is converted in pieces of at most ~32 KB of HTML each, joined. And the GFM table plugins are
 * worse still (turndown-plugin-gfm fails on linkedom's DOM, @joplin/turndown-plugin-gfm took 6 s
 * for 500 rows), so tables are written here: a pipe table per `<table>`, its first row as the
 * header, each cell's text with its links and images, pipes escaped, colspans padded.
 */
function buildConverter(libs: ConverterLibs): (html: string, baseUrl: string) => MarkdownPage {
  const absolute = (href: string | null, base: string): string | undefined => {
    if (!href) return undefined;
    const h = href.trim();
    if (!h || h.startsWith("#") || /^(javascript|data|mailto|tel):/i.test(h)) return undefined;
    try {
      return new URL(h, base).href;
    } catch {
      return undefined;
    }
  };
  const makeTurndown = (base: string) => {
    const td = new libs.Turndown({
      headingStyle: "atx",
      codeBlockStyle: "fenced",
      bulletListMarker: "-",
    });
    td.remove(["script", "style", "noscript", "iframe", "template", "head", "title"]);
    td.remove((node: any) => ["SVG", "CANVAS", "BUTTON", "SELECT"].includes(node.nodeName));
    td.addRule("links", {
      filter: (node: any) => node.nodeName === "A",
      replacement: (content: string, node: any) => {
        const text = content.replace(/\s+/g, " ").trim();
        const href = absolute(node.getAttribute("href"), base);
        if (!text) return "";
        return href ? `[${text}](${href})` : text;
      },
    });
    td.addRule("images", {
      filter: "img",
      replacement: (_content: string, node: any) => {
        const alt = (node.getAttribute("alt") ?? "").replace(/\s+/g, " ").trim();
        const src = absolute(node.getAttribute("src"), base);
        return src ? `![${alt}](${src})` : alt;
      },
    });
    return td;
  };
  const clean = (md: string) =>
    md
      .replace(/[ \t]+\n/g, "\n")
      .replace(/\n{3,}/g, "\n\n")
      .trim();
  const ownRows = (table: any): any[] =>
    [...table.querySelectorAll("tr")].filter((tr: any) => tr.closest("table") === table);
  /** A cell's text with its links and images (turndown per cell costs 0.6 ms: too slow for big tables). */
  const inline = (node: any, base: string): string => {
    if (node.nodeType === 3) return node.textContent ?? "";
    if (node.nodeType !== 1) return "";
    if (node.nodeName === "IMG") {
      const src = absolute(node.getAttribute("src"), base);
      const alt = (node.getAttribute("alt") ?? "").trim();
      return src ? `![${alt}](${src})` : alt;
    }
    if (node.nodeName === "BR") return " ";
    const text = [...node.childNodes].map((c: any) => inline(c, base)).join("");
    if (node.nodeName === "A") {
      const href = absolute(node.getAttribute("href"), base);
      const t = text.replace(/\s+/g, " ").trim();
      return href && t ? `[${t}](${href})` : t;
    }
    return /^(P|DIV|LI|TR|UL|OL|H[1-6])$/.test(node.nodeName) ? ` ${text} ` : text;
  };
  const renderTable = (table: any, base: string): string => {
    const rows = ownRows(table).map((tr: any) => {
      const cells: string[] = [];
      for (const cell of [...tr.children].filter(
        (c: any) => c.nodeName === "TD" || c.nodeName === "TH",
      )) {
        cells.push(inline(cell, base).replace(/\s+/g, " ").trim().replace(/\|/g, "\\|"));
        const span = Math.min(Number(cell.getAttribute("colspan")) || 1, 50);
        for (let i = 1; i < span; i++) cells.push("");
      }
      return cells;
    });
    const filled = rows.filter((r: string[]) => r.length);
    if (!filled.length) return "";
    const width = Math.max(...filled.map((r: string[]) => r.length));
    const line = (r: string[]) => `| ${[...r, ...Array(width - r.length).fill("")].join(" | ")} |`;
    const caption = (table.querySelector("caption")?.textContent ?? "").replace(/\s+/g, " ").trim();
    return [
      ...(caption ? [`Table: ${caption}`, ""] : []),
      line(filled[0]),
      `| ${Array(width).fill("---").join(" | ")} |`,
      ...filled.slice(1).map(line),
    ].join("\n");
  };
  /** Turndown on pieces of at most ~32 KB of HTML (see above), joined. */
  const convertPieces = (root: any, td: any): string => {
    const out: string[] = [];
    let piece = "";
    const flush = () => {
      if (piece.trim()) out.push(td.turndown(piece));
      piece = "";
    };
    for (const node of [...root.childNodes]) {
      const html =
        node.nodeType === 1 ? node.outerHTML : node.nodeType === 3 ? node.textContent : "";
      if (piece && piece.length + html.length > 32 * 1024) flush();
      // A single element larger than a piece: its children are pieces of their own.
      if (html.length > 64 * 1024 && node.nodeType === 1 && node.childNodes.length > 1) {
        flush();
        out.push(convertPieces(node, td));
        continue;
      }
      piece += html;
    }
    flush();
    return out.join("\n\n");
  };
  return (html, baseUrl) => {
    const LANDMARKS = ["#mw-content-text", "main", "[role=main]", "article", "#content"];
    const { document } = libs.parseHTML(html);
    for (const el of [...document.querySelectorAll("script,style,noscript,template")]) el.remove();
    const docTitle = (document.querySelector("title")?.textContent ?? "")
      .replace(/\s+/g, " ")
      .trim();
    const body = document.body ?? document.documentElement;
    const bodyChars = (body?.textContent ?? "").replace(/\s+/g, " ").trim().length;
    const textLength = (el: any) => (el?.textContent ?? "").replace(/\s+/g, " ").trim().length;
    // The page's own main-content landmark (Wikipedia's #mw-content-text, <main>, a single
    // <article> ...) when it holds most of the text: cheap and exact.
    let root: any;
    let title = docTitle;
    for (const selector of LANDMARKS) {
      const found = [...document.querySelectorAll(selector)];
      if (found.length !== 1) continue;
      const chars = textLength(found[0]);
      if (chars >= 200 && chars >= bodyChars * 0.4) {
        root = found[0];
        break;
      }
    }
    // Else Readability, which walks every element several times (seconds on a page of tens of
    // thousands): only on pages of a usual size; a huge page is shown whole.
    if (!root && document.querySelectorAll("*").length <= 5_000) {
      let article: any = null;
      try {
        // Readability changes the document it reads: give it a copy.
        article = new libs.Readability(document.cloneNode(true), { charThreshold: 200 }).parse();
      } catch {
        article = null;
      }
      const articleChars = (article?.textContent ?? "").replace(/\s+/g, " ").trim().length;
      // Reader view unless it dropped most of the page (lists, tables, search results).
      if (article?.content && articleChars >= 200 && articleChars >= bodyChars * 0.4) {
        root = libs.parseHTML(`<!doctype html><html><body>${article.content}</body></html>`)
          .document.body;
        title = (article.title || docTitle || "").replace(/\s+/g, " ").trim();
      }
    }
    const readable = Boolean(root);
    root ??= body;
    const td = makeTurndown(baseUrl);
    const tables: string[] = [];
    for (const table of [...root.querySelectorAll("table")]) {
      if (table.parentNode?.closest?.("table")) continue;
      const marker = root.ownerDocument.createElement("p");
      marker.textContent = `CODEHOPTABLE${tables.length}X`;
      tables.push(renderTable(table, baseUrl));
      table.replaceWith(marker);
    }
    let markdown = convertPieces(root, td);
    markdown = markdown.replace(
      /CODEHOPTABLE(\d+)X/g,
      (_m: string, i: string) => tables[Number(i)] ?? "",
    );
    return { title, markdown: clean(markdown), readable };
  };
}

const require = createRequire(import.meta.url);
let converter: ((html: string, baseUrl: string) => MarkdownPage) | undefined;

function libs(): ConverterLibs {
  return {
    parseHTML: require("linkedom").parseHTML,
    Readability: require("@mozilla/readability").Readability,
    Turndown: require("turndown"),
  };
}

/** HTML as Markdown on this thread (small pages). */
export function htmlToMarkdown(html: string, baseUrl: string): MarkdownPage {
  converter ??= buildConverter(libs());
  return converter(html, baseUrl);
}

/** HTML of at least this many characters is converted on a worker thread. */
export const OFF_THREAD_CHARS = 200 * 1024;
/** How long a worker thread may take for one page (ms). */
export const CONVERT_TIMEOUT_MS = 60_000;
/** A worker thread's V8 heap limit (MB): a page whose DOM does not fit fails alone. */
const WORKER_HEAP_MB = 1024;
/** Conversion threads at once per process (each builds a DOM). */
const threads = pLimit(2);

const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { createRequire } = require("node:module");
const __name = (f) => f;
const req = createRequire(workerData.base);
const convert = (${buildConverter.toString()})({
  parseHTML: req("linkedom").parseHTML,
  Readability: req("@mozilla/readability").Readability,
  Turndown: req("turndown"),
});
parentPort.postMessage(convert(workerData.html, workerData.baseUrl));
`;

/**
 * HTML as Markdown, on a worker thread when the page is large ({@link OFF_THREAD_CHARS}). A
 * conversion over its deadline is a `no_text` WebError naming the page; `signal` aborting stops
 * it (the thread is terminated) and rejects with the signal's reason.
 */
export async function htmlToMarkdownOffThread(
  html: string,
  baseUrl: string,
  signal?: AbortSignal,
): Promise<MarkdownPage> {
  signal?.throwIfAborted();
  if (html.length < OFF_THREAD_CHARS) return htmlToMarkdown(html, baseUrl);
  return threads(async () => {
    signal?.throwIfAborted();
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { html, baseUrl, base: import.meta.url },
      resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
    });
    try {
      return await new Promise<MarkdownPage>((resolve, reject) => {
        const timer = setTimeout(() => {
          done();
          reject(
            new WebError(
              "no_text",
              `${baseUrl} could not be converted to text within ${CONVERT_TIMEOUT_MS / 1000} s (${(html.length / 1024 / 1024).toFixed(1)} MB of HTML).`,
            ),
          );
        }, CONVERT_TIMEOUT_MS);
        const onAbort = () => {
          done();
          reject(signal?.reason);
        };
        signal?.addEventListener("abort", onAbort, { once: true });
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
        };
        worker.once("message", (page: MarkdownPage) => {
          done();
          resolve(page);
        });
        worker.once("error", (err) => {
          done();
          reject(new WebError("no_text", `${baseUrl} could not be converted: ${err.message}`));
        });
        worker.once("exit", (code) => {
          done();
          reject(
            new WebError("no_text", `${baseUrl}: the conversion thread exited (code ${code}).`),
          );
        });
      });
    } finally {
      await worker.terminate();
    }
  });
}
