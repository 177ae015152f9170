import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { sourceFromConfig } from "../app/source.ts";
import { createCodeAgent, type CodeAgent } from "./code-agent.ts";
import type { CodeSandbox } from "../sandbox/contract.ts";
import type { KnowledgeSource } from "../store/types.ts";
import { createRetrievePassagesTool } from "../tools/retrieve-passages.ts";

/** Options shared by the three reference agents. */
export interface ReferenceAgentOptions {
  /** Knowledge source (default: `configurable.knowledgeSource` of the run, else from the environment). */
  source?: KnowledgeSource;
  /** Chat model instance or name (default: resolved per run from configuration). */
  model?: string | BaseChatModel;
  /** Sandbox for code actions (default: the process-wide sandbox). */
  sandbox?: CodeSandbox;
}

/** The page agent's task for a query on one page (the seed's wording). */
export function pageSearchTask(query: string, page: string): string {
  return `Retrieve information about the query: "${query}" from the Wikipedia page "${page}".`;
}

/**
 * page_search: looks inside ONE Wikipedia page with `retrieve_passages(query)`, bound to the page
 * given as `context.page`. At most 3 actions; if it has not called final_answer by then, its last
 * observation (the passages it retrieved) is its answer ("last_observation" policy, as in the seed).
 */
export function createPageSearchAgent(options: ReferenceAgentOptions = {}): CodeAgent {
  return createCodeAgent({
    name: "page_search",
    description:
      "finds information inside one Wikipedia page by retrieving its most relevant passages",
    prompts: "page_search",
    tools: ({ context, config }) => [
      createRetrievePassagesTool(
        sourceFromConfig(config, options.source),
        String(context.page ?? ""),
      ),
    ],
    maxSteps: 3,
    maxStepsPolicy: "last_observation",
    model: options.model,
    sandbox: options.sandbox,
  });
}

/** Uncompiled page_search graph (input: `{ task, context: { page } }`). */
export function createPageSearchBuilder(options: ReferenceAgentOptions = {}) {
  return createPageSearchAgent(options).builder;
}

/** page_search for langgraph.json (no checkpointer; the LangGraph server attaches its own). */
export const graph = createPageSearchAgent().graph;
