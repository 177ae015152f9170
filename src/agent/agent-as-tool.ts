import type { RunnableConfig } from "@langchain/core/runnables";
import type { z } from "zod";
import { CodehopError } from "../errors.ts";
import { type CodeTool, defineTool } from "../tools/define-tool.ts";
import { renderManagedTask } from "./prompts.ts";
import type { CodeAgentPrompts } from "./prompts.ts";
import type { AgentInputValue, Source } from "./state.ts";
import { USAGE_SINK_KEY, type UsageByAgent, mergeUsage } from "./usage.ts";

/** The parts of a code agent `agentAsTool` needs (a `CodeAgent` from createCodeAgent fits). */
export interface AgentLike {
  readonly name: string;
  readonly prompts: CodeAgentPrompts;
  readonly recursionLimit: number;
  readonly graph: {
    invoke(
      input: AgentInputValue,
      config?: RunnableConfig,
    ): Promise<{ answer?: unknown; usage?: UsageByAgent; sources?: Source[] }>;
  };
}

/** How an agent is exposed as a tool. */
export interface AgentToolOptions<Shape extends z.ZodRawShape> {
  /** JS identifier the parent's code calls, e.g. "wikipedia_search_agent". */
  name: string;
  /** What the agent does and returns, for the parent's prompt. */
  description: string;
  /** Arguments (positional order = key order), e.g. `z.object({ task: z.string().describe(...) })`. */
  parameters: z.ZodObject<Shape>;
  /** Maps validated arguments to the agent's input. */
  toInput: (args: z.infer<z.ZodObject<Shape>>) => AgentInputValue;
  /** Return type shown in the prompt (default "string"). */
  returns?: string;
  /** Wrap the task in the managed-agent task prompt (default true). */
  wrapTask?: boolean;
}

/** LangGraph's per-task scratchpad key in `configurable` (holds the subgraph invocation counter). */
const SCRATCHPAD_KEY = "__pregel_scratchpad";
/**
 * LangGraph's key in `configurable` for the abort signals of the running graph. A graph invoked
 * inside a node inherits it and then listens on the *root* graph's signal instead of the `signal`
 * it was given: every concurrent sub-agent added two abort listeners per step to that one signal
 * (MaxListenersExceededWarning at ~6 concurrent sub-agents), and the child ignored its own signal,
 * so a sub-agent kept running after the parent's action had timed out. Dropping it makes the child
 * listen on the per-call signal below, which still follows the parent (its node signal).
 */
const ABORT_SIGNALS_KEY = "__pregel_abort_signals";

/**
 * Pins a nested agent's checkpoint namespace to the call's index in the action. LangGraph numbers
 * graphs invoked inside one node by invocation order (ns, ns|1, ns|2 ...): when a resumed action is
 * served call 0 from the journal, call 1 would become the first invocation and pick up call 0's
 * finished checkpoints (returning call 0's answer). Numbering by callIndex — deterministic for
 * deterministic code — keeps every call on its own checkpoints across crashes and replays. The
 * namespace also holds the parent act task's id, new at every parent checkpoint, so a new task on
 * the thread starts its children fresh; their journal keys carry the task epochs (run-code.ts).
 */
function pinSubgraphNamespace(config: RunnableConfig, callIndex: number): RunnableConfig {
  const configurable = config.configurable as Record<string, unknown> | undefined;
  const pad = configurable?.[SCRATCHPAD_KEY];
  if (!pad || typeof pad !== "object") return config;
  // Reads fall through to the node's scratchpad; only the counter the child consumes is ours.
  const pinned = Object.create(pad) as { subgraphCounter: number };
  pinned.subgraphCounter = callIndex;
  return { ...config, configurable: { ...configurable, [SCRATCHPAD_KEY]: pinned } };
}

/**
 * Wraps a compiled agent as a tool for another agent's code: `await wiki_agent("...")`. The child
 * runs with the parent act node's config, so its checkpoints nest under the parent's namespace and
 * it shares the run's journal and model configuration; concurrent calls from one `Promise.all` are
 * separate subgraph tasks. The child's answer (final answer, or last observation) is the return
 * value; its usage and sources are reported to the parent through `ctx.report`. Framework errors in
 * the child (model endpoint down, bugs) are not turned into observations by the parent: its act
 * node rethrows them after the action.
 */
export function agentAsTool<Shape extends z.ZodRawShape>(
  agent: AgentLike,
  options: AgentToolOptions<Shape>,
): CodeTool<Shape> {
  return defineTool({
    name: options.name,
    description: options.description,
    parameters: options.parameters,
    returns: options.returns ?? "string",
    isAgent: true,
    subgraphs: [agent.graph],
    invoke: async (args, ctx) => {
      const input = options.toInput(args);
      const task =
        options.wrapTask === false
          ? input.task
          : renderManagedTask(agent.prompts, agent.name, input.task);
      const parent = (ctx.config ?? {}) as RunnableConfig;
      const signals = [ctx.signal, parent.signal].filter((s): s is AbortSignal => Boolean(s));
      // Collects the child's usage as it is spent, for the case it fails instead of answering.
      let spent: UsageByAgent = {};
      const pinned = pinSubgraphNamespace(parent, ctx.callIndex);
      const { [ABORT_SIGNALS_KEY]: _inherited, ...configurable } = pinned.configurable ?? {};
      const config: RunnableConfig = {
        ...pinned,
        configurable: {
          ...configurable,
          [USAGE_SINK_KEY]: (usage: UsageByAgent) => {
            spent = mergeUsage(spent, usage);
          },
        },
        recursionLimit: agent.recursionLimit,
        ...(signals.length
          ? { signal: signals.length === 1 ? signals[0] : AbortSignal.any(signals) }
          : {}),
      };
      try {
        const out = await agent.graph.invoke({ task, context: input.context ?? {} }, config);
        ctx.report?.({ usage: out.usage ?? {}, sources: out.sources ?? [] });
        return out.answer ?? null;
      } catch (err) {
        if (Object.keys(spent).length) ctx.report?.({ usage: spent });
        if (CodehopError.isInstance(err)) throw err;
        throw new Error(
          `${options.name} failed: ${err instanceof Error ? err.message : String(err)}`,
          { cause: err },
        );
      }
    },
  });
}
