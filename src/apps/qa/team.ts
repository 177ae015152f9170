import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { z } from "zod";
import type { CodeAgent } from "../../framework/code-agent.ts";
import { reportInputErrorsCoded } from "../../core/pregel-internals.ts";
import { recursionLimitFor } from "../../core/settings.ts";
import { KnowledgeRunContextSchema } from "../common/knowledge-source.ts";
import { buildTeamAgent, defineTeam, teamAgentNames, type Team } from "../../framework/team.ts";
import { modelSetupHelp } from "../../runs/config.ts";
import { createManagerMember, MANAGER_MAX_STEPS } from "./agents/manager.ts";
import {
  createPageSearchMember,
  createSearchInfoTool,
  type ReferenceAgentOptions,
} from "./agents/page-search.ts";
import {
  createWikipediaSearchMember,
  wikipediaSearchAgentTool,
} from "./agents/wikipedia-search.ts";

/** Input of the QA app's graph (the CLI, `ask()`, Studio): the user's question. */
export const ManagerInput = z.object({
  question: z
    .string()
    .min(1, "the question is empty: ask something")
    .refine((q) => q.trim().length > 0, "the question is empty: ask something")
    .describe("the question to answer"),
});

/**
 * The QA app's team registry: manager → wikipedia_search → page_search. Everything that lists the
 * app's agents (CLI tree labels, `codehop graph`, eval, history) derives from it; adding an agent
 * is its graph file, its prompt folder and one line here.
 */
export const qaTeam: Team<ReferenceAgentOptions> = defineTeam<ReferenceAgentOptions>({
  name: "qa",
  root: "manager",
  // A `start` node copies the question into the task in the manager's own graph, so every
  // manager step is a root checkpoint (history, replay, forks).
  input: { schema: ManagerInput, toTask: ({ question }) => ({ task: question }) },
  contextSchema: KnowledgeRunContextSchema,
  members: [
    {
      name: "manager",
      prompts: "manager",
      children: ["wikipedia_search"],
      create: createManagerMember,
    },
    {
      name: "wikipedia_search",
      prompts: "wikipedia_search",
      children: ["page_search"],
      create: createWikipediaSearchMember,
      tool: wikipediaSearchAgentTool,
    },
    {
      name: "page_search",
      prompts: "page_search",
      children: [],
      create: createPageSearchMember,
      tool: (agent, deps) => createSearchInfoTool(agent, deps),
    },
  ],
});

/**
 * Recursion limit of a manager run: LangGraph counts super-steps of the root graph only (nested
 * agents have their own limits), 4 per action plus planning / final-answer / start steps.
 */
export const MANAGER_RECURSION_LIMIT = recursionLimitFor({ maxSteps: MANAGER_MAX_STEPS }) + 2;

/** The manager agent (input `{ task }`, like any code agent) with its team below it. */
export function createManagerAgent(options: ReferenceAgentOptions = {}): CodeAgent {
  return buildTeamAgent(qaTeam, options, { name: "manager" });
}

/** The wikipedia_search agent (input `{ task }`) with page_search below it. */
export function createWikipediaSearchAgent(options: ReferenceAgentOptions = {}): CodeAgent {
  return buildTeamAgent(qaTeam, options, { name: "wikipedia_search" });
}

/** The page_search agent (input `{ task, context: { page } }`). */
export function createPageSearchAgent(options: ReferenceAgentOptions = {}): CodeAgent {
  return buildTeamAgent(qaTeam, options, { name: "page_search" });
}

/** Uncompiled wikipedia_search graph (input: `{ task }`). */
export function createWikipediaSearchBuilder(options: ReferenceAgentOptions = {}) {
  return createWikipediaSearchAgent(options).builder;
}

/** Uncompiled page_search graph (input: `{ task, context: { page } }`). */
export function createPageSearchBuilder(options: ReferenceAgentOptions = {}) {
  return createPageSearchAgent(options).builder;
}

/**
 * Uncompiled manager graph: input `{ question }`; state = the manager agent's state (answer,
 * sources, usage per agent rolled up from the sub-agents, steps, variables ...) plus `question`.
 */
export function createManagerBuilder(options: ReferenceAgentOptions = {}) {
  return buildTeamAgent(qaTeam, options, { withInput: true }).builder;
}

/** Options of {@link createManagerGraph}. */
export interface ManagerGraphOptions extends ReferenceAgentOptions {
  /** Checkpointer (the app passes its persistence's; omit for langgraph.json). */
  checkpointer?: BaseCheckpointSaver;
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
  // `{ question: "" }` from Studio or the SDK: CODEHOP_INPUT_INVALID before any model call.
  return reportInputErrorsCoded(graph, "manager", ManagerInput);
}

/** The QA team's agent names (root first): their per-agent model keys and labels. */
export const AGENT_NAMES: readonly string[] = teamAgentNames(qaTeam);
/** An agent name of the QA team. */
export type AgentName = string;
/** The instructions printed when no model endpoint is configured for the QA team. */
export const MODEL_SETUP_HELP = modelSetupHelp(AGENT_NAMES);

export { MANAGER_MAX_STEPS, createSearchInfoTool, type ReferenceAgentOptions };
export { pageSearchTask } from "./agents/page-search.ts";
