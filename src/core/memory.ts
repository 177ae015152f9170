import { randomBytes } from "node:crypto";
import type { BaseStore } from "@langchain/langgraph";
import { z } from "zod";
import { renderPrompt } from "../prompts/render.ts";
import { type CodeTool, defineTool } from "../tools/define-tool.ts";
import { type MemorySettings, readRunContext } from "./run-context.ts";

export type { MemorySettings };

/**
 * Long-term memory as agents use it, through LangGraph's store of the run (`config.store`, which
 * the run lifecycle and `codehop worker` give every run; src/memory holds the stores):
 * - the memory tools `remember(fact, key?)`, `recall(query, limit?)`, `forget(key)`, which an
 *   agent gets by configuration (CODEHOP_MEMORY=1 for an app's root agent, `memory: true` in
 *   createCodeAgent);
 * - user facts live under `[<user>, "memories"]`, lessons of the reflection step under
 *   `[<user>, "lessons", <app>]`; the user is the run's authenticated user
 *   (`langgraph_auth_user.identity`, set by the server), else the run context's `memory.user` (the
 *   CLI's CODEHOP_USER, default "local"). A namespace starts with its user, as LangGraph's store
 *   authorization expects, so one user's memories never answer another's recall.
 */

/** The user of runs without an authenticated user or a configured one. */
export const DEFAULT_MEMORY_USER = "local";

/** Namespace label a user id becomes (LangGraph forbids `.`, `:` and NUL in labels). */
export function userLabel(user: string): string {
  const label = user.replace(/[.:\u0000]/g, "_").trim();
  return label || DEFAULT_MEMORY_USER;
}

/** The user whose memories a run reads and writes (see the module comment). */
export function memoryUserOf(config: unknown): string {
  const c = config as { configurable?: Record<string, any> } | undefined;
  const auth = c?.configurable?.langgraph_auth_user;
  const identity = typeof auth?.identity === "string" ? auth.identity : undefined;
  return userLabel(identity ?? readRunContext(c as never).memory?.user ?? DEFAULT_MEMORY_USER);
}

/** Where a user's facts live. */
export const memoriesNamespace = (user: string) => [userLabel(user), "memories"];
/** Where a user's lessons of one app live. */
export const lessonsNamespace = (user: string, app: string) => [userLabel(user), "lessons", app];

/** The store of a run, or an error the agent reads when the run has none. */
export function storeOf(config: unknown): BaseStore {
  const store = (config as { store?: BaseStore } | undefined)?.store;
  if (!store) throw new Error("Long-term memory is not available in this run (no store).");
  return store;
}

/** A remembered fact as recall returns it. */
export interface Memory {
  key: string;
  text: string;
  score?: number;
}

/** The user's facts most related to `query` (lexical or semantic, as the store ranks). */
export async function recallMemories(
  store: BaseStore,
  user: string,
  query: string,
  limit = 5,
): Promise<Memory[]> {
  const found = await store.search(memoriesNamespace(user), { query, limit });
  return found.map((i) => ({
    key: i.key,
    text: String(i.value.text ?? JSON.stringify(i.value)),
    ...(i.score === undefined ? {} : { score: Math.round(i.score * 1000) / 1000 }),
  }));
}

const KEY = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The memory tools of an agent. Their calls are tool calls of code actions like any other: the
 * call journal serves a resumed action what they returned, so a resume never writes twice.
 */
export function createMemoryTools(agentName: string): CodeTool<any>[] {
  const remember = defineTool({
    name: "remember",
    description:
      "Stores a fact about the user or their work for later conversations (one short sentence). Give a key to replace an earlier fact.",
    parameters: z.object({
      fact: z.string().min(1).max(2000).describe("the fact, one sentence"),
      key: z
        .string()
        .regex(KEY)
        .optional()
        .describe("letters, digits, - and _; default: a new one"),
    }),
    returns: "{ key: string }",
    invoke: async ({ fact, key }, ctx) => {
      const config = ctx.config as Record<string, any> | undefined;
      const store = storeOf(config);
      const id = key ?? randomBytes(4).toString("hex");
      await store.put(memoriesNamespace(memoryUserOf(config)), id, {
        text: fact.trim(),
        agent: agentName,
        thread_id: config?.configurable?.thread_id ?? null,
      });
      return { key: id };
    },
  });
  const recall = defineTool({
    name: "recall",
    description:
      "Searches what was remembered about the user in earlier conversations; returns the closest facts first.",
    parameters: z.object({
      query: z.string().min(1).max(2000).describe("what to look for"),
      limit: z.number().int().min(1).max(20).optional().describe("at most this many (default 5)"),
    }),
    returns: "Array<{ key: string, text: string, score?: number }>",
    invoke: async ({ query, limit }, ctx) =>
      recallMemories(storeOf(ctx.config), memoryUserOf(ctx.config), query, limit ?? 5),
  });
  const forget = defineTool({
    name: "forget",
    description: "Deletes a remembered fact by its key (as recall returned it).",
    parameters: z.object({ key: z.string().regex(KEY).describe("the fact's key") }),
    returns: "{ forgotten: boolean }",
    invoke: async ({ key }, ctx) => {
      const store = storeOf(ctx.config);
      const namespace = memoriesNamespace(memoryUserOf(ctx.config));
      const had = await store.get(namespace, key);
      if (had) await store.delete(namespace, key);
      return { forgotten: Boolean(had) };
    },
  });
  return [remember, recall, forget];
}

/**
 * The lessons block of the run's root agent (after its task), or "" — for sub-agents, and for runs
 * without lessons. Sub-agents get tasks of their own, which the lessons were not written for.
 */
export function lessonsNote(config: unknown): string {
  const context = readRunContext(config as never);
  if (!context.lessons?.length || context.agentPath?.length) return "";
  return renderPrompt("reflection/lessons.md", {
    lessons: context.lessons.map((l) => `- ${l}`).join("\n"),
  }).trim();
}
