import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { RunnableConfig } from "@langchain/core/runnables";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { resolveModel } from "./models.ts";
import { type CodeSandbox, toolNameProblem } from "../sandbox/contract.ts";
import { getDefaultSandbox } from "./default-sandbox.ts";
import { readRunContext } from "./run-context.ts";
import type { CodeTool } from "../tools/define-tool.ts";
import type { CallJournal } from "./journal.ts";
import type { AgentSettings } from "./settings.ts";
import type { StepRecord } from "./state.ts";
import type { CodeAgentPrompts, PromptContext } from "./prompts.ts";

/**
 * Builds an agent's tools for one run from its input context (e.g. bind a tool to a page). `steps`
 * is the agent's trajectory so far (checkpointed, so the same after a resume): a tool can derive
 * from it what earlier actions did, e.g. how much of a budget they used.
 */
export type ToolsFactory = (ctx: {
  context: Record<string, unknown>;
  config: RunnableConfig;
  steps: readonly StepRecord[];
}) => CodeTool<any>[];

/**
 * Checks tool names are unique and usable in the sandbox (CODEHOP_CONFIG_INVALID otherwise): the
 * sandbox contract's rule (`toolNameProblem`: a strict-mode binding name that is not one of the
 * guest's globals) — so a bad name fails when the agent is built, not at its first action.
 */
export function validateTools(agentName: string, tools: readonly CodeTool<any>[]): void {
  const seen = new Map<string, CodeTool<any>>();
  for (const t of tools) {
    const problem = toolNameProblem(t.name);
    if (problem)
      throw new CodehopError(ErrorCodes.CONFIG_INVALID, `Agent "${agentName}": ${problem}`);
    const first = seen.get(t.name);
    if (first) {
      // Name both tools, and for an MCP server's tool the setting that renames its tools.
      const which = (x: CodeTool<any>) =>
        x.origin
          ? `tool "${x.origin.mcpTool}" of MCP server "${x.origin.mcpServer}"`
          : `codehop's own "${x.name}"`;
      const mcp = t.origin ?? first.origin;
      const fix = mcp
        ? ` Give the MCP server "${mcp.mcpServer}" a "prefix" in codehop.config.json (e.g. "prefix": "${mcp.mcpServer.replace(/[^A-Za-z0-9_$]/g, "_")}_") so its tools are named ${mcp.mcpServer.replace(/[^A-Za-z0-9_$]/g, "_")}_<tool>.`
        : "";
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `Agent "${agentName}": two tools are named "${t.name}": ${which(first)} and ${which(t)}.${fix}`,
      );
    }
    seen.set(t.name, t);
  }
}

/** Everything the nodes of one agent share. Built once by `createCodeAgent`. */
export interface AgentRuntime {
  readonly name: string;
  readonly description: string;
  readonly settings: AgentSettings;
  readonly prompts: CodeAgentPrompts;
  readonly capabilities: readonly string[];
  /**
   * The tools of a run: its own (static list, or the factory applied to the run's context and
   * trajectory), then the run context's `agentTools` for it.
   */
  tools(
    context: Record<string, unknown>,
    config: RunnableConfig,
    steps?: readonly StepRecord[],
  ): CodeTool<any>[];
  /** The chat model for a run (see src/core/models.ts; its library loads at the first one). */
  model(config: RunnableConfig): Promise<BaseChatModel>;
  /** The sandbox that runs a run's code actions: the agent's own, else the run context's, else the default. */
  sandbox(config: RunnableConfig): Promise<CodeSandbox>;
  /** The call journal of a run: the run context's, else the agent's fallback (createCodeAgent's `journal`). */
  journal(config: RunnableConfig): CallJournal | undefined;
  /** Prompt context for a tool list. */
  promptContext(tools: readonly CodeTool<any>[]): PromptContext;
}

/** Options `makeRuntime` needs. */
export interface RuntimeOptions {
  name: string;
  description: string;
  settings: AgentSettings;
  prompts: CodeAgentPrompts;
  capabilities: readonly string[];
  tools: readonly CodeTool<any>[] | ToolsFactory;
  model?: string | BaseChatModel;
  /** The agent's own sandbox (createCodeAgent's `sandbox` option), if any. */
  sandbox?: CodeSandbox;
  /** The journal for runs whose context has none (createCodeAgent's `journal` option). */
  journal?: CallJournal;
}

/** Builds the shared runtime of an agent. */
export function makeRuntime(o: RuntimeOptions): AgentRuntime {
  if (typeof o.tools !== "function") validateTools(o.name, o.tools);
  return {
    name: o.name,
    description: o.description,
    settings: o.settings,
    prompts: o.prompts,
    capabilities: o.capabilities,
    tools(context, config, steps = []) {
      const own =
        typeof o.tools !== "function" ? [...o.tools] : o.tools({ context, config, steps });
      const extra = readRunContext(config).agentTools;
      const added = [...(extra?.[o.name] ?? []), ...(extra?.["*"] ?? [])];
      if (typeof o.tools !== "function" && !added.length) return own;
      const tools = [...own, ...added];
      validateTools(o.name, tools);
      return tools;
    },
    model: (config) => resolveModel(o.name, config, { model: o.model }),
    sandbox: async (config) => o.sandbox ?? readRunContext(config).sandbox ?? getDefaultSandbox(),
    journal: (config) => readRunContext(config).journal ?? o.journal,
    promptContext: (tools) => ({
      agentName: o.name,
      agentDescription: o.description,
      tools,
      capabilities: o.capabilities,
    }),
  };
}
