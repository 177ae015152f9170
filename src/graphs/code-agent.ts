import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { RunnableConfig } from "@langchain/core/runnables";
import { END, START, StateGraph } from "@langchain/langgraph";
import type { z } from "zod";
import { type AgentToolOptions, agentAsTool } from "../agent/agent-as-tool.ts";
import {
  type AgentSettings,
  type AgentSettingsInput,
  DEFAULT_CAPABILITIES,
  recursionLimitFor,
  resolveSettings,
} from "../agent/config.ts";
import { getDefaultSandbox } from "../agent/default-sandbox.ts";
import { type CodeAgentPrompts, loadPromptSet, renderAllPrompts } from "../agent/prompts.ts";
import { routeAfterObserve, routeStart } from "../agent/routing.ts";
import { type AgentRuntime, type ToolsFactory, makeRuntime } from "../agent/runtime.ts";
import {
  AgentInput,
  type AgentInputValue,
  type AgentState,
  createAgentState,
} from "../agent/state.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { makeActNode } from "../nodes/act.ts";
import { makeFinalAnswerNode } from "../nodes/final-answer.ts";
import { makeObserveNode } from "../nodes/observe.ts";
import { makePlanNode } from "../nodes/plan.ts";
import { makePlanningNode } from "../nodes/planning.ts";
import type { CodeSandbox } from "../sandbox/types.ts";
import type { CodeTool } from "../tools/define-tool.ts";

/** Options of {@link createCodeAgent}. Limits and policies default as documented in src/agent/config.ts. */
export interface CodeAgentOptions extends AgentSettingsInput {
  /** Agent name: usage key, checkpoint node label, CODEHOP_MODEL_<NAME> override. Letters, digits, _ and -. */
  name: string;
  /** One sentence: what the agent does (shown in its own prompts). */
  description: string;
  /**
   * Prompt templates: a folder under prompts/ (each missing file falls back to prompts/code_agent/),
   * or template texts overriding the defaults one by one.
   */
  prompts?: string | Partial<CodeAgentPrompts>;
  /** Tools the code can call, or a factory building them from the run's input context. */
  tools?: readonly CodeTool<any>[] | ToolsFactory;
  /** A chat model instance (wins over configuration) or a model name for the configured endpoint. */
  model?: string | BaseChatModel;
  /** Sandbox for code actions (default: a lazily created process-wide sandbox). */
  sandbox?: CodeSandbox;
  /** Capability lines for the system prompt (default DEFAULT_CAPABILITIES). */
  capabilities?: readonly string[];
  /**
   * Compiled graphs the tools invoke, for drawing and `getState({ subgraphs: true })`. Taken from
   * the tools' `subgraphs` automatically when `tools` is a list; give it when `tools` is a factory.
   */
  subgraphs?: readonly unknown[];
}

function buildGraph(rt: AgentRuntime, subgraphs: readonly unknown[]) {
  const State = createAgentState(rt.settings.historyPolicy);
  return new StateGraph({ stateSchema: State, input: AgentInput })
    .addNode("planning", makePlanningNode(rt))
    .addNode("plan", makePlanNode(rt))
    .addNode("act", makeActNode(rt), { subgraphs: [...subgraphs] as any[] })
    .addNode("observe", makeObserveNode(rt))
    .addNode("final_answer", makeFinalAnswerNode(rt))
    .addConditionalEdges(START, (s: AgentState) => routeStart(s, rt.settings), ["planning", "plan"])
    .addEdge("planning", "plan")
    .addEdge("plan", "act")
    .addEdge("act", "observe")
    .addConditionalEdges("observe", (s: AgentState) => routeAfterObserve(s, rt.settings), {
      plan: "plan",
      planning: "planning",
      final_answer: "final_answer",
      end: END,
    })
    .addEdge("final_answer", END);
}

/** Uncompiled graph of a code agent. */
export type CodeAgentBuilder = ReturnType<typeof buildGraph>;
/** Compiled graph of a code agent (no checkpointer: attach one with `builder.compile({ checkpointer })`). */
export type CodeAgentGraph = ReturnType<CodeAgentBuilder["compile"]>;

/** A code agent: its graph, settings, and a way to use it as another agent's tool. */
export interface CodeAgent {
  readonly name: string;
  readonly description: string;
  readonly settings: AgentSettings;
  readonly prompts: CodeAgentPrompts;
  /** Recursion limit that lets the agent use all its steps; pass it when invoking the graph. */
  readonly recursionLimit: number;
  /** Uncompiled StateGraph (plan / act / observe, planning, final_answer). */
  readonly builder: CodeAgentBuilder;
  /** Compiled graph without a checkpointer (LangGraph API servers attach their own). */
  readonly graph: CodeAgentGraph;
  /** This agent as a tool for another agent's code (see `agentAsTool`). */
  asTool<Shape extends z.ZodRawShape>(options: AgentToolOptions<Shape>): CodeTool<Shape>;
  /** Runs the compiled graph with this agent's recursion limit. */
  invoke(input: AgentInputValue, config?: RunnableConfig): Promise<AgentState>;
}

/**
 * Builds a code agent: a LangGraph subgraph whose model writes JavaScript that runs in the sandbox
 * with the agent's tools, step by step, until it calls final_answer() or hits its limits.
 * Throws CODEHOP_CONFIG_INVALID on bad options (names, limits, duplicate tools) and
 * CODEHOP_PROMPT_TEMPLATE on a prompt with a missing or unknown placeholder.
 */
export function createCodeAgent(options: CodeAgentOptions): CodeAgent {
  const {
    name,
    description,
    prompts,
    tools = [],
    model,
    sandbox,
    capabilities,
    subgraphs,
    ...limits
  } = options;
  if (!/^[A-Za-z][A-Za-z0-9_-]*$/.test(name ?? "")) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Agent name "${name}" must start with a letter and contain only letters, digits, _ and -`,
    );
  }
  const settings = resolveSettings(name, limits);
  const promptSet =
    typeof prompts === "string"
      ? loadPromptSet(prompts)
      : { ...loadPromptSet(), ...(prompts ?? {}) };
  // Render every prompt once now: a missing or unknown placeholder fails here (CODEHOP_PROMPT_TEMPLATE),
  // not at the first model call of a run.
  renderAllPrompts(
    promptSet,
    {
      agentName: name,
      agentDescription: description,
      tools: [],
      capabilities: capabilities ?? DEFAULT_CAPABILITIES,
    },
    "(validation)",
  );
  const rt = makeRuntime({
    name,
    description,
    settings,
    prompts: promptSet,
    capabilities: capabilities ?? DEFAULT_CAPABILITIES,
    tools,
    model,
    sandbox: sandbox ? async () => sandbox : getDefaultSandbox,
  });
  const nested =
    subgraphs ?? (typeof tools === "function" ? [] : tools.flatMap((t) => t.subgraphs ?? []));
  const builder = buildGraph(rt, nested);
  const recursionLimit = recursionLimitFor(settings);
  // The compiled graph carries the recursion limit its steps need, so callers that don't pass one
  // (Studio, a plain graph.invoke) don't stop after ~8 steps at LangGraph's default of 25.
  const graph = builder.compile().withConfig({ recursionLimit }) as CodeAgentGraph;
  graph.name = name;
  const agent: CodeAgent = {
    name,
    description,
    settings,
    prompts: promptSet,
    recursionLimit,
    builder,
    graph,
    asTool: (toolOptions) => agentAsTool(agent as any, toolOptions),
    invoke: (input, config) =>
      graph.invoke(
        { task: input.task, context: input.context ?? {} },
        { recursionLimit, ...config },
      ) as Promise<AgentState>,
  };
  return agent;
}

/**
 * A generic code agent with no tools (plain JavaScript only) for langgraph.json / Studio. The model
 * comes from the environment (CODEHOP_MODEL, OPENAI_BASE_URL) when the graph runs, not at import.
 */
export const graph = createCodeAgent({
  name: "code_agent",
  description: "a general assistant that answers by computing in JavaScript",
  maxSteps: 6,
}).graph;
