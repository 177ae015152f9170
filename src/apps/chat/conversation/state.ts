import {
  coerceMessageLikeToMessage,
  type BaseMessage,
  type BaseMessageLike,
} from "@langchain/core/messages";
import { Annotation, messagesStateReducer, type Messages } from "@langchain/langgraph";
import { EphemeralValue } from "@langchain/langgraph/channels";
import { type UsageByAgent, mergeUsage } from "../../../core/usage.ts";
import type { AttachmentInput, AttachmentResult } from "./attachments.ts";

/** The summary of the rounds older than the verbatim window. */
export interface ConversationSummary {
  /** The summary text ("" before any round was summarized). */
  text: string;
  /** How many rounds, from the first, it covers. */
  rounds: number;
}

/**
 * State of the `chat` graph: the conversation, in LangChain's `messages` channel, so the LangGraph
 * SDK's streaming hooks and chat UIs (agent-chat-ui) read and write it like any chat graph's. The
 * code agent that answers each round keeps its own steps in its subgraph's checkpoints; only its
 * reply enters the conversation.
 */
export const ChatState = Annotation.Root({
  /**
   * The conversation: the user's messages and the assistant's replies. LangGraph's
   * `messagesStateReducer`: appends, replaces a message with the same id, removes on
   * RemoveMessage. Written by the input (a user message), by `attach_files` (an uploaded file's bytes
   * replaced by a note) and by `respond` (the reply).
   */
  messages: Annotation<BaseMessage[], Messages>({
    reducer: messagesStateReducer,
    default: () => [],
  }),
  /**
   * Files and links to attach this round (input only). Ephemeral: read by `attach_files` in the round's
   * first step, gone afterwards, so a later round never attaches them again.
   */
  attach: new EphemeralValue<AttachmentInput[]>(),
  /** What attaching this round's files did, one result each. Last value; written by `attach_files` every round. */
  attachments: Annotation<AttachmentResult[]>({
    reducer: (_left, right) => right,
    default: () => [],
  }),
  /**
   * The summary of the rounds older than the ones the agent sees verbatim. Last value; written by
   * `summarize` when rounds leave the verbatim window.
   */
  summary: Annotation<ConversationSummary>({
    reducer: (_left, right) => right,
    default: () => ({ text: "", rounds: 0 }),
  }),
  /** Tokens and model calls per agent name over the whole conversation; reducer sums. */
  usage: Annotation<UsageByAgent>({
    reducer: (left, right) => mergeUsage(left, right),
    default: () => ({}),
  }),
});

/** The chat graph's input: a user message (or a few) and, optionally, files and links to attach. */
export const ChatInput = Annotation.Root({
  messages: ChatState.spec.messages,
  attach: ChatState.spec.attach,
});

/** Chat state as nodes read it. */
export type ChatStateValue = typeof ChatState.State;
/** A node's update of the chat state. */
export type ChatUpdate = typeof ChatState.Update;

/** What the chat graph's input looks like, in one line (its input errors say it). */
const CHAT_INPUT_SHAPE =
  '{ messages: [{ role: "user", content: "..." }], attach?: [{ path } | { url } | { name, data }] }';

/**
 * The problems of a chat graph input, one `path: what is wrong` each: `messages` must be message
 * likes LangChain can read (a string, `{ role, content }`, a message), `attach` a list of
 * `{ path }`, `{ url }` or `{ name, data }`. Without it a malformed input reached the messages
 * reducer or the attach node as a raw TypeError.
 */
export function chatInputProblems(input: unknown): string[] {
  if (typeof input !== "object" || input === null || Array.isArray(input))
    return ["input: expected an object"];
  const { messages, attach } = input as { messages?: unknown; attach?: unknown };
  const problems: string[] = [];
  if (messages !== undefined) {
    const list = Array.isArray(messages) ? messages : [messages];
    list.forEach((m, i) => {
      const at = Array.isArray(messages) ? `messages.${i}` : "messages";
      try {
        coerceMessageLikeToMessage(m as BaseMessageLike);
      } catch {
        problems.push(`${at}: not a message (give { role: "user", content: "..." })`);
      }
    });
  }
  if (attach !== undefined) {
    if (!Array.isArray(attach)) problems.push("attach: expected a list of files or links");
    else
      attach.forEach((a, i) => {
        const o = (typeof a === "object" && a !== null ? a : {}) as Record<string, unknown>;
        const ok =
          typeof o.path === "string" ||
          typeof o.url === "string" ||
          (typeof o.name === "string" && typeof o.data === "string");
        if (!ok) problems.push(`attach.${i}: expected { path }, { url } or { name, data }`);
      });
  }
  return problems;
}

/** The chat graph's input check (see `reportInputErrorsCoded`). */
export const CHAT_INPUT_CHECK = { problems: chatInputProblems, expected: CHAT_INPUT_SHAPE };
