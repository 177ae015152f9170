import type { RunnableConfig } from "@langchain/core/runnables";
import { z } from "zod";
import { readEnv } from "../../../config/env.ts";
import { ANY_VALUE, clientSettableFields, oneOf, upTo } from "../../../core/client-settings.ts";
import { readRunContext, RunContextSchema } from "../../../core/run-context.ts";
import { CodehopError, ErrorCodes } from "../../../errors.ts";
import {
  BROWSER_MODES,
  resolveWebSettings,
  webSettingsFromEnv,
  type WebSettings,
} from "../../../web/settings.ts";
import { AssistantFiles } from "./files.ts";

/**
 * What an assistant run gets through its run context, and which of it a client may choose.
 *
 * Web settings are the operator's (the environment: CODEHOP_SEARCH_*, CODEHOP_BROWSER,
 * CODEHOP_WEB_*) unless code grants the run more: the CLI and `assist()` put a grant in the run
 * context (`assistantAccess`, made by {@link grantAssistantAccess} — a mark JSON cannot carry, so a
 * client of a served graph cannot send one), which lets the run choose every web setting and reach
 * private addresses (the user's own machine and network). A run without a grant — every graph of
 * langgraph.json, whose context any client writes — may choose only how it reads (viewportChars,
 * searchResults), may only lower the limits (timeoutMs, maxPageBytes, maxDownloadBytes,
 * maxRedirects), may pick the text browser instead of the operator's, and keeps everything else
 * (provider, endpoint, API key, private addresses, Chromium's path, the archive) as the operator set it.
 */

const GRANT = Symbol.for("codehop.assistant.access");

/** What a granted run may do besides choosing every web setting. */
export interface AssistantAccess {
  /** Pages may be on private, loopback and link-local addresses. */
  readonly privateNetwork: boolean;
}

/** A grant of `access` for the run context's `assistantAccess` (code only; see the module comment). */
export function grantAssistantAccess(access: Partial<AssistantAccess> = {}): AssistantAccess {
  return Object.freeze({ privateNetwork: access.privateNetwork === true, [GRANT]: true });
}

/** Whether `value` is a grant made by {@link grantAssistantAccess}. */
export function isAssistantAccessGrant(value: unknown): value is AssistantAccess {
  return typeof value === "object" && value !== null && (value as any)[GRANT] === true;
}

/** The grant of the CLI and the `assist()` API: the user's own machine and network. */
export const LOCAL_ASSISTANT_ACCESS = grantAssistantAccess({ privateNetwork: true });

declare module "../../../core/run-context.ts" {
  interface RunContext {
    /** Assistant: where tasks keep their attached and downloaded files (one folder per thread). */
    assistantFiles?: AssistantFiles;
    /** Assistant: web settings for this run over the operator's (see src/apps/assistant/base/context.ts). */
    web?: Partial<WebSettings>;
    /** Assistant: a code grant (`grantAssistantAccess`): every web setting, private addresses. */
    assistantAccess?: AssistantAccess;
  }
}

const isObject = (v: unknown) => typeof v === "object" && v !== null;

// What a client of a served assistant graph may set in `context.web` (src/core/client-settings.ts):
// how it reads, limits up to the operator's, and the text browser; the rest is the operator's.
const operatorLimit = (key: "timeoutMs" | "maxPageBytes" | "maxDownloadBytes" | "maxRedirects") =>
  upTo(() => webSettingsFromEnv(readEnv())[key], `the operator's web ${key}`);
const WebContextSchema = clientSettableFields(
  z.looseObject({
    viewportChars: z.number().int().min(500).optional(),
    searchResults: z.number().int().min(1).max(20).optional(),
    browser: z.enum(BROWSER_MODES).optional(),
    timeoutMs: z.number().int().positive().optional(),
    maxPageBytes: z.number().int().positive().optional(),
    maxDownloadBytes: z.number().int().positive().optional(),
    maxRedirects: z.number().int().min(0).optional(),
  }),
  {
    viewportChars: ANY_VALUE,
    searchResults: ANY_VALUE,
    browser: oneOf(() => ["text"], "the text browser (the operator's browser otherwise)"),
    timeoutMs: operatorLimit("timeoutMs"),
    maxPageBytes: operatorLimit("maxPageBytes"),
    maxDownloadBytes: operatorLimit("maxDownloadBytes"),
    maxRedirects: operatorLimit("maxRedirects"),
  },
);

/** The assistant's run-context schema: the framework's plus its keys (Studio shows `web`). */
export const AssistantRunContextSchema = RunContextSchema.extend({
  web: WebContextSchema.optional().describe(
    "web settings for this run; without a code grant: viewportChars and searchResults, limits only lowered, browser only `text`; the rest is the operator's",
  ),
  assistantFiles: z.custom<AssistantFiles>(isObject, "an AssistantFiles store").optional(),
  assistantAccess: z
    .custom<AssistantAccess>(
      isAssistantAccessGrant,
      "a grant made by grantAssistantAccess (code only)",
    )
    .optional(),
});

/** Web settings a run without a grant may choose freely. */
const READING = ["viewportChars", "searchResults"] as const;
/** Limits a run without a grant may only lower. */
const LIMITS = ["timeoutMs", "maxPageBytes", "maxDownloadBytes", "maxRedirects"] as const;

/**
 * The web settings of a run (see the module comment): the operator's, with what the run context's
 * `web` may change. CODEHOP_CONFIG_INVALID for an invalid value either way.
 */
export function webSettingsOf(config: RunnableConfig | undefined): WebSettings {
  const context = readRunContext(config);
  const operator = webSettingsFromEnv(readEnv());
  const grant = isAssistantAccessGrant(context.assistantAccess)
    ? context.assistantAccess
    : undefined;
  const given = context.web;
  if (given !== undefined && (typeof given !== "object" || given === null || Array.isArray(given)))
    throw new CodehopError(ErrorCodes.CONFIG_INVALID, "The run context's `web` must be an object.");
  if (grant) {
    return resolveWebSettings(
      { ...(grant.privateNetwork ? { allowPrivateAddresses: true } : {}), ...given },
      operator,
      "the run context's `web`",
    );
  }
  const asked = resolveWebSettings(given, operator, "the run context's `web`");
  const settings: WebSettings = { ...operator };
  for (const key of READING) (settings as any)[key] = asked[key];
  for (const key of LIMITS) settings[key] = Math.min(operator[key], asked[key]);
  if (asked.browser === "text") settings.browser = "text";
  return settings;
}

/** What the assistant's tools need to find a run's files when the run context names none. */
export interface AssistantFilesDeps {
  /** A store for every run of this graph. */
  files?: AssistantFiles;
  /** The environment's store, opened on first use (the langgraph.json entry gives it). */
  fallbackFiles?: () => AssistantFiles;
}

/** The file store of a run: the run context's, else the graph's, else the environment's. */
export function assistantFilesOf(
  config: RunnableConfig | undefined,
  deps: AssistantFilesDeps,
): AssistantFiles {
  const files = readRunContext(config).assistantFiles ?? deps.files ?? deps.fallbackFiles?.();
  return files ?? new AssistantFiles(readEnv().home);
}

/** The thread of a run ("" outside a thread: its files then share one folder). */
export function threadOf(config: RunnableConfig | undefined): string {
  const id = (config?.configurable as Record<string, unknown> | undefined)?.thread_id;
  return typeof id === "string" && id ? id : "no-thread";
}
