import { END, START, StateGraph, type BaseCheckpointSaver } from "@langchain/langgraph";
import { reportInputErrorsCoded } from "../../core/pregel-internals.ts";
import type { CodeAgent } from "../../framework/code-agent.ts";
import { buildTeamAgent, defineTeam, teamAgentNames, type Team } from "../../framework/team.ts";
import { createSearchInfoTool, type ReferenceAgentOptions } from "../qa/agents/page-search.ts";
import { createPageReaderMember } from "./agents/page-reader.ts";
import { createPlannerMember } from "./agents/planner.ts";
import { createResearcherMember } from "./agents/researcher.ts";
import { CONDENSER } from "./nodes/condense.ts";
import { makeReportNode } from "./nodes/report.ts";
import { makeResearchNode } from "./nodes/research.ts";
import { start } from "./nodes/start.ts";
import { verify, VERIFIER } from "./nodes/verify.ts";
import { write, WRITER } from "./nodes/write.ts";
import { ResearchRunContextSchema } from "./base/settings.ts";
import { ResearchInput, ResearchState } from "./base/state.ts";
import { createResearchTool } from "./tools/research.ts";

/** Options of the research team's agents: model, sandbox, knowledge source (as the QA team's). */
export type ResearchAgentOptions = ReferenceAgentOptions;

/**
 * The researcher team's registry: planner → researcher → page_reader. The planner calls
 * researchers through `research(question)` (each behind its sub-question pipeline: investigate →
 * condense), a researcher calls page readers through `search_info(query, page)`.
 */
export const researchTeam: Team<ResearchAgentOptions> = defineTeam<ResearchAgentOptions>({
  name: "researcher",
  root: "planner",
  contextSchema: ResearchRunContextSchema,
  members: [
    { name: "planner", prompts: "planner", children: ["researcher"], create: createPlannerMember },
    {
      name: "researcher",
      prompts: "researcher",
      children: ["page_reader"],
      create: createResearcherMember,
      tool: (agent) => createResearchTool(agent),
    },
    {
      name: "page_reader",
      prompts: "page_reader",
      children: [],
      create: createPageReaderMember,
      tool: (agent, deps) => createSearchInfoTool(agent, deps),
    },
  ],
});

/** Model callers of the researcher graph outside the team's agents (CODEHOP_MODEL_<NAME>). */
export const RESEARCH_MODEL_USERS: readonly string[] = [CONDENSER, WRITER, VERIFIER];

/** Every name a research run resolves a model for: the agents, then the pipeline's model nodes. */
export const RESEARCH_AGENT_NAMES: readonly string[] = [
  ...teamAgentNames(researchTeam),
  ...RESEARCH_MODEL_USERS,
];

/** Recursion limit of the researcher graph: five nodes in a row, with room to spare. */
export const RESEARCH_RECURSION_LIMIT = 12;

/** The planner agent (input `{ task, context? }`) with the researcher team below it. */
export function createPlannerAgent(options: ResearchAgentOptions = {}): CodeAgent {
  return buildTeamAgent(researchTeam, options, { name: "planner" });
}

/**
 * Uncompiled researcher graph: start → research (the planner and its researchers) → write →
 * verify → report. Input `{ topic, maxQuestions? }`; the report is in `answer` (Markdown),
 * with `citations`, `verification`, `questions` and `usage` beside it.
 */
export function createResearcherBuilder(options: ResearchAgentOptions = {}) {
  const planner = createPlannerAgent(options);
  return new StateGraph({
    stateSchema: ResearchState,
    input: ResearchInput,
    context: ResearchRunContextSchema as any,
  })
    .addNode("start", start)
    .addNode("research", makeResearchNode(planner), { subgraphs: [planner.graph as any] })
    .addNode("write", write)
    .addNode("verify", verify)
    .addNode("report", makeReportNode(options))
    .addEdge(START, "start")
    .addEdge("start", "research")
    .addEdge("research", "write")
    .addEdge("write", "verify")
    .addEdge("verify", "report")
    .addEdge("report", END);
}

/** Options of {@link createResearcherGraph}. */
export interface ResearcherGraphOptions extends ResearchAgentOptions {
  /** Checkpointer (the app passes its persistence's; omit for langgraph.json). */
  checkpointer?: BaseCheckpointSaver;
}

/**
 * The research app as one graph: `graph.invoke({ topic }, { configurable: { thread_id }, context })`
 * returns the state with the report (`answer`), its `citations` and `verification`.
 */
export function createResearcherGraph(options: ResearcherGraphOptions = {}) {
  const { checkpointer, ...agentOptions } = options;
  const graph = createResearcherBuilder(agentOptions).compile({ checkpointer });
  graph.name = "researcher";
  // `{ topic: "" }` from Studio or the SDK: CODEHOP_INPUT_INVALID naming the problem.
  return reportInputErrorsCoded(graph, "researcher", ResearchInput);
}
