import type { RunnableConfig } from "@langchain/core/runnables";
import { z } from "zod";
import { clientSettable } from "../../../core/client-settings.ts";
import { readRunContext, RunContextSchema } from "../../../core/run-context.ts";
import { CodehopError, ErrorCodes } from "../../../errors.ts";
import { isChatAccessGrant, type ChatAccess } from "./access.ts";
import { ChatFiles } from "./knowledge-base.ts";
import { ChatSettingsSchema, type ChatSettings } from "./settings.ts";

declare module "../../../core/run-context.ts" {
  interface RunContext {
    /** Chat: where conversations keep their attached files (one index per thread). */
    chatFiles?: ChatFiles;
    /** Chat: settings for this run over the environment's (see src/apps/chat/settings.ts). */
    chat?: Partial<ChatSettings>;
    /**
     * Chat: stream the chat agent's own steps (its subgraph's updates) to the caller, as the CLI's
     * live tree wants. Off by default: chat UIs that stream subgraphs (agent-chat-ui) would take the
     * agent's state for the conversation's.
     */
    streamAgentSteps?: boolean;
    /**
     * Chat: what the run may reach on its machine (local paths, private addresses): a grant made
     * by `grantChatAccess` (src/apps/chat/conversation/access.ts); the CLI and `chat()` set it.
     */
    chatAccess?: ChatAccess;
  }
}

const isObject = (v: unknown) => typeof v === "object" && v !== null;

/** The chat app's run-context schema: the framework's plus the chat keys (Studio shows `chat`). */
export const ChatRunContextSchema = RunContextSchema.extend({
  chat: ChatSettingsSchema.partial()
    .optional()
    .describe(
      "chat settings for this run (keepRounds, summaryWords, ...); without a code grant, limits may only be lowered and the retention is the operator's",
    ),
  chatFiles: z.custom<ChatFiles>(isObject, "a ChatFiles store").optional(),
  streamAgentSteps: clientSettable(
    z.boolean().optional().describe("stream the chat agent's own steps to the caller"),
  ),
  chatAccess: z
    .custom<ChatAccess>(isChatAccessGrant, "a grant made by grantChatAccess (code only)")
    .optional()
    .describe("what the run may reach on its machine: a grant made by grantChatAccess (code only)"),
});

/** What the chat graph's nodes need to find a run's file store when the run names none. */
export interface ChatFilesDeps {
  /** A store for every run of this graph (wins over nothing: the run context's wins over it). */
  files?: ChatFiles;
  /** The environment's store, opened on first use (the langgraph.json entry gives it). */
  fallbackFiles?: () => ChatFiles;
  /**
   * What every run of this graph may reach on its machine (a `grantChatAccess` grant) when its
   * run context grants nothing; without one, a served graph's default (see access.ts).
   */
  access?: ChatAccess;
}

/** The file store of a run: the run context's, else the graph's, else the fallback. */
export function chatFilesOf(config: RunnableConfig | undefined, deps: ChatFilesDeps): ChatFiles {
  const files = readRunContext(config).chatFiles ?? deps.files ?? deps.fallbackFiles?.();
  if (!files) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      "The chat graph has no file store: give the run context `chatFiles` (new ChatFiles(home)) or build the graph with `files`.",
    );
  }
  return files;
}

/** The thread a run belongs to (conversations are per thread). */
export function threadIdOf(config: RunnableConfig | undefined): string {
  const id = config?.configurable?.thread_id;
  if (typeof id !== "string" || !id) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      "The chat graph needs a thread: invoke it with `configurable: { thread_id }` and a checkpointer.",
    );
  }
  return id;
}
