import { Annotation, START, StateGraph, type BaseCheckpointSaver } from "@langchain/langgraph";
import { z } from "zod";
import { sourceFromConfig } from "../app/source.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { KnowledgeSource } from "../store/types.ts";
import { defineTool, type CodeTool } from "../tools/define-tool.ts";
import { createCodeAgent, type CodeAgent } from "./code-agent.ts";
import type { ReferenceAgentOptions } from "./page-search.ts";
import { createWikipediaSearchAgent } from "./wikipedia-search.ts";

/** Manager actions before its max-steps policy ("final_answer_prompt") applies. */
export const MANAGER_MAX_STEPS = 8;
/**
 * Recursion limit of a manager run: LangGraph counts super-steps of the root graph only (nested
 * agents have their own limits), 4 per action plus planning / final-answer steps.
 */
export const MANAGER_RECURSION_LIMIT = MANAGER_MAX_STEPS * 4 + 12;

/**
 * manager: breaks the question into sub-questions for `wikipedia_search_agent(query)` (parallel
 * ones with Promise.all), computes in code, and ends with final_answer.
 */
export function createManagerAgent(options: ReferenceAgentOptions = {}): CodeAgent {
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
  return createCodeAgent({
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
  });
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

/**
 * Gives an agent's graph a `{ question }` input: a `start` node copies the question into `task`,
 * then the agent's own nodes (plan / act / observe ...) run in the SAME graph — so every manager
 * step is a root checkpoint, listed by getStateHistory and usable for replay and forks.
 */
function withQuestionInput(agent: CodeAgent) {
  // The agent's uncompiled graph: its channel definitions, nodes, edges and branches are reused
  // as they are (same channel objects, so reducers match).
  const source = agent.builder as any;
  const channels = source._schemaDefinition as Record<string, any>;
  const State = Annotation.Root({
    ...channels,
    /** The user's question (input). Last value. */
    question: Annotation<string>,
  } as any);
  const Input = Annotation.Root({ question: Annotation<string> });
  const graph = new StateGraph({ stateSchema: State, input: Input }) as any;
  graph.addNode("start", (state: { question?: string }) => ({
    task: String(state.question ?? ""),
    context: {},
  }));
  // Only what createCodeAgent uses today is carried over; fail loudly if the agent graph grows
  // features this copy would silently drop.
  const unsupported = Object.entries(source.nodes as Record<string, any>).filter(
    ([, spec]) => spec.errorHandlerNode || spec.isErrorHandler || spec.cachePolicy || spec.timeout,
  );
  if (unsupported.length || (source.waitingEdges as Set<unknown>)?.size) {
    throw new CodehopError(
      ErrorCodes.GRAPH_INVARIANT,
      `withQuestionInput cannot copy node(s) ${unsupported.map(([n]) => n).join(", ") || "(waiting edges)"} of agent "${agent.name}": update src/graphs/manager.ts`,
    );
  }
  for (const [name, spec] of Object.entries(source.nodes as Record<string, any>)) {
    graph.addNode(name, spec.runnable, {
      subgraphs: spec.subgraphs,
      ends: spec.ends,
      retryPolicy: spec.retryPolicy,
      metadata: spec.metadata,
      defer: spec.defer,
    });
  }
  graph.addEdge(START, "start");
  for (const [from, to] of source.edges as Set<[string, string]>)
    graph.addEdge(from === START ? "start" : from, to);
  for (const [from, branches] of Object.entries(
    source.branches as Record<string, Record<string, unknown>>,
  )) {
    const key = from === START ? "start" : from;
    graph.branches[key] = { ...(graph.branches[key] ?? {}), ...branches };
  }
  return graph as StateGraph<any, any, any, any, any, any>;
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
  return withQuestionInput(createManagerAgent(options));
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
