import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, type BaseMessage, HumanMessage, SystemMessage } from "@langchain/core/messages";
import { callModel, contentText, messageText } from "../../../core/models.ts";
import { NOSTREAM_TAG } from "../../../core/pregel-internals.ts";
import { type UsageTotals, usageFromMessage } from "../../../core/usage.ts";
import { renderPrompt } from "../../../prompts/render.ts";
import type { ConversationSummary } from "./state.ts";

/**
 * What the chat agent remembers of earlier rounds (round-based retention): the last
 * `keepRounds` rounds verbatim, everything older folded into one rolling summary by a model call
 * (prompts/chat_memory/) as rounds leave the verbatim window — `summaryBatch` of them per call. The record — every message — stays in
 * the `messages` channel; this is only the view the agent is given, so changing `keepRounds`
 * changes what the next round sees, never what is stored.
 */

/** One round: a user message and the assistant's reply (absent while it is being answered). */
export interface Round {
  user: string;
  reply?: string;
}

/** additional_kwargs key marking a round's open reply (see {@link openRoundMessage}). */
const OPEN_ROUND = "codehop_open_round";

/**
 * The empty assistant message a round starts with when its agent may pause for an approval:
 * chat UIs (agent-chat-ui) draw a pending approval only under a last AI message, and a round
 * pauses inside its agent before it has one. The round's reply replaces it (same id). It has no
 * text, so it is no part of the dialogue (rounds, summaries, titles); a failed round leaves it.
 */
export function openRoundMessage(): AIMessage {
  return new AIMessage({
    content: "",
    id: `codehop-round-${crypto.randomUUID()}`,
    additional_kwargs: { [OPEN_ROUND]: true },
  });
}

/** Whether `message` is a round's open reply (see {@link openRoundMessage}). */
export function isOpenRoundMessage(message: BaseMessage | undefined): boolean {
  return message?.getType() === "ai" && message.additional_kwargs?.[OPEN_ROUND] === true;
}

/** The text of a message's content (the text parts of a multi-part message, one per line). */
export function messageContentText(message: BaseMessage): string {
  const { content } = message;
  if (!Array.isArray(content)) return contentText(content).trim();
  return content
    .map((part) => contentText(typeof part === "string" ? part : [part]).trim())
    .filter(Boolean)
    .join("\n");
}

/**
 * The rounds of a conversation: each user message opens one, the assistant messages with text
 * after it are its reply (tool messages and system messages are not part of the dialogue).
 */
export function roundsOf(messages: readonly BaseMessage[]): Round[] {
  const rounds: Round[] = [];
  for (const m of messages) {
    const type = m.getType();
    if (type === "human") rounds.push({ user: messageContentText(m) });
    else if (type === "ai" && rounds.length && !isOpenRoundMessage(m)) {
      const text = messageContentText(m);
      if (!text) continue;
      const round = rounds[rounds.length - 1];
      round.reply = round.reply ? `${round.reply}\n${text}` : text;
    }
  }
  return rounds;
}

/** The rounds answered before the last one, and the last user message (the one to answer). */
export function currentTurn(messages: readonly BaseMessage[]): {
  earlier: Round[];
  message: string;
} {
  const rounds = roundsOf(messages);
  const last = rounds[rounds.length - 1];
  if (!last || last.reply !== undefined) return { earlier: rounds, message: "" };
  return { earlier: rounds.slice(0, -1), message: last.user };
}

/**
 * Rounds to fold into the summary now: none until `batch` rounds beyond the last `keepRounds` are
 * unsummarized, then all of them (so one summary call covers `batch` rounds, and between calls the
 * agent sees from `keepRounds` up to `keepRounds + batch - 1` rounds verbatim).
 */
export function roundsToSummarize(
  earlier: readonly Round[],
  summary: ConversationSummary,
  keepRounds: number,
  batch = 1,
): Round[] {
  const from = Math.min(summary.rounds, earlier.length);
  const to = Math.max(0, earlier.length - keepRounds);
  return to - from >= Math.max(1, batch) ? earlier.slice(from, to) : [];
}

/** Longest verbatim message the view keeps (longer ones are cut with a note). */
const MAX_VERBATIM_CHARS = 4_000;

function clipped(text: string): string {
  return text.length > MAX_VERBATIM_CHARS
    ? `${text.slice(0, MAX_VERBATIM_CHARS)}… (${text.length - MAX_VERBATIM_CHARS} more characters)`
    : text;
}

/** Rounds as a transcript ("User: ...\nAssistant: ..."). */
export function transcript(rounds: readonly Round[]): string {
  return rounds
    .map(
      (r) =>
        `User: ${clipped(r.user)}${r.reply !== undefined ? `\nAssistant: ${clipped(r.reply)}` : ""}`,
    )
    .join("\n");
}

/**
 * The conversation as the agent sees it this round: the summary of older rounds, then the rounds
 * it does not cover, verbatim ("" for the first round).
 */
export function renderConversation(
  earlier: readonly Round[],
  summary: ConversationSummary,
): string {
  // Every round the summary does not cover: the summarize step keeps that to the window.
  const verbatim = earlier.slice(summary.rounds);
  const parts: string[] = [];
  if (summary.text.trim())
    parts.push(`Summary of the earlier conversation:\n${summary.text.trim()}`);
  if (verbatim.length)
    parts.push(
      `${summary.text.trim() ? "Recent conversation" : "The conversation so far"}:\n${transcript(verbatim)}`,
    );
  return parts.length ? `${parts.join("\n\n")}\n\n` : "";
}

/** A summary cut to about `words` words. */
function capWords(text: string, words: number): string {
  const all = text.trim().split(/\s+/);
  return all.length <= words ? text.trim() : `${all.slice(0, words).join(" ")} …`;
}

/**
 * The summary without a model: the previous one plus each round's first sentence (when the
 * summarizer returned nothing usable), so no round is forgotten silently.
 */
export function extractiveSummary(previous: string, rounds: readonly Round[]): string {
  const first = (text: string) => {
    const t = text.replace(/\s+/g, " ").trim();
    const m = /^(.{8,240}?[.!?])(\s|$)/.exec(t);
    return m ? m[1] : t.slice(0, 240);
  };
  const lines = rounds.map(
    (r) =>
      `The user asked: ${first(r.user)}${r.reply ? ` The assistant answered: ${first(r.reply)}` : ""}`,
  );
  return [previous.trim(), ...lines].filter(Boolean).join("\n");
}

/**
 * Folds `rounds` into `summary` with one model call; returns the new summary and the call's usage.
 * An empty reply falls back to {@link extractiveSummary}; the result is capped at 1.5× the word
 * budget (small models overrun it).
 */
export async function summarize(
  model: BaseChatModel,
  summary: ConversationSummary,
  rounds: readonly Round[],
  options: { words: number; signal?: AbortSignal; agentName: string },
): Promise<{ summary: ConversationSummary; usage: UsageTotals }> {
  const messages = [
    new SystemMessage(renderPrompt("chat_memory/summarize.md", { max_words: options.words })),
    new HumanMessage(
      renderPrompt("chat_memory/summarize_request.md", {
        summary: summary.text.trim() || "(none yet)",
        exchanges: transcript(rounds),
      }),
    ),
  ];
  const reply = await callModel(model, messages, {
    agentName: options.agentName,
    // Not a reply: chat UIs streaming "messages" must not show it.
    tags: [NOSTREAM_TAG],
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const text = messageText(reply).trim();
  const next = text ? text : extractiveSummary(summary.text, rounds);
  return {
    summary: {
      text: capWords(next, Math.ceil(options.words * 1.5)),
      rounds: summary.rounds + rounds.length,
    },
    usage: usageFromMessage(reply),
  };
}
