import type { RunnableConfig } from "@langchain/core/runnables";
import { z } from "zod";
import type { StepRecord } from "../../../core/state.ts";
import { defineTool, type CodeTool, type ToolCallContext } from "../../../tools/define-tool.ts";
import { describeDownload, downloadFile } from "../../../web/download.ts";
import { WebError } from "../../../web/errors.ts";
import { createSearchProvider, formatSearchResults } from "../../../web/search.ts";
import type { WebSettings } from "../../../web/settings.ts";
import { browserSession, showSnapshot } from "../base/browser-session.ts";
import { assistantFilesOf, threadOf, type AssistantFilesDeps } from "../base/context.ts";

/**
 * The web agent's tools (names and arguments are a contract): `web_search(query)`,
 * `visit_page(url)`, `page_down()`, `page_up()`, `find_in_page(text)`, `find_next()`,
 * `archive_search(url, date)`, `download_file(url)`. They share one browser per agent run
 * (base/browser-session.ts). Every failure the agent can act on — a dead site, a 404, a page
 * without text, a file that is not a page, a search provider that is down — comes back as an
 * Error whose message says what happened and which tool to try instead.
 */

/** What the agent should try after each kind of web failure. */
const ADVICE: Partial<Record<WebError["failure"], string>> = {
  binary:
    "It is a file, not a page: save it with download_file(url), then read it with inspect_file(path, question).",
  too_large: "Try another page, or download_file(url) if you need this file.",
  http_status:
    "Check the address or search for the page; an old page may be in the web archive: archive_search(url, date).",
  unreachable:
    "The site may be down: try another result, or the web archive: archive_search(url, date).",
  timeout:
    "The site is slow or down: try another result, or the web archive: archive_search(url, date).",
  no_text: "Try another page or result.",
  provider: "Use visit_page(url) on an address you know instead.",
  browser: "Pages are still read by the text browser where it can.",
};

/** A web failure as the Error the agent reads (message plus advice); anything else unchanged. */
export function webProblem(err: unknown, signal?: AbortSignal): unknown {
  if (signal?.aborted) return err;
  if (!(err instanceof WebError)) return err;
  const advice = ADVICE[err.failure];
  return new Error(advice ? `${err.message} ${advice}` : err.message);
}

/** Runs a tool body, turning web failures into the agent's error messages. */
async function guarded<T>(ctx: ToolCallContext, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (err) {
    throw webProblem(err, ctx.signal);
  }
}

/** What the web tools of one action are built from. */
export interface WebToolsInput {
  config: RunnableConfig;
  steps: readonly StepRecord[];
  settings: WebSettings;
  /** The agent whose browser this is (part of its session key). */
  agent: string;
  files: AssistantFilesDeps;
}

/** The eight web tools of one action of a web agent. */
export function createWebTools(input: WebToolsInput): CodeTool<any>[] {
  const { config, steps, settings, agent } = input;
  const session = browserSession(config, agent, steps, settings);
  const search = createSearchProvider(settings);
  const moved =
    <A extends Record<string, unknown>>(
      tool: string,
      run: (args: A, ctx: ToolCallContext) => Promise<string>,
    ) =>
    async (args: A, ctx: ToolCallContext): Promise<string> =>
      guarded(ctx, async () => {
        const out = await run(args, ctx);
        session.applied(ctx.callIndex, tool, args);
        return out;
      });
  return [
    defineTool({
      name: "web_search",
      description:
        "Searches the web. Returns numbered results: title, address and a snippet each. Open a result with visit_page(url).",
      parameters: z.object({
        query: z.string().min(1).describe("what to search for, a few keywords"),
      }),
      returns: "string",
      invoke: ({ query }, ctx) =>
        guarded(ctx, async () =>
          formatSearchResults(await search.search(query, { signal: ctx.signal })),
        ),
    }),
    defineTool({
      name: "visit_page",
      description:
        'Opens a web page (or a PDF, text or JSON link) and shows its first viewport as Markdown, with "viewport 1 of N". Links are shown as [text](url).',
      parameters: z.object({ url: z.string().min(1).describe("the address, http:// or https://") }),
      returns: "string",
      invoke: moved("visit_page", async ({ url }, ctx) => {
        const browser = await session.get(ctx.signal);
        const shown = await browser.visit(url, ctx.signal);
        const page = browser.page()!;
        ctx.report?.({ sources: [{ title: page.title || page.finalUrl, url: page.finalUrl }] });
        return shown;
      }),
    }),
    defineTool({
      name: "page_down",
      description: "Shows the next viewport of the open page.",
      parameters: z.object({}),
      returns: "string",
      invoke: moved("page_down", async (_args, ctx) => (await session.get(ctx.signal)).pageDown()),
    }),
    defineTool({
      name: "page_up",
      description: "Shows the previous viewport of the open page.",
      parameters: z.object({}),
      returns: "string",
      invoke: moved("page_up", async (_args, ctx) => (await session.get(ctx.signal)).pageUp()),
    }),
    defineTool({
      name: "find_in_page",
      description:
        "Finds text in the open page (case-insensitive; * matches anything) and shows the viewport of the first match.",
      parameters: z.object({ text: z.string().min(1).describe("the text to find") }),
      returns: "string",
      invoke: moved("find_in_page", async ({ text }, ctx) =>
        (await session.get(ctx.signal)).find(text),
      ),
    }),
    defineTool({
      name: "find_next",
      description: "Shows the viewport of the next match of the last find_in_page.",
      parameters: z.object({}),
      returns: "string",
      invoke: moved("find_next", async (_args, ctx) => (await session.get(ctx.signal)).findNext()),
    }),
    defineTool({
      name: "archive_search",
      description:
        "Opens the web archive's (Wayback Machine) snapshot of a page closest to a date: how the page looked then.",
      parameters: z.object({
        url: z.string().min(1).describe("the page's address"),
        date: z.string().min(1).describe('the date, "YYYY-MM-DD" (e.g. "2019-05-17")'),
      }),
      returns: "string",
      invoke: moved("archive_search", async ({ url, date }, ctx) => {
        const browser = await session.get(ctx.signal);
        const shown = await showSnapshot(browser, url, date, settings, ctx.signal);
        ctx.report?.({
          sources: [{ title: `${url} (web archive)`, url: browser.page()!.finalUrl }],
        });
        return shown;
      }),
    }),
    defineTool({
      name: "download_file",
      description:
        "Downloads a file (PDF, spreadsheet, image, audio, archive ...) into this task's files and returns its name for inspect_file(path, question) or visualizer(image, question).",
      parameters: z.object({ url: z.string().min(1).describe("the file's address") }),
      returns: "string",
      invoke: ({ url }, ctx) =>
        guarded(ctx, async () => {
          const files = assistantFilesOf(ctx.config as RunnableConfig, input.files);
          const saved = await downloadFile(url, files.dir(threadOf(config)), settings, ctx.signal);
          const reader = saved.mediaType?.startsWith("image/") ? "visualizer" : "inspect_file";
          return `Saved ${describeDownload(saved)}. Read it with ${reader}(${JSON.stringify(saved.name)}, question).`;
        }),
    }),
  ];
}
