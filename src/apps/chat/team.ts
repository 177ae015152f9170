import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { END, START, StateGraph, type BaseCheckpointSaver } from "@langchain/langgraph";
import { reportInputErrorsCoded } from "../../core/pregel-internals.ts";
import { readRunContext } from "../../core/run-context.ts";
import { createCodeAgent, type CodeAgent } from "../../framework/code-agent.ts";
import {
  buildTeamAgent,
  defineTeam,
  memberBase,
  teamAgentNames,
  type MemberBuild,
  type Team,
} from "../../framework/team.ts";
import type { CallJournal } from "../../core/journal.ts";
import type { CodeSandbox } from "../../sandbox/contract.ts";
import type { CodeTool } from "../../tools/define-tool.ts";
import {
  chatFilesOf,
  ChatRunContextSchema,
  threadIdOf,
  type ChatFilesDeps,
} from "./conversation/context.ts";
import { makeAttachFilesNode } from "./nodes/attach-files.ts";
import { makeRespondNode } from "./nodes/respond.ts";
import { makeSummarizeNode, needsSummary } from "./nodes/summarize.ts";
import { chatSettingsOf } from "./conversation/settings.ts";
import {
  CHAT_INPUT_CHECK,
  ChatInput,
  ChatState,
  type ChatStateValue,
} from "./conversation/state.ts";
import { createSearchFilesTool } from "./tools/search-files.ts";

/** The chat agent's name: usage key, CODEHOP_MODEL_CHAT, the prompts in prompts/chat/. */
export const CHAT_AGENT = "chat";
/** Most code actions the chat agent takes to answer one message. */
export const CHAT_MAX_STEPS = 6;

/** What the chat graph and its agent are built with. */
export interface ChatAgentOptions extends ChatFilesDeps {
  /** A chat model instance or a model name (default: the run's, else CODEHOP_MODEL_CHAT / CODEHOP_MODEL). */
  model?: string | BaseChatModel;
  /** Sandbox for the agent's code (default: the run's, else the process-wide one). */
  sandbox?: CodeSandbox;
  /** Call journal for runs whose context brings none (graphs served by `langgraphjs dev`). */
  journal?: CallJournal;
  /**
   * Tools the agent has besides `search_files`, in every run; a run adds more through the run
   * context's `agentTools` (the MCP servers of the configuration file, `chat(…, { tools })`).
   */
  tools?: readonly CodeTool<any>[];
}

/**
 * The chat agent's own tools for one run: `search_files` over the thread's attached files, then
 * the graph's `tools` (the run's `agentTools` follow them, added by the framework).
 */
export function chatToolsFor(
  options: ChatAgentOptions,
  config: Parameters<typeof readRunContext>[0],
): CodeTool<any>[] {
  const files = chatFilesOf(config, options);
  return [
    createSearchFilesTool(files, threadIdOf(config), { k: chatSettingsOf(config).searchResults }),
    ...(options.tools ?? []),
  ];
}

function createChatMember(build: MemberBuild<ChatAgentOptions>): CodeAgent {
  return createCodeAgent({
    ...memberBase(build),
    description:
      "a helpful assistant that answers the user's messages, using the files they attach",
    tools: ({ config }) => chatToolsFor(build.deps, config),
    maxSteps: CHAT_MAX_STEPS,
    // A reply must come out of every round, even when the steps run out.
    maxStepsPolicy: "final_answer_prompt",
  });
}

/** The chat app's team registry: one agent, which answers every round. */
export const chatTeam: Team<ChatAgentOptions> = defineTeam<ChatAgentOptions>({
  name: "chat",
  root: CHAT_AGENT,
  contextSchema: ChatRunContextSchema,
  members: [{ name: CHAT_AGENT, prompts: "chat", children: [], create: createChatMember }],
});

/** The chat team's agent names (for model checks and labels). */
export const CHAT_AGENT_NAMES: readonly string[] = teamAgentNames(chatTeam);

/** The chat agent on its own (input `{ task }`), e.g. to call it outside a conversation. */
export function createChatAgent(options: ChatAgentOptions = {}): CodeAgent {
  return buildTeamAgent(chatTeam, options);
}

/**
 * Recursion limit of a round of the chat graph: its own steps (attach, summarize, respond); the
 * agent inside `respond` runs with its own limit.
 */
export const CHAT_RECURSION_LIMIT = 10;

/**
 * Uncompiled chat graph: `attach_files` → (`summarize` when rounds left the verbatim window) → `respond`.
 * Input `{ messages, attach? }`; state: the conversation (`messages`), this round's attachment
 * results, the summary of older rounds and the usage of every round.
 */
export function createChatBuilder(options: ChatAgentOptions = {}) {
  const agent = createChatAgent(options);
  return new StateGraph({
    stateSchema: ChatState,
    input: ChatInput,
    context: ChatRunContextSchema as any,
  })
    .addNode("attach_files", makeAttachFilesNode(options))
    .addNode("summarize", makeSummarizeNode(CHAT_AGENT))
    .addNode("respond", makeRespondNode(agent, options), { subgraphs: [agent.graph as any] })
    .addEdge(START, "attach_files")
    .addConditionalEdges(
      "attach_files",
      (state: ChatStateValue, config) => (needsSummary(state, config) ? "summarize" : "respond"),
      ["summarize", "respond"],
    )
    .addEdge("summarize", "respond")
    .addEdge("respond", END);
}

/** Options of {@link createChatGraph}. */
export interface ChatGraphOptions extends ChatAgentOptions {
  /** Checkpointer (the app passes its persistence's; omit for langgraph.json). */
  checkpointer?: BaseCheckpointSaver;
}

/**
 * The conversation as one graph: `graph.invoke({ messages: [new HumanMessage("...")], attach: [{ path }] },
 * { configurable: { thread_id }, context: { chatFiles } })` answers the message with an AIMessage
 * appended to `messages`; every round on the same thread continues the conversation.
 */
export function createChatGraph(options: ChatGraphOptions = {}) {
  const { checkpointer, ...agentOptions } = options;
  const graph = createChatBuilder(agentOptions)
    .compile({ checkpointer })
    .withConfig({ recursionLimit: CHAT_RECURSION_LIMIT });
  graph.name = "chat";
  // `{ messages: [{}] }` from Studio or the SDK: CODEHOP_INPUT_INVALID before any node runs.
  return reportInputErrorsCoded(graph, "chat", CHAT_INPUT_CHECK);
}
