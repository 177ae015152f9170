import type { BaseMessage } from "@langchain/core/messages";
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
