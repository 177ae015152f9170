import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";

/** One scripted reply: tool calls to make, or the final text. */
export type ScriptedToolReply =
  { toolCalls: Array<{ name: string; args: Record<string, unknown> }> } | { text: string };

/**
 * In-process tool-calling chat model for benchmarks that put codehop next to LangGraph's own
 * tool-calling agent (createReactAgent): the reply is chosen from the number of tool results the
 * conversation holds so far, so the same script drives any number of runs. (LangChain's fake
 * models never produce tool calls.) `bindTools` returns the model itself: the script decides.
 */
export class ScriptedToolCallingModel extends BaseChatModel {
  calls = 0;
  private ids = 0;

  /** @param delayMs simulated model latency before each reply (default none) */
  constructor(
    private readonly reply: (toolResults: number) => ScriptedToolReply,
    private readonly delayMs = 0,
  ) {
    super({});
  }

  _llmType(): string {
    return "scripted-tool-calling";
  }

  override bindTools(): this {
    return this;
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    this.calls++;
    if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
    const toolResults = messages.filter((m) => m.getType() === "tool").length;
    const r = this.reply(toolResults);
    const message =
      "text" in r
        ? new AIMessage(r.text)
        : new AIMessage({
            content: "",
            tool_calls: r.toolCalls.map((c) => ({
              ...c,
              id: `call_${++this.ids}`,
              type: "tool_call",
            })),
          });
    return { generations: [{ text: "text" in r ? r.text : "", message }] };
  }
}
