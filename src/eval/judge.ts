import { HumanMessage, SystemMessage } from "@langchain/core/messages";
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { loadPrompt, renderPrompt } from "../prompts/render.ts";
import type { JudgeVerdict } from "./types.ts";

/**
 * LLM-as-judge: a separately configured model (CODEHOP_JUDGE_MODEL, CODEHOP_JUDGE_BASE_URL,
 * CODEHOP_JUDGE_API_KEY) decides whether a prediction means the same as the gold answer. Its
 * tokens are reported apart from the system's, so the judge never inflates a system's cost.
 */
export class AnswerJudge {
  private readonly system = loadPrompt("eval/judge.md");

  constructor(private readonly model: BaseChatModel) {}

  async judge(
    question: string,
    gold: string[],
    prediction: string,
    signal?: AbortSignal,
  ): Promise<JudgeVerdict> {
    if (!prediction.trim())
      return {
        correct: false,
        raw: "(empty prediction, not sent to the judge)",
        inputTokens: 0,
        outputTokens: 0,
      };
    const user = renderPrompt("eval/judge-question.md", {
      question,
      gold: gold.map((g) => JSON.stringify(g)).join(" | "),
      prediction: JSON.stringify(prediction),
    });
    const res = await this.model.invoke([new SystemMessage(this.system), new HumanMessage(user)], {
      signal,
    });
    const raw = (
      typeof res.content === "string" ? res.content : JSON.stringify(res.content)
    ).trim();
    return {
      correct: parseVerdict(raw),
      raw: raw.slice(0, 500),
      inputTokens: (res as any).usage_metadata?.input_tokens ?? 0,
      outputTokens: (res as any).usage_metadata?.output_tokens ?? 0,
    };
  }
}

/** CORRECT / INCORRECT (first such word wins; anything else counts as incorrect). */
export function parseVerdict(raw: string): boolean {
  const m = /\b(INCORRECT|CORRECT|WRONG|RIGHT|YES|NO)\b/i.exec(
    raw.replace(/<think>[\s\S]*?<\/think>/gi, ""),
  );
  if (!m) return false;
  return ["CORRECT", "RIGHT", "YES"].includes(m[1].toUpperCase());
}
