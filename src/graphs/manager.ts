import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { z } from "zod";
import { sourceFromConfig } from "../app/source.ts";
import type { KnowledgeSource } from "../store/types.ts";
import { defineTool, type CodeTool } from "../tools/define-tool.ts";
import { createCodeAgent, type CodeAgent, type CodeAgentOptions } from "./code-agent.ts";
import type { ReferenceAgentOptions } from "./page-search.ts";
import { createWikipediaSearchAgent } from "./wikipedia-search.ts";

/** Manager actions before its max-steps policy ("final_answer_prompt") applies. */
export const MANAGER_MAX_STEPS = 8;
/**
 * Recursion limit of a manager run: LangGraph counts super-steps of the root graph only (nested
 * agents have their own limits), 4 per action plus planning / final-answer steps.
 */
export const MANAGER_RECURSION_LIMIT = MANAGER_MAX_STEPS * 4 + 12;

/** Input of the manager graph (the app, Studio): the user's question. */
export const ManagerInput = z.object({
  question: z.string().describe("the question to answer"),
});

/** The manager's createCodeAgent options (the agent's input is `{ task }`). */
function managerOptions(options: ReferenceAgentOptions): CodeAgentOptions & { input?: undefined } {
  const wiki = createWikipediaSearchAgent(options);
  const wikiTool = wiki.asTool({
    name: "wikipedia_search_agent",
    description:
      "Asks the Wikipedia search agent one self-contained question (it does not see your task). Returns a short answer with the fact(s) found and the source page(s).",
    parameters: z.object({
      query: z.string().min(1).describe("a complete, self-contained question"),
    }),
    toInput: ({ query }) => ({ task: query }),
  });
  return {
    name: "manager",
    description:
      "answers multi-hop questions by delegating look-ups to a Wikipedia search agent and computing in code",
    prompts: "manager",
    tools: ({ config }) => [withCitedSources(wikiTool, sourceFromConfig(config, options.source))],
    subgraphs: wikiTool.subgraphs,
    maxSteps: MANAGER_MAX_STEPS,
    maxStepsPolicy: "final_answer_prompt",
    model: options.model,
    sandbox: options.sandbox,
  };
}

/**
 * manager: breaks the question into sub-questions for `wikipedia_search_agent(query)` (parallel
 * ones with Promise.all), computes in code, and ends with final_answer. Input `{ task }`, like any
 * code agent (the app's `{ question }` graph is {@link createManagerBuilder}).
 */
export function createManagerAgent(options: ReferenceAgentOptions = {}): CodeAgent {
  return createCodeAgent(managerOptions(options));
}

/**
 * Reports the pages a wikipedia_search answer cites ("Source: <title>", "Sources: A, B") as sources
 * of the run, when such a page exists — the pages it read in detail are reported by search_info.
 */
function withCitedSources(tool: CodeTool<any>, source: KnowledgeSource): CodeTool<any> {
  return defineTool({
    ...tool,
    invoke: async (args, ctx) => {
      const answer = await tool.invoke(args, ctx);
      if (typeof answer !== "string") return answer;
      const titles = new Set<string>();
      for (const m of answer.matchAll(/Sources?:\s*([^\n]+)/gi)) {
        titles.add(m[1].trim().replace(/[.]+$/, ""));
        for (const t of m[1].split(/[;,]/)) {
          const title = t
            .trim()
            .replace(/^["'“]|["'”.]+$/g, "")
            .trim();
          if (title) titles.add(title);
        }
      }
      const found: Array<Record<string, string>> = [];
      for (const title of titles) {
        const lookup = await source.getPage(title).catch(() => undefined);
        if (lookup?.status === "found") {
          found.push({
            title: lookup.page.title,
            ...(lookup.page.url ? { url: lookup.page.url } : {}),
          });
        }
      }
      if (found.length) ctx.report?.({ sources: found });
      return answer;
    },
  });
}

/** Options of {@link createManagerGraph}. */
export interface ManagerGraphOptions extends ReferenceAgentOptions {
  /** Checkpointer (the app passes SqliteSaver; omit for langgraph.json). */
  checkpointer?: BaseCheckpointSaver;
}

/**
 * Uncompiled manager graph: input `{ question }`; state = the manager agent's state (answer,
 * sources, usage per agent rolled up from the sub-agents, steps, variables ...) plus `question`.
 */
export function createManagerBuilder(options: ReferenceAgentOptions = {}) {
  return createCodeAgent({
    ...managerOptions(options),
    // A `start` node copies the question into the task in the manager's own graph, so every
    // manager step is a root checkpoint (history, replay, forks).
    input: { schema: ManagerInput, toTask: ({ question }) => ({ task: question }) },
  }).builder;
}

/**
 * The three-agent system as one graph: `graph.invoke({ question }, { configurable: { thread_id } })`
 * returns `{ answer, sources, usage, ... }`; `graph.stream(..., { subgraphs: true })` yields the
 * nested agents' progress.
 */
export function createManagerGraph(options: ManagerGraphOptions = {}) {
  const { checkpointer, ...agentOptions } = options;
  const graph = createManagerBuilder(agentOptions).compile({ checkpointer });
  graph.name = "manager";
  return graph;
}

/** manager for langgraph.json (no checkpointer; the LangGraph server attaches its own). */
export const graph = createManagerGraph();
