import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { BaseCheckpointSaver, StateSnapshot } from "@langchain/langgraph";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { CodehopError, ErrorCodes } from "../../errors.ts";
import type { AppGraph, RunApp, RunOptions } from "../../runs/app.ts";
import { loadAppConfig, persistenceLocation, type AppConfig } from "../../runs/config.ts";
import { resumeRun, runTurn } from "../../runs/lifecycle.ts";
import { pendingApprovals, type ApprovalDecision } from "../../core/approval.ts";
import type { AskResult } from "../../runs/result.ts";
import type { RecordingApp } from "../../runs/thread-record.ts";
import type { CodeTool } from "../../tools/define-tool.ts";
import { LOCAL_USER_ACCESS } from "./conversation/access.ts";
import {
  attachAll,
  toAttachmentInput,
  type AttachmentInput,
  type AttachmentResult,
} from "./conversation/attachments.ts";
import type { Citation } from "./conversation/citations.ts";
import { ChatFiles, type ThreadFile } from "./conversation/knowledge-base.ts";
import {
  isOpenRoundMessage,
  messageContentText,
  roundsOf,
  type Round,
} from "./conversation/memory.ts";
import { openPersistenceFor } from "../../persistence/open.ts";
import { checkpointDbPath } from "../../persistence/sqlite-database.ts";
import type { Persistence } from "../../persistence/port.ts";
import {
  chatSettingsFromEnv,
  resolveChatSettings,
  type ChatSettings,
} from "./conversation/settings.ts";
import { CHAT_RECURSION_LIMIT, chatTeam, createChatGraph } from "./team.ts";

/** The chat app's name and what its threads record (nothing beyond the app and model names). */
export const chatRecording: RecordingApp = { name: "chat", record: () => ({}) };

/** What a chat round returns (and `codehop chat --json` prints per round). */
export interface ChatResult extends AskResult {
  /** The assistant's reply to the message (= `answer`). */
  reply: string;
  /** Rounds answered in the thread so far. */
  round: number;
  /** Passages of attached files the reply cites (file, page or section, label). */
  citations: Citation[];
  /** What attaching this round's files and links did, one result each. */
  attachments: AttachmentResult[];
  /**
   * Pending interrupts (LangGraph's): a tool call waiting for approval is one, also given as
   * `approval` (status "awaiting_approval"); answer it with `chat(threadId, "", { approval })`.
   */
  interrupts: Array<{ id?: string; value: unknown }>;
}

function lastReply(messages: readonly BaseMessage[]): BaseMessage | undefined {
  const last = messages[messages.length - 1];
  return last?.getType() === "ai" && !isOpenRoundMessage(last) ? last : undefined;
}

/** The chat-specific fields of a round's result, from the thread's latest state. */
export function chatResultFields(
  snapshot: StateSnapshot,
): Pick<
  ChatResult,
  | "answer"
  | "reply"
  | "status"
  | "sources"
  | "steps"
  | "round"
  | "citations"
  | "attachments"
  | "interrupts"
> {
  const values = (snapshot.values ?? {}) as Record<string, any>;
  const messages: BaseMessage[] = Array.isArray(values.messages) ? values.messages : [];
  const reply = lastReply(messages);
  const text = reply ? messageContentText(reply) : "";
  const citations = (reply?.additional_kwargs?.citations as Citation[] | undefined) ?? [];
  const interrupts = (snapshot.tasks ?? []).flatMap((t) =>
    (t.interrupts ?? []).map((i) => ({ ...(i.id ? { id: i.id } : {}), value: i.value })),
  );
  const rounds = roundsOf(messages).filter((r) => r.reply !== undefined).length;
  return {
    answer: text,
    reply: text,
    status: pendingApprovals(snapshot).length
      ? "awaiting_approval"
      : interrupts.length
        ? "waiting"
        : snapshot.next.length
          ? "interrupted"
          : reply
            ? "done"
            : "unknown",
    sources: citations.map((c) => ({ title: c.file, ...c })),
    steps: rounds,
    round: rounds,
    citations,
    attachments: Array.isArray(values.attachments) ? values.attachments : [],
    interrupts,
  };
}

/**
 * The chat app for the run lifecycle: each round, a user message (and files or links) in, the
 * chat agent's reply out, on a thread that keeps the conversation. `codehop resume` continues a
 * stopped round like any thread's.
 */
export const chatApp: RunApp = {
  ...chatRecording,
  multiTurn: true,
  team: chatTeam,
  graph: (checkpointer: BaseCheckpointSaver) => createChatGraph({ checkpointer }) as AppGraph,
  recursionLimit: CHAT_RECURSION_LIMIT,
  input: (text) => ({ messages: [new HumanMessage(text)] }),
  inputText: (input) => {
    const messages = (input.messages ?? []) as BaseMessage[];
    const last = [...messages].reverse().find((m) => m.getType?.() === "human");
    return last ? messageContentText(last) : "";
  },
  async openServices(config: AppConfig) {
    return {
      // The user's own machine: local paths and private addresses may be attached.
      context: {
        chatFiles: new ChatFiles(config.home, { embeddings: config.embeddings }),
        chatAccess: LOCAL_USER_ACCESS,
      },
      close: async () => {},
    };
  },
  shapeResult: (snapshot) => chatResultFields(snapshot),
  async deleteThread(config, threadId) {
    return new ChatFiles(config.home).deleteThread(threadId);
  },
};

/** Options of {@link chat}. */
export interface ChatOptions extends RunOptions {
  /** Local files to attach this round (PDF, DOCX, HTML, Markdown, text). */
  files?: readonly string[];
  /** Links to attach this round (fetched with the settings' timeout and size limits). */
  urls?: readonly string[];
  /** Chat settings for this round (keepRounds, summaryWords, limits ...), over the environment's. */
  settings?: Partial<ChatSettings>;
  /** Tools the chat agent gets this round besides search_files (e.g. MCP tools). */
  tools?: readonly CodeTool<any>[];
  /** Stream the chat agent's own steps to `onEvent` (the CLI's live tree). */
  streamAgentSteps?: boolean;
  /**
   * The decision on the tool call the conversation waits for (`result.approval`):
   * `{ decision: "approve" }`, `{ decision: "reject", reason }` or `{ decision: "edit", args }`.
   * The paused round then goes on (the message is ignored); nothing it had finished runs again.
   */
  approval?: ApprovalDecision;
}

/**
 * One round of a conversation: attaches `files` and `urls` to the thread's knowledge base, then the
 * chat agent answers `message` with the conversation so far (the last rounds verbatim, older ones
 * summarized) and the attached files (`search_files`, answers cite file and page or section).
 * Every step is checkpointed on `threadId` (a new conversation when it has none). A file or link
 * that cannot be attached is reported in `attachments` and the round goes on.
 */
export async function chat(
  threadId: string | undefined,
  message: string,
  options: ChatOptions = {},
): Promise<ChatResult> {
  const { files = [], urls = [], settings, tools, streamAgentSteps, approval, ...run } = options;
  if (!approval && !message.trim()) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      "The message is empty: write something to the assistant.",
    );
  }
  if (settings) resolveChatSettings(settings, chatSettingsFromEnv(), "the `settings` option");
  const attach: AttachmentInput[] = [
    ...files.map((path) => ({ path })),
    ...urls.map((url) => ({ url })),
  ];
  const context = {
    ...run.context,
    ...(settings ? { chat: settings } : {}),
    ...(tools
      ? {
          agentTools: {
            ...run.context?.agentTools,
            chat: [...(run.context?.agentTools?.chat ?? []), ...tools],
          },
        }
      : {}),
    ...(streamAgentSteps ? { streamAgentSteps } : {}),
  };
  if (approval) {
    if (!threadId)
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        "An approval answers a thread: give its id.",
      );
    return (await resumeRun(chatApp, threadId, { ...run, context, approval })) as ChatResult;
  }
  const input = { messages: [new HumanMessage(message)], ...(attach.length ? { attach } : {}) };
  const result = await runTurn(chatApp, message, input, {
    ...run,
    threadId: threadId || randomUUID(),
    context,
  });
  return result as ChatResult;
}

/** Options of the thread-file helpers. */
export type ChatFilesOptions = Pick<RunOptions, "config">;

function filesOf(options: ChatFilesOptions): ChatFiles {
  const config = loadAppConfig(options.config);
  return new ChatFiles(config.home, { embeddings: config.embeddings });
}

/**
 * Attaches files (paths) and links (http(s) URLs) to a conversation's knowledge base now, outside
 * a round (the next round's agent sees them). One result per input, failures included.
 */
export async function attachToThread(
  threadId: string,
  paths: readonly string[],
  options: ChatFilesOptions & { settings?: Partial<ChatSettings>; signal?: AbortSignal } = {},
): Promise<AttachmentResult[]> {
  const settings = resolveChatSettings(options.settings, chatSettingsFromEnv());
  return attachAll(filesOf(options), threadId, paths.map(toAttachmentInput), settings, {
    signal: options.signal,
    access: LOCAL_USER_ACCESS,
  });
}

/** The files attached to a conversation, in the order they were attached. */
export function threadFiles(threadId: string, options: ChatFilesOptions = {}): ThreadFile[] {
  return filesOf(options).list(threadId);
}

/** Removes one file (by name) from a conversation's knowledge base; false if it had none. */
export function removeThreadFile(
  threadId: string,
  name: string,
  options: ChatFilesOptions = {},
): boolean {
  return filesOf(options).remove(threadId, name);
}

/**
 * A conversation's rounds so far (each user message and the reply), read from the thread's latest
 * checkpoint; none for a thread that does not exist.
 */
export async function chatHistory(
  threadId: string,
  options: ChatFilesOptions & { persistence?: Persistence } = {},
): Promise<Round[]> {
  const location = persistenceLocation(loadAppConfig(options.config));
  // Nothing has run here yet: no history. Any other failure (a database that cannot be opened
  // or read) is reported, not taken for an empty conversation.
  if (!options.persistence && !location.databaseUrl && !existsSync(checkpointDbPath(location.home)))
    return [];
  const persistence = options.persistence ?? (await openPersistenceFor(location));
  try {
    const snapshot = await chatApp
      .graph(persistence.checkpointer)
      .getState({ configurable: { thread_id: threadId } });
    const messages = (snapshot.values as { messages?: BaseMessage[] } | undefined)?.messages;
    return roundsOf(messages ?? []);
  } finally {
    if (!options.persistence) await persistence.close();
  }
}
