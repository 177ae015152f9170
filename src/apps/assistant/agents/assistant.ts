import { createCodeAgent, type CodeAgent } from "../../../framework/code-agent.ts";
import { memberBase, type MemberBuild } from "../../../framework/team.ts";
import { createInspectFileTool } from "../tools/inspect-file.ts";
import { createVisualizerTool } from "../tools/visualizer.ts";
import type { AssistantAgentOptions } from "./options.ts";

/** Actions of the assistant before its max-steps policy applies. */
export const ASSISTANT_MAX_STEPS = 12;
/** The assistant plans before its first action and then every 2 (the GAIA submission's manager). */
export const ASSISTANT_PLANNING_INTERVAL = 2;

/**
 * assistant: the manager of the general assistant. It reads the task's files (inspect_file),
 * looks at images (visualizer), gives web look-ups to the web agent (`web_search_agent(task)`),
 * computes in code, and ends with final_answer.
 */
export function createAssistantMember(
  build: MemberBuild<AssistantAgentOptions>,
): CodeAgent<any, any> {
  const { deps, children } = build;
  return createCodeAgent({
    ...memberBase(build),
    description:
      "solves tasks with the web, files, images and code, delegating web research to a web search agent",
    tools: [...children, createInspectFileTool(deps), createVisualizerTool(deps)],
    maxSteps: ASSISTANT_MAX_STEPS,
    planningInterval: ASSISTANT_PLANNING_INTERVAL,
    maxStepsPolicy: "final_answer_prompt",
  });
}
