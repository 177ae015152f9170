import {
  BaseChatModel,
  type BaseChatModelCallOptions,
} from "@langchain/core/language_models/chat_models";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { messageText } from "../core/models.ts";

/** A reply of {@link ScriptedChatModel}: text, or a (possibly async) function of the messages; a function may throw to simulate an endpoint failure. */
export type ScriptedChatReply = string | ((messages: BaseMessage[]) => string | Promise<string>);

/** One recorded call. */
export interface ScriptedChatCall {
  messages: BaseMessage[];
  stop?: string[];
}

const text = (message: BaseMessage): string => messageText(message);

/**
 * In-process chat model for node tests and overhead benchmarks: replays replies in order (the last
 * one repeats), cuts them at the stop sequences like a real server, records the messages and stop
 * sequences it received, and reports usage (≈ 4 characters per token). `delayMs` simulates latency.
 * (LangChain's FakeListChatModel returns `stop[0]` instead of cutting, so it can't drive an agent.)
 */
export class ScriptedChatModel extends BaseChatModel {
  readonly calls: ScriptedChatCall[] = [];
  private next = 0;

  constructor(
    private readonly replies: ScriptedChatReply[],
    private readonly delayMs = 0,
  ) {
    super({});
    if (!replies.length) throw new Error("ScriptedChatModel needs at least one reply");
  }

  _llmType(): string {
    return "scripted";
  }

  async _generate(
    messages: BaseMessage[],
    options: this["ParsedCallOptions"],
  ): Promise<ChatResult> {
    const stop = (options as BaseChatModelCallOptions).stop;
    this.calls.push({ messages, stop });
    const reply = this.replies[Math.min(this.next++, this.replies.length - 1)];
    let out = typeof reply === "function" ? await reply(messages) : reply;
    for (const s of stop ?? []) {
      const i = out.indexOf(s);
      if (i !== -1) out = out.slice(0, i);
    }
    if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
    const input = Math.ceil(messages.map(text).join("\n").length / 4);
    const output = Math.ceil(out.length / 4);
    const message = new AIMessage({
      content: out,
      usage_metadata: { input_tokens: input, output_tokens: output, total_tokens: input + output },
    });
    return { generations: [{ text: out, message }] };
  }
}
