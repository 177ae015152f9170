import { Worker } from "node:worker_threads";
import { availableParallelism } from "node:os";
import pLimit from "p-limit";
import TurndownService from "turndown";
import { CodehopError, ErrorCodes } from "../errors.ts";

/**
 * HTML → plain text with Markdown heading lines, by turndown (its DOM parser, domino, needs no
 * jsdom). Converting takes about a second per megabyte of HTML, all of it synchronous: on the
 * thread of a server (Studio's, `codehop serve`'s workers) a large page would stop every other
 * request, run and heartbeat meanwhile. So a large page is converted in a worker thread
 * ({@link htmlToTextOffThread}) with a deadline, and the process stays responsive.
 */

/**
 * A converter built on `Turndown` (the turndown class): page furniture (scripts, styles,
 * navigation, forms) dropped, links reduced to their text, images to their alt text, no Markdown
 * escaping (the text is read, not rendered). Self-contained — no imports, no outer variables —
 * because a worker thread runs its source text.
 */
function buildConverter(Turndown: typeof TurndownService): (html: string) => string {
  const td = new Turndown({ headingStyle: "atx", codeBlockStyle: "fenced", bulletListMarker: "-" });
  td.remove(["script", "style", "noscript", "iframe", "nav", "footer", "form", "head", "title"]);
  td.remove((node) => ["SVG", "CANVAS", "BUTTON", "TEMPLATE"].includes(node.nodeName));
  td.addRule("links", { filter: "a", replacement: (content) => content });
  td.addRule("images", {
    filter: "img",
    replacement: (_content, node) =>
      (node as { getAttribute(name: string): string | null }).getAttribute("alt") ?? "",
  });
  td.escape = (text: string) => text;
  return (html) =>
    td
      .turndown(html)
      .replace(/\n{3,}/g, "\n\n")
      .trim();
}

let converter: ((html: string) => string) | undefined;

/** HTML as text on this thread (small pages, and DOCX's HTML); see the module comment. */
export function htmlToText(html: string): string {
  converter ??= buildConverter(TurndownService);
  return converter(html);
}

/** HTML of at least this many characters is converted in a worker thread. */
export const OFF_THREAD_HTML_CHARS = 256 * 1024;

/** How long a worker thread may take to convert one page (ms). */
export const HTML_WORKER_TIMEOUT_MS = 120_000;

// The worker's program: CommonJS, loading turndown from codehop's own dependencies. `__name` is
// defined for builds (esbuild with keepNames, as tsx and vitest run the sources) whose function
// text calls it.
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { createRequire } = require("node:module");
const __name = (f) => f;
const Turndown = createRequire(workerData.base)("turndown");
const convert = (${buildConverter.toString()})(Turndown);
parentPort.postMessage(convert(workerData.html));
`;

/** Options of {@link htmlToTextOffThread}. */
interface OffThreadOptions {
  /** The document's name, for errors. */
  name?: string;
  /** Deadline of a conversion (default 120 s). */
  timeoutMs?: number;
  /** Aborting it stops the conversion (its thread is terminated) or its wait for a thread. */
  signal?: AbortSignal;
}

/**
 * HTML as text, converted in a worker thread when it is large (at least
 * {@link OFF_THREAD_HTML_CHARS}), on this thread otherwise. A conversion that takes longer than
 * `timeoutMs` is stopped: INPUT_INVALID naming the document. An aborted `signal` stops it too,
 * rejecting with the signal's reason (a cancelled run does not keep a core busy).
 */
export async function htmlToTextOffThread(
  html: string,
  options: OffThreadOptions = {},
): Promise<string> {
  options.signal?.throwIfAborted();
  if (html.length < OFF_THREAD_HTML_CHARS) return htmlToText(html);
  let started = false;
  const converted = conversionThreads(() => {
    started = true;
    options.signal?.throwIfAborted();
    return convertOffThread(html, options);
  });
  const { signal } = options;
  if (!signal) return converted;
  // Waiting for a thread ends with the signal too (the queued task then never starts); a running
  // conversion ends through its own handler, once its thread is terminated.
  return new Promise<string>((resolve, reject) => {
    const onAbort = () => {
      if (!started) reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    converted.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/**
 * At most this many conversion threads at once per process (each builds a whole DOM): many clients
 * attaching large pages at the same time queue instead of exhausting memory and cores.
 */
const MAX_CONVERSION_THREADS = Math.max(1, Math.min(4, availableParallelism()));
const conversionThreads = pLimit(MAX_CONVERSION_THREADS);

/** Conversion threads running and waiting for a slot now (for tests and diagnostics). */
export function conversionThreadStats(): { running: number; waiting: number; max: number } {
  return {
    running: conversionThreads.activeCount,
    waiting: conversionThreads.pendingCount,
    max: MAX_CONVERSION_THREADS,
  };
}

/** A conversion thread's V8 heap limit: a page whose DOM does not fit fails alone, as an error. */
const CONVERSION_HEAP_MB = 1024;

async function convertOffThread(html: string, options: OffThreadOptions): Promise<string> {
  const timeoutMs = options.timeoutMs ?? HTML_WORKER_TIMEOUT_MS;
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { html, base: import.meta.url },
    resourceLimits: { maxOldGenerationSizeMb: CONVERSION_HEAP_MB },
  });
  try {
    return await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        settle();
        reject(
          new CodehopError(
            ErrorCodes.INPUT_INVALID,
            `${options.name ?? "The page"} could not be converted to text within ${timeoutMs / 1000} s (${(html.length / 1024 / 1024).toFixed(1)} MB of HTML).`,
          ),
        );
      }, timeoutMs);
      const onAbort = () => {
        settle();
        reject(options.signal?.reason);
      };
      options.signal?.addEventListener("abort", onAbort, { once: true });
      const settle = () => {
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
      };
      worker.once("message", (text: string) => {
        settle();
        resolve(text);
      });
      worker.once("error", (err) => {
        settle();
        reject(err);
      });
      worker.once("exit", (code) => {
        settle();
        reject(new Error(`the HTML conversion thread exited (code ${code}) without a result`));
      });
    });
  } finally {
    await worker.terminate();
  }
}
