import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  getInteropZodObjectShape,
  interopSafeParse,
  isInteropZodObject,
} from "@langchain/core/utils/types";
import { Annotation, type BaseChannel, END, START, StateGraph } from "@langchain/langgraph";
import type { z } from "zod";
import { type AgentToolOptions, agentAsTool } from "../core/agent-as-tool.ts";
import {
  type AgentSettings,
  type AgentSettingsInput,
  DEFAULT_CAPABILITIES,
  recursionLimitFor,
  resolveSettings,
} from "../core/settings.ts";
import { type CodeAgentPrompts, loadPromptSet, renderAllPrompts } from "../core/prompts.ts";
import { routeAfterObserve, routeEntry, routeStart } from "../core/routing.ts";
import { RunContextSchema } from "../core/run-context.ts";
import { registerStateValues } from "../core/state-values.ts";
import { type AgentRuntime, type ToolsFactory, makeRuntime } from "../core/runtime.ts";
import {
  AgentInput,
  type AgentInputValue,
  AgentState,
  type AgentStateAnnotation,
  type AgentUpdate,
} from "../core/state.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import {
  describeInputIssues,
  type InputCheck,
  reportInputErrorsCoded,
} from "../core/pregel-internals.ts";
import { makeActNode } from "../nodes/act.ts";
import { makeFinalAnswerNode } from "../nodes/final-answer.ts";
import { makeObserveNode } from "../nodes/observe.ts";
import { makeNewTaskNode } from "../nodes/new-task.ts";
import { makePlanNode } from "../nodes/plan.ts";
import { makePlanningNode } from "../nodes/planning.ts";
import type { CodeSandbox } from "../sandbox/contract.ts";
import type { CallJournal } from "../core/journal.ts";
import type { CodeTool } from "../tools/define-tool.ts";

/**
 * A graph input other than `{ task, context? }` (option `input` of {@link createCodeAgent}), e.g.
 * `{ question }` for an app's front agent. The compiled graph then accepts exactly `schema`
 * (LangGraph validates it at invoke, before any checkpoint is written) and runs a first `start`
 * node that writes `toTask(input)` into `task` / `context`.
 *
 * Why a node and not a mapping in front of `invoke`: the LangGraph API server (Studio) invokes the
 * graph itself, so the graph must accept the input; and in the same graph every agent step stays a
 * root checkpoint — listed by `getStateHistory(thread)`, replayable and forkable — which would not
 * be the case if the agent ran as a subgraph inside an outer graph with this input.
 */
export interface CodeAgentInputMapping<Schema extends z.ZodObject = z.ZodObject> {
  /**
   * The graph's input, a plain zod object (no object-level `.refine`: LangGraph cannot validate
   * it). Each key is also a state channel, last value: every run on the thread writes every key
   * (an omitted optional key as `undefined`), so the input stays readable in `getState(...).values`
   * and `toTask` never sees a previous run's value. Keys may not be state keys of the agent
   * (`task`, `context`, `answer` ...) nor node names (`start`, `plan` ...).
   */
  schema: Schema;
  /** The agent's task (and tool context, default `{}`) from the validated input; runs in `start`. */
  toTask(input: z.output<Schema>): AgentInputValue;
}

/** The input check of an agent without an input mapping: `{ task, context?, agent? }`. */
const AGENT_INPUT_CHECK: InputCheck = {
  expected: "{ task: string, context?: object }",
  problems(input) {
    if (typeof input !== "object" || input === null || Array.isArray(input))
      return ["input: expected an object"];
    const { task, context } = input as { task?: unknown; context?: unknown };
    const problems: string[] = [];
    if (typeof task !== "string") problems.push("task: expected the task as a string");
    else if (!task.trim()) problems.push("task: the task is empty: say what to do");
    if (context != null && (typeof context !== "object" || Array.isArray(context)))
      problems.push("context: expected an object");
    return problems;
  },
};

/** Options of {@link createCodeAgent}. Limits and policies default as documented in src/core/settings.ts. */
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
  /** Sandbox for code actions (default: the run context's `sandbox`, else a lazily created process-wide one). */
  sandbox?: CodeSandbox;
  /**
   * Call journal for runs whose context brings none (e.g. graphs served by `langgraphjs dev`,
   * src/graphs/entries.ts): the agent passes it on to the agents it calls. A run context's
   * `journal` wins.
   */
  journal?: CallJournal;
  /** Capability lines for the system prompt (default DEFAULT_CAPABILITIES). */
  capabilities?: readonly string[];
  /**
   * Compiled graphs the tools invoke, for drawing and `getState({ subgraphs: true })`. Taken from
   * the tools' `subgraphs` automatically when `tools` is a list; give it when `tools` is a factory.
   */
  subgraphs?: readonly unknown[];
  /**
   * A custom graph input mapped to the task by a first `start` node (see
   * {@link CodeAgentInputMapping}). Default: the input is `{ task, context? }`. An agent with a
   * custom input cannot be another agent's tool (`asTool` throws CODEHOP_CONFIG_INVALID).
   */
  input?: CodeAgentInputMapping<any>;
  /**
   * The run context's schema (LangGraph validates runs against it; Studio shows its fields). Default
   * `RunContextSchema` (src/core/run-context.ts); apps extend it with their keys.
   */
  contextSchema?: z.ZodObject;
}

/**
 * The agent's own nodes (the `start` node of a custom input comes before them). Node ids are kept
 * from earlier versions so their checkpoints resume: "plan" is the action writer
 * (src/nodes/plan.ts), "planning" the planning step (src/nodes/planning.ts).
 */
const AGENT_NODES = ["new_task", "planning", "plan", "act", "observe", "final_answer"] as const;
/** The node mapping a custom input to the task. */
export const INPUT_NODE = "start";

/**
 * Wires the agent's nodes into `graph` after `entry` (START, or the input node). Typed loosely:
 * both graph shapes (default and custom input) share this one wiring.
 */
function addAgentNodes(graph: any, entry: string, rt: AgentRuntime, subgraphs: readonly unknown[]) {
  return graph
    .addNode("new_task", makeNewTaskNode(rt))
    .addNode("planning", makePlanningNode(rt))
    .addNode("plan", makePlanNode(rt))
    .addNode("act", makeActNode(rt), { subgraphs: [...subgraphs] as any[] })
    .addNode("observe", makeObserveNode(rt))
    .addNode("final_answer", makeFinalAnswerNode(rt))
    .addConditionalEdges(entry, (s: AgentState) => routeEntry(s, rt.settings), [
      "new_task",
      "planning",
      "plan",
    ])
    .addConditionalEdges("new_task", (s: AgentState) => routeStart(s, rt.settings), [
      "planning",
      "plan",
    ])
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

/** Uncompiled graph of a code agent with the default input `{ task, context? }`. */
export type CodeAgentBuilder = StateGraph<
  AgentStateAnnotation["spec"],
  AgentState,
  AgentUpdate,
  typeof START | (typeof AGENT_NODES)[number],
  (typeof AgentInput)["spec"],
  AgentStateAnnotation["spec"]
>;

/** State channels of an agent with a custom input: the agent's own plus one per input key. */
export type MappedAgentStateSpec<Schema extends z.ZodObject> = AgentStateAnnotation["spec"] & {
  [K in keyof z.output<Schema>]: BaseChannel<z.output<Schema>[K], z.output<Schema>[K]>;
};

/** Uncompiled graph of a code agent with a custom input (`input` option): state plus the input keys. */
export type MappedCodeAgentBuilder<Schema extends z.ZodObject> = StateGraph<
  MappedAgentStateSpec<Schema>,
  AgentState & z.output<Schema>,
  AgentUpdate,
  typeof START | typeof INPUT_NODE | (typeof AGENT_NODES)[number],
  Schema,
  MappedAgentStateSpec<Schema>
>;

/** Compiled graph of a code agent (no checkpointer: attach one with `builder.compile({ checkpointer })`). */
export type CodeAgentGraph<
  Builder extends { compile: (...args: any[]) => any } = CodeAgentBuilder,
> = ReturnType<Builder["compile"]>;

function buildGraph(
  rt: AgentRuntime,
  subgraphs: readonly unknown[],
  context: z.ZodObject,
): CodeAgentBuilder {
  return addAgentNodes(
    new StateGraph({ stateSchema: AgentState, input: AgentInput, context: context as any }),
    START,
    rt,
    subgraphs,
  );
}

/** Keys of the agent's state and node names: a custom input may not reuse them. */
function reservedInputKeys(State: AgentStateAnnotation): Set<string> {
  return new Set([...Object.keys(State.spec), INPUT_NODE, ...AGENT_NODES, START, END]);
}

/**
 * The input schema LangGraph validates with: optional keys the caller omits come out as
 * `undefined` instead of missing, so they are written too — otherwise a later run on the thread
 * would read the previous run's value from the (last value) channel.
 */
function withOmittedKeysWritten(schema: z.ZodObject, shape: Record<string, any>): z.ZodObject {
  const optional = Object.entries(shape).filter(([, field]) => {
    const parsed = field.safeParse(undefined);
    return parsed.success && parsed.data === undefined;
  });
  if (!optional.length) return schema;
  return schema.extend(
    Object.fromEntries(optional.map(([key, field]) => [key, field.default(undefined)])),
  );
}

function buildMappedGraph(
  rt: AgentRuntime,
  subgraphs: readonly unknown[],
  mapping: CodeAgentInputMapping,
  context: z.ZodObject,
): StateGraph<any, any, any, any, any, any> {
  const fail = (why: string) =>
    new CodehopError(ErrorCodes.CONFIG_INVALID, `Agent "${rt.name}": input ${why}`);
  if (!mapping || !isInteropZodObject(mapping.schema))
    throw fail("needs `schema`, a zod object (z.object({ ... }))");
  if (typeof mapping.toTask !== "function")
    throw fail("needs `toTask(input)` returning { task, context? }");
  const State = AgentState;
  // LangGraph extends the input schema to validate it, which zod refuses for refined objects.
  if ((mapping.schema as any)._zod?.def?.checks?.length)
    throw fail(
      "schema has object-level refinements (.refine / .superRefine): LangGraph cannot validate them; refine its fields instead",
    );
  const shape = getInteropZodObjectShape(mapping.schema) as Record<string, any>;
  const keys = Object.keys(shape);
  if (!keys.length) throw fail("schema has no keys");
  const reserved = reservedInputKeys(State);
  const clash = keys.filter((k) => reserved.has(k));
  if (clash.length) {
    throw fail(
      `key(s) ${clash.map((k) => `"${k}"`).join(", ")} clash with the agent's state or node names (${[...reserved].join(", ")})`,
    );
  }
  // The input keys are state channels too, so the start node can read them and they stay in the
  // thread's state; last value, no default.
  const inputChannels = Object.fromEntries(keys.map((k) => [k, Annotation<unknown>]));
  const FullState = Annotation.Root({ ...State.spec, ...inputChannels });
  const start = (state: Record<string, unknown>): AgentUpdate => {
    const input = Object.fromEntries(keys.map((k) => [k, state[k]]));
    const mapped = mapping.toTask(input);
    if (typeof mapped?.task !== "string") {
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `Agent "${rt.name}": input.toTask must return { task: string, context? }, got ${JSON.stringify(mapped)}`,
      );
    }
    return { task: mapped.task, context: mapped.context ?? {}, agent: rt.name };
  };
  const graph = new StateGraph({
    stateSchema: FullState,
    input: withOmittedKeysWritten(mapping.schema, shape),
    context: context as any,
  })
    .addNode(INPUT_NODE, start)
    .addEdge(START, INPUT_NODE);
  return addAgentNodes(graph, INPUT_NODE, rt, subgraphs);
}

/** A code agent: its graph, settings, and a way to use it as another agent's tool. */
export interface CodeAgent<
  Input = AgentInputValue,
  Builder extends { compile: (...args: any[]) => any } = CodeAgentBuilder,
> {
  readonly name: string;
  readonly description: string;
  readonly settings: AgentSettings;
  readonly prompts: CodeAgentPrompts;
  /** Recursion limit that lets the agent use all its steps; pass it when invoking the graph. */
  readonly recursionLimit: number;
  /** Uncompiled StateGraph (plan / act / observe, planning, final_answer; `start` with a custom input). */
  readonly builder: Builder;
  /** Compiled graph without a checkpointer (LangGraph API servers attach their own). */
  readonly graph: CodeAgentGraph<Builder>;
  /** This agent as a tool for another agent's code (see `agentAsTool`). */
  asTool<Shape extends z.ZodRawShape>(options: AgentToolOptions<Shape>): CodeTool<Shape>;
  /**
   * Runs the compiled graph with this agent's recursion limit. Input: `{ task, context? }`, or the
   * custom input's schema (a mismatch throws CODEHOP_INPUT_INVALID before the run starts).
   */
  invoke(input: Input, config?: RunnableConfig): Promise<AgentState>;
}

/**
 * Builds a code agent: a LangGraph subgraph whose model writes JavaScript that runs in the sandbox
 * with the agent's tools, step by step, until it calls final_answer() or hits its limits.
 * Throws CODEHOP_CONFIG_INVALID on bad options (names, limits, tool names the sandbox would reject,
 * duplicate tools, a bad `input` mapping) and CODEHOP_PROMPT_TEMPLATE on a prompt with a missing or
 * unknown placeholder.
 */
export function createCodeAgent<Schema extends z.ZodObject>(
  options: CodeAgentOptions & { input: CodeAgentInputMapping<Schema> },
): CodeAgent<z.input<Schema>, MappedCodeAgentBuilder<Schema>>;
export function createCodeAgent(options: CodeAgentOptions & { input?: undefined }): CodeAgent;
/** Options typed as plain CodeAgentOptions (input maybe set): the input type is not known statically. */
export function createCodeAgent(options: CodeAgentOptions): CodeAgent<any, any>;
export function createCodeAgent(options: CodeAgentOptions): CodeAgent<any, any> {
  const {
    name,
    description,
    prompts,
    tools = [],
    model,
    sandbox,
    journal,
    capabilities,
    subgraphs,
    input: mapping,
    contextSchema,
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
    sandbox,
    journal,
  });
  const nested =
    subgraphs ?? (typeof tools === "function" ? [] : tools.flatMap((t) => t.subgraphs ?? []));
  const context = contextSchema ?? RunContextSchema;
  const builder =
    mapping === undefined
      ? buildGraph(rt, nested, context)
      : buildMappedGraph(rt, nested, mapping, context);
  // State edits (updateState, `codehop replay --set`) are checked against the channels' types.
  registerStateValues(
    builder,
    mapping === undefined
      ? {}
      : (getInteropZodObjectShape(mapping.schema) as Record<string, z.ZodType>),
  );
  // One more super-step for the start node of a custom input.
  const recursionLimit = recursionLimitFor(settings) + (mapping === undefined ? 0 : 1);
  // The compiled graph carries the recursion limit its steps need, so callers that don't pass one
  // (Studio, a plain graph.invoke) don't stop after ~8 steps at LangGraph's default of 25.
  const graph = builder.compile().withConfig({ recursionLimit }) as CodeAgentGraph<any>;
  graph.name = name;
  // An input its schema rejects is CODEHOP_INPUT_INVALID naming the problem, not zod's raw issues;
  // a plain agent's `{ task }` must hold a task (Studio's `{}` ran the model on an empty one).
  reportInputErrorsCoded(
    graph,
    name,
    mapping !== undefined ? (mapping.schema as z.ZodType) : AGENT_INPUT_CHECK,
  );
  const agent: CodeAgent<any, any> = {
    name,
    description,
    settings,
    prompts: promptSet,
    recursionLimit,
    builder,
    graph,
    asTool: (toolOptions) => {
      // agentAsTool invokes the graph with { task, context }, which a custom input rejects.
      if (mapping !== undefined) {
        throw new CodehopError(
          ErrorCodes.CONFIG_INVALID,
          `Agent "${name}" has a custom input (input option), so it cannot be a tool: build it without \`input\` to use it as "${toolOptions.name}"`,
        );
      }
      return agentAsTool(agent as any, toolOptions);
    },
    invoke: async (input, config) => {
      if (mapping === undefined) {
        return (await graph.invoke(
          { task: input.task, context: input.context ?? {}, agent: name },
          { recursionLimit, ...config },
        )) as AgentState;
      }
      // LangGraph validates the input too (a ZodError); checked here first for a coded error.
      const parsed = interopSafeParse(mapping.schema, input);
      if (!parsed.success) {
        const problems = describeInputIssues(parsed.error?.issues ?? []);
        throw new CodehopError(
          ErrorCodes.INPUT_INVALID,
          `Agent "${name}": invalid input — ${problems} (expected the keys of its input schema: ${Object.keys(getInteropZodObjectShape(mapping.schema)).join(", ")})`,
        );
      }
      return (await graph.invoke(input, { recursionLimit, ...config })) as AgentState;
    },
  };
  return agent;
}
