import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { z } from "zod";
import type { CodeAgent } from "../../framework/code-agent.ts";
import { reportInputErrorsCoded } from "../../core/pregel-internals.ts";
import { recursionLimitFor } from "../../core/settings.ts";
import { buildTeamAgent, defineTeam, teamAgentNames, type Team } from "../../framework/team.ts";
import { modelSetupHelp } from "../../runs/config.ts";
import { AssistantRunContextSchema } from "./base/context.ts";
import { ASSISTANT_MAX_STEPS, createAssistantMember } from "./agents/assistant.ts";
import type { AssistantAgentOptions } from "./agents/options.ts";
import { createWebSearchMember, webSearchAgentTool } from "./agents/web-search.ts";

/** Input of the assistant's graph (the CLI, `assist()`, Studio): the task and its files' names. */
export const AssistantInput = z.object({
  question: z
    .string()
    .min(1, "the task is empty: say what to do")
    .refine((q) => q.trim().length > 0, "the task is empty: say what to do")
    .describe("the task"),
  files: z
    .array(z.string().min(1))
    .max(100)
    .optional()
    .describe("names of the task's files (attached to the thread's folder before the run)"),
});

/** The task text the assistant sees: the request, then the files it can read. */
export function assistantTask(question: string, files: readonly string[] = []): string {
  if (!files.length) return question;
  return `${question}\n\nAttached files (read them with inspect_file): ${files.map((f) => JSON.stringify(f)).join(", ")}`;
}

/**
 * The assistant's team registry: assistant → web_search (the GAIA submission's design: a manager
 * planning every 2 steps with file and image tools, a web agent planning every 5).
 */
export const assistantTeam: Team<AssistantAgentOptions> = defineTeam<AssistantAgentOptions>({
  name: "assistant",
  root: "assistant",
  input: {
    schema: AssistantInput,
    toTask: ({ question, files }) => ({ task: assistantTask(question, files ?? []) }),
  },
  contextSchema: AssistantRunContextSchema,
  members: [
    {
      name: "assistant",
      prompts: "assistant",
      children: ["web_search"],
      create: createAssistantMember,
    },
    {
      name: "web_search",
      prompts: "web_search",
      children: [],
      create: createWebSearchMember,
      tool: (agent) => webSearchAgentTool(agent),
    },
  ],
});

/** Recursion limit of an assistant run (root super-steps: actions, planning, start, final answer). */
export const ASSISTANT_RECURSION_LIMIT =
  recursionLimitFor({ maxSteps: ASSISTANT_MAX_STEPS }) + ASSISTANT_MAX_STEPS + 2;

/** The assistant agent (input `{ task }`) with the web agent below it. */
export function createAssistantAgent(options: AssistantAgentOptions = {}): CodeAgent {
  return buildTeamAgent(assistantTeam, options, { name: "assistant" });
}

/** The web agent on its own (input `{ task }`). */
export function createWebSearchAgent(options: AssistantAgentOptions = {}): CodeAgent {
  return buildTeamAgent(assistantTeam, options, { name: "web_search" });
}

/** Options of {@link createAssistantGraph}. */
export interface AssistantGraphOptions extends AssistantAgentOptions {
  /** Checkpointer (the app passes its persistence's; omit for langgraph.json). */
  checkpointer?: BaseCheckpointSaver;
}

/**
 * The assistant as one graph: `graph.invoke({ question, files? }, { configurable: { thread_id } })`
 * returns `{ answer, sources, usage, ... }`; the web agent is drawn nested in it.
 */
export function createAssistantGraph(options: AssistantGraphOptions = {}) {
  const { checkpointer, ...agentOptions } = options;
  const graph = buildTeamAgent(assistantTeam, agentOptions, { withInput: true }).builder.compile({
    checkpointer,
  });
  graph.name = "assistant";
  return reportInputErrorsCoded(graph, "assistant", AssistantInput);
}

/** The assistant team's agent names (root first). */
export const ASSISTANT_AGENT_NAMES: readonly string[] = teamAgentNames(assistantTeam);
/** The instructions printed when no model endpoint is configured for the assistant. */
export const ASSISTANT_MODEL_SETUP_HELP = modelSetupHelp([
  ...ASSISTANT_AGENT_NAMES,
  "inspector",
  "visualizer",
]);
