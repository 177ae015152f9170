import { END, START, StateGraph } from "@langchain/langgraph";
import { AgentInput } from "../../../core/state.ts";
import type { CodeAgent } from "../../../framework/code-agent.ts";
import { condense } from "../nodes/condense.ts";
import { makeInvestigateNode, QUESTION_GRAPH } from "../nodes/investigate.ts";
import { ResearchRunContextSchema } from "../base/settings.ts";
import { QuestionState } from "../base/state.ts";

/** Super-steps a sub-question pipeline needs (investigate, condense, with room to spare). */
export const QUESTION_RECURSION_LIMIT = 10;

/**
 * One sub-question's pipeline: investigate (the researcher agent searches and reads) → condense
 * (what was read becomes notes tied to passages). Its input is a code agent's `{ task, context,
 * agent }` and its output carries `answer`, `usage` and `sources`, so the planner calls it like an
 * agent (agentAsTool): checkpointed under the planner's action, journaled as one call.
 */
export function createQuestionGraph(researcher: CodeAgent) {
  const graph = new StateGraph({
    stateSchema: QuestionState,
    input: AgentInput,
    context: ResearchRunContextSchema as any,
  })
    .addNode("investigate", makeInvestigateNode(researcher), {
      subgraphs: [researcher.graph as any],
    })
    .addNode("condense", condense)
    .addEdge(START, "investigate")
    .addEdge("investigate", "condense")
    .addEdge("condense", END)
    .compile();
  graph.name = QUESTION_GRAPH;
  return graph;
}

export { QUESTION_GRAPH };
