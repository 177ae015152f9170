import type { RunnableConfig } from "@langchain/core/runnables";
import { readRunContext } from "../../../core/run-context.ts";
import { stableJson } from "../../../core/run-code.ts";
import type { StepRecord } from "../../../core/state.ts";
import { formatTimestamp, findSnapshot } from "../../../web/archive.ts";
import { WebBrowser } from "../../../web/browser.ts";
import { createPageLoader } from "../../../web/loaders.ts";
import type { WebSettings } from "../../../web/settings.ts";

/**
 * The browser of one web-agent run, kept between its actions. Where the browser is (page,
 * viewport, last find) follows from the browser calls the agent made, which its checkpointed steps
 * record — so the session is a cache: when the steps say something else than the cached session
 * did (another process resumed the thread, a replay forked it from an earlier checkpoint, a new
 * task started on it), the session is rebuilt by repeating those calls in order (pages come from
 * the web again; failures leave the browser without a page, as they did then). Calls served from
 * the call journal inside an action that was cut short are the one thing it cannot see: after such
 * a resume the browser is where the last finished action left it.
 */

/** The tools whose calls move the browser. */
export const BROWSER_TOOLS = new Set([
  "visit_page",
  "page_down",
  "page_up",
  "find_in_page",
  "find_next",
  "archive_search",
]);

/** One browser call as the steps record it: `[action, callIndex, tool, args]`. */
type BrowserOp = [action: number, callIndex: number, tool: string, args: Record<string, unknown>];

interface Session {
  browser: WebBrowser;
  /** The calls this browser has applied, in order (stable JSON of each op). */
  applied: string[];
  /** Calls still to repeat before the browser is used (after a rebuild). */
  pending: BrowserOp[];
  /** The repeat of `pending` under way (concurrent calls of one action wait for the same one). */
  ready?: Promise<void>;
  settingsKey: string;
}

/** Most sessions kept (least recently used dropped). */
const MAX_SESSIONS = 32;
const sessions = new Map<string, Session>();

/** The browser calls recorded in `steps`, in order. */
export function browserOps(steps: readonly StepRecord[]): BrowserOp[] {
  const ops: BrowserOp[] = [];
  for (const step of steps) {
    if (step.kind !== "action") continue;
    for (const call of [...step.toolCalls].sort((a, b) => a.callIndex - b.callIndex)) {
      if (!call.ok || !BROWSER_TOOLS.has(call.tool)) continue;
      ops.push([
        step.step,
        call.callIndex,
        call.tool,
        (call.args ?? {}) as Record<string, unknown>,
      ]);
    }
  }
  return ops;
}

/** The key of an agent run: thread, the agent's checkpoint namespace, task epochs, agent. */
function sessionKey(config: RunnableConfig, agent: string): string {
  const configurable = (config.configurable ?? {}) as Record<string, unknown>;
  const ns = String(configurable.checkpoint_ns ?? "");
  const cut = ns.lastIndexOf("|");
  return JSON.stringify([
    String(configurable.thread_id ?? ""),
    cut < 0 ? "" : ns.slice(0, cut),
    readRunContext(config).taskEpochs ?? [],
    agent,
  ]);
}

/** A handle on a run's browser for the tools of one action. */
export interface BrowserHandle {
  /** The browser, brought up to date with the recorded calls first. */
  get(signal?: AbortSignal): Promise<WebBrowser>;
  /** Records a call this action made (after it succeeded). */
  applied(callIndex: number, tool: string, args: Record<string, unknown>): void;
}

/**
 * The browser of the agent run `config` belongs to, for the action after `steps` (see the module
 * comment). `agent` is the agent's name (part of the session key).
 */
export function browserSession(
  config: RunnableConfig,
  agent: string,
  steps: readonly StepRecord[],
  settings: WebSettings,
): BrowserHandle {
  const key = sessionKey(config, agent);
  const recorded = browserOps(steps);
  const recordedKeys = recorded.map((op) => stableJson(op));
  const settingsKey = stableJson(settings);
  const action = Math.max(0, ...steps.filter((s) => s.kind === "action").map((s) => s.step)) + 1;
  let session = sessions.get(key);
  const upToDate =
    session &&
    session.settingsKey === settingsKey &&
    session.applied.length === recordedKeys.length &&
    session.applied.every((k, i) => k === recordedKeys[i]);
  if (!session || !upToDate) {
    session = {
      browser: new WebBrowser(createPageLoader(settings), {
        viewportChars: settings.viewportChars,
      }),
      applied: recordedKeys,
      pending: recorded,
      settingsKey,
    };
  }
  sessions.delete(key);
  sessions.set(key, session);
  while (sessions.size > MAX_SESSIONS) sessions.delete(sessions.keys().next().value!);
  const current = session;
  return {
    async get(signal) {
      if (current.pending.length && !current.ready) {
        current.ready = (async () => {
          while (current.pending.length)
            await repeat(current.browser, current.pending.shift()!, settings, signal);
        })().finally(() => (current.ready = undefined));
      }
      await current.ready;
      return current.browser;
    },
    applied(callIndex, tool, args) {
      current.applied.push(stableJson([action, callIndex, tool, args] satisfies BrowserOp));
    },
  };
}

/** Repeats one recorded call on a rebuilt browser (its outcome was seen already: errors ignored). */
async function repeat(
  browser: WebBrowser,
  [, , tool, args]: BrowserOp,
  settings: WebSettings,
  signal?: AbortSignal,
): Promise<void> {
  try {
    switch (tool) {
      case "visit_page":
        await browser.visit(String(args.url), signal);
        return;
      case "page_down":
        browser.pageDown();
        return;
      case "page_up":
        browser.pageUp();
        return;
      case "find_in_page":
        browser.find(String(args.text));
        return;
      case "find_next":
        browser.findNext();
        return;
      case "archive_search":
        await showSnapshot(
          browser,
          String(args.url),
          args.date as string | undefined,
          settings,
          signal,
        );
        return;
    }
  } catch (err) {
    if (signal?.aborted) throw err;
  }
}

/** Finds the snapshot of `url` closest to `date` and shows it in `browser` (archive_search). */
export async function showSnapshot(
  browser: WebBrowser,
  url: string,
  date: string | undefined,
  settings: WebSettings,
  signal?: AbortSignal,
): Promise<string> {
  const snapshot = await findSnapshot(url, date, settings, signal);
  const page = await createPageLoader({ ...settings, browser: "text" }).load(snapshot.url, signal);
  return browser.show(
    { ...page, url: snapshot.url },
    `Web archive snapshot of ${snapshot.original} taken ${formatTimestamp(snapshot.timestamp)}${snapshot.requested ? ` (the closest to ${formatTimestamp(snapshot.requested)})` : ""}:`,
  );
}

/** Forgets every session (tests, and a process that ends its runs). */
export function clearBrowserSessions(): void {
  sessions.clear();
}
