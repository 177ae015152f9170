import { HumanMessage, SystemMessage } from "@langchain/core/messages";
import { createHash } from "node:crypto";
import { loadPrompt, renderPrompt } from "../prompts/render.ts";
import type { KnowledgeSource, Passage } from "../store/types.ts";
import type { EvalExample } from "./types.ts";
import {
  extractAnswer,
  type EvalChatModel,
  type EvalSystem,
  type SystemAnswer,
  type SystemContext,
} from "./system.ts";
import { contentText } from "../core/models.ts";

/** Short content hash of a prompt, so reports show at a glance whether two runs used the same one. */
export function promptHash(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 12);
}

/** `direct`: the model answers from its own knowledge, one call, no retrieval. */
export function createDirectSystem(model: EvalChatModel): EvalSystem {
  const system = loadPrompt("eval/direct.md");
  return {
    name: "direct",
    config: {
      prompts: { system: "eval/direct.md", user: "eval/question.md" },
      promptHash: promptHash(system + loadPrompt("eval/question.md")),
    },
    async answer(example: EvalExample, ctx: SystemContext): Promise<SystemAnswer> {
      const res = await model.invoke(
        [
          new SystemMessage(system),
          new HumanMessage(renderPrompt("eval/question.md", { question: example.question })),
        ],
        {
          callbacks: [ctx.recorder],
          signal: ctx.signal,
          metadata: { codehop_agent: "direct", thread_id: ctx.threadId },
        },
      );
      return { answer: extractAnswer(contentText(res.content)), sources: [], steps: 1 };
    },
  };
}

/** Renders retrieved passages for the `rag` prompt. */
export function formatPassages(passages: Passage[]): string {
  if (passages.length === 0) return "(no passages found)";
  return passages
    .map((p, i) => `[${i + 1}] ${p.title}${p.section ? ` — ${p.section}` : ""}\n${p.text.trim()}`)
    .join("\n\n");
}

/** `rag`: one retrieval of the top-k passages for the question, then one answer. */
export function createRagSystem(
  model: EvalChatModel,
  source: KnowledgeSource,
  options: { k?: number } = {},
): EvalSystem {
  const k = options.k ?? 5;
  const system = loadPrompt("eval/rag.md");
  if (!source.searchPassages) {
    throw new Error(
      `The ${source.kind} knowledge source has no searchPassages(); the rag baseline needs a corpus`,
    );
  }
  const search = source.searchPassages.bind(source);
  return {
    name: "rag",
    config: {
      k,
      source: source.kind,
      prompts: { system: "eval/rag.md", user: "eval/rag-question.md" },
      promptHash: promptHash(system + loadPrompt("eval/rag-question.md")),
    },
    async answer(example: EvalExample, ctx: SystemContext): Promise<SystemAnswer> {
      const passages = await search(example.question, { k });
      ctx.signal.throwIfAborted();
      const user = renderPrompt("eval/rag-question.md", {
        question: example.question,
        passages: formatPassages(passages),
      });
      const res = await model.invoke([new SystemMessage(system), new HumanMessage(user)], {
        callbacks: [ctx.recorder],
        signal: ctx.signal,
        metadata: { codehop_agent: "rag", thread_id: ctx.threadId },
      });
      return {
        answer: extractAnswer(contentText(res.content)),
        sources: [...new Set(passages.map((p) => p.title))],
        steps: 1,
      };
    },
  };
}
