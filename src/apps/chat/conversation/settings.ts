import type { RunnableConfig } from "@langchain/core/runnables";
import { z } from "zod";
import { readEnv, type CodehopEnv } from "../../../config/env.ts";
import { ANY_VALUE, clientSettableFields, upTo } from "../../../core/client-settings.ts";
import { readRunContext } from "../../../core/run-context.ts";
import { CodehopError, ErrorCodes } from "../../../errors.ts";
import { isChatAccessGrant } from "./access.ts";

/**
 * The chat app's settings, with their defaults in this one place. Each comes, in order of
 * precedence, from the run context's `chat` object (per run: the API, Studio's configuration
 * form), the environment (CODEHOP_CHAT_*), then the default below. A run without a code grant
 * (a served graph's, whose context any client writes) is held to the operator's: see
 * {@link chatSettingsOf}.
 */
export const ChatSettingsSchema = z.object({
  keepRounds: z
    .number()
    .int()
    .min(0)
    .describe(
      "rounds (a user message and its reply) the agent sees verbatim; older ones are summarized",
    ),
  summaryBatch: z
    .number()
    .int()
    .min(1)
    .describe(
      "rounds folded into the summary in one call: up to keepRounds + summaryBatch - 1 rounds stay verbatim between calls",
    ),
  summaryWords: z
    .number()
    .int()
    .min(20)
    .describe("length the summary of older rounds is kept under, in words"),
  maxFileBytes: z.number().int().positive().describe("largest attachable file, in bytes"),
  maxUrlBytes: z.number().int().positive().describe("largest downloadable link, in bytes"),
  urlTimeoutMs: z.number().int().positive().describe("deadline for downloading a link, in ms"),
  maxRedirects: z.number().int().min(0).describe("redirects followed when downloading a link"),
  filesRetentionDays: z
    .number()
    .min(0)
    .describe("days an idle conversation's files are kept (0: until the thread is deleted)"),
  searchResults: z.number().int().min(1).max(20).describe("passages search_files returns"),
});

/** Resolved chat settings. */
export type ChatSettings = z.infer<typeof ChatSettingsSchema>;

/** Defaults of every chat setting. */
export const CHAT_DEFAULTS: Readonly<ChatSettings> = {
  keepRounds: 4,
  summaryBatch: 4,
  summaryWords: 200,
  maxFileBytes: 50 * 1024 * 1024,
  maxUrlBytes: 20 * 1024 * 1024,
  urlTimeoutMs: 15_000,
  maxRedirects: 5,
  filesRetentionDays: 30,
  searchResults: 5,
};

/** Settings from the environment (CODEHOP_CHAT_*), over the defaults. */
export function chatSettingsFromEnv(env: CodehopEnv = readEnv()): ChatSettings {
  const fromEnv: Partial<ChatSettings> = {};
  if (env.chatKeepRounds !== undefined) fromEnv.keepRounds = env.chatKeepRounds;
  if (env.chatFilesRetentionDays !== undefined)
    fromEnv.filesRetentionDays = env.chatFilesRetentionDays;
  if (env.chatMaxFileMb !== undefined)
    fromEnv.maxFileBytes = Math.round(env.chatMaxFileMb * 1024 * 1024);
  if (env.chatUrlTimeoutMs !== undefined) fromEnv.urlTimeoutMs = env.chatUrlTimeoutMs;
  return resolveChatSettings(fromEnv, CHAT_DEFAULTS, "the CODEHOP_CHAT_* environment variables");
}

/**
 * `overrides` over `base`, validated: CODEHOP_CONFIG_INVALID naming the bad setting and `where`
 * it came from.
 */
export function resolveChatSettings(
  overrides: Partial<ChatSettings> | undefined,
  base: ChatSettings = CHAT_DEFAULTS,
  where = "the chat settings",
): ChatSettings {
  const parsed = ChatSettingsSchema.safeParse({ ...base, ...(overrides ?? {}) });
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((i) => `${i.path.join(".") || "settings"}: ${i.message}`)
      .join("; ");
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Invalid chat setting in ${where}: ${problems}`,
    );
  }
  return parsed.data;
}

// What a client of a served chat graph may set in `context.chat` (src/core/client-settings.ts):
// the conversation's own settings, and limits up to the operator's; the files' retention is the
// operator's alone (it deletes other conversations' files).
const operatorLimit = (key: (typeof LIMIT_SETTINGS)[number]) =>
  upTo(
    () => chatSettingsFromEnv()[key],
    `the operator's ${key === "maxFileBytes" ? "CODEHOP_CHAT_MAX_FILE_MB" : key === "urlTimeoutMs" ? "CODEHOP_CHAT_URL_TIMEOUT_MS" : `chat ${key}`}`,
  );
clientSettableFields(ChatSettingsSchema, {
  keepRounds: ANY_VALUE,
  summaryBatch: ANY_VALUE,
  summaryWords: ANY_VALUE,
  searchResults: ANY_VALUE,
  maxFileBytes: operatorLimit("maxFileBytes"),
  maxUrlBytes: operatorLimit("maxUrlBytes"),
  urlTimeoutMs: operatorLimit("urlTimeoutMs"),
  maxRedirects: operatorLimit("maxRedirects"),
});

/** Settings that shape one conversation only: any run may choose them. */
const CONVERSATION_SETTINGS = [
  "keepRounds",
  "summaryBatch",
  "summaryWords",
  "searchResults",
] as const;

/** Limits on what a run fetches and reads: a run without a code grant may only lower them. */
const LIMIT_SETTINGS = ["maxFileBytes", "maxUrlBytes", "urlTimeoutMs", "maxRedirects"] as const;

// Every other setting (filesRetentionDays: it deletes other conversations' files) is the
// operator's alone when the run has no code grant.

/**
 * The settings of a run: its run context's `chat` over the environment's. Code that puts a grant
 * in the run context (`chatAccess`: the CLI, `chat()`) chooses every setting. A run without one —
 * a served graph's, whose context comes from any client of the server — may choose the
 * conversation's own settings (keepRounds, summaryBatch, summaryWords, searchResults), only lower
 * the limits (maxFileBytes, maxUrlBytes, urlTimeoutMs, maxRedirects), and gets the operator's
 * filesRetentionDays whatever it asks. An invalid value is CODEHOP_CONFIG_INVALID either way.
 */
export function chatSettingsOf(config: RunnableConfig | undefined): ChatSettings {
  const context = readRunContext(config) as { chat?: Partial<ChatSettings>; chatAccess?: unknown };
  const operator = chatSettingsFromEnv();
  const asked = resolveChatSettings(context.chat, operator, "the run context's `chat`");
  if (isChatAccessGrant(context.chatAccess)) return asked;
  const settings: ChatSettings = { ...operator };
  for (const key of CONVERSATION_SETTINGS) settings[key] = asked[key];
  for (const key of LIMIT_SETTINGS) settings[key] = Math.min(operator[key], asked[key]);
  return settings;
}
