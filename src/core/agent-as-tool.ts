import type { RunnableConfig } from "@langchain/core/runnables";
import { isGraphBubbleUp } from "@langchain/langgraph";
import type { z } from "zod";
import { CodehopError } from "../errors.ts";
import {
  type CodeTool,
  defineTool,
  renderSignature,
  ToolArgumentError,
} from "../tools/define-tool.ts";
import { renderManagedTask } from "./prompts.ts";
import type { CodeAgentPrompts } from "./prompts.ts";
import type { AgentInputValue, Source } from "./state.ts";
import { pinSubgraphNamespace, withoutInheritedAbortSignals } from "./pregel-internals.ts";
import { withRunContext } from "./run-context.ts";
import { type UsageByAgent, mergeUsage } from "./usage.ts";

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
  const self: CodeTool<Shape> = defineTool({
    name: options.name,
    description: options.description,
    parameters: options.parameters,
    returns: options.returns ?? "string",
    isAgent: true,
    subgraphs: [agent.graph],
    invoke: async (args, ctx) => {
      const input = options.toInput(args);
      // An empty task would still reach the child wrapped in the managed-task prompt (the graph's
      // own input check sees that text): refused here, as the caller's mistake it can fix.
      if (typeof input.task !== "string" || !input.task.trim())
        throw new ToolArgumentError(
          `${options.name}() needs a task: say what the agent should do. Usage: ${renderSignature(self)}`,
        );
      const task =
        options.wrapTask === false
          ? input.task
          : renderManagedTask(agent.prompts, agent.name, input.task);
      const parent = (ctx.config ?? {}) as RunnableConfig;
      const signals = [ctx.signal, parent.signal].filter((s): s is AbortSignal => Boolean(s));
      // Collects the child's usage as it is spent, for the case it fails instead of answering.
      let spent: UsageByAgent = {};
      // The child's checkpoints are numbered by the call's index (resumes and replays find them),
      // and it listens on its own per-call signal, which still follows the parent's node signal.
      const config: RunnableConfig = {
        ...withRunContext(
          withoutInheritedAbortSignals(pinSubgraphNamespace(parent, ctx.callIndex)),
          {
            usageSink: (usage: UsageByAgent) => {
              spent = mergeUsage(spent, usage);
            },
          },
        ),
        recursionLimit: agent.recursionLimit,
        ...(signals.length
          ? { signal: signals.length === 1 ? signals[0] : AbortSignal.any(signals) }
          : {}),
      };
      try {
        const out = await agent.graph.invoke(
          { task, context: input.context ?? {}, agent: agent.name },
          config,
        );
        ctx.report?.({ usage: out.usage ?? {}, sources: out.sources ?? [] });
        return out.answer ?? null;
      } catch (err) {
        if (Object.keys(spent).length) ctx.report?.({ usage: spent });
        // A pause for a human approval inside the child (LangGraph's GraphInterrupt) and coded
        // framework errors go up as they are.
        if (CodehopError.isInstance(err) || isGraphBubbleUp(err)) throw err;
        throw new Error(
          `${options.name} failed: ${err instanceof Error ? err.message : String(err)}`,
          { cause: err },
        );
      }
    },
  });
  return self;
}
