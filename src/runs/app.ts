import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { BaseCheckpointSaver, CompiledStateGraph, StateSnapshot } from "@langchain/langgraph";
import type { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import type { RunContext } from "../core/run-context.ts";
import type { Team } from "../framework/team.ts";
import type { Persistence } from "../persistence/port.ts";
import type { McpServerOptions } from "../tools/mcp.ts";
import type { KnowledgeSource } from "../store/types.ts";
import type { AppConfig, AppConfigOverrides } from "./config.ts";
import type { StreamEvent } from "./progress.ts";
import type { AskResult } from "./result.ts";

/** A compiled app graph (the root agent with the app's input) over a checkpointer. */
export type AppGraph = CompiledStateGraph<any, any, any, any, any, any, any>;

/** What an app opens for one run besides persistence (e.g. its knowledge source), and closes after. */
export interface RunServices {
  /** Run context entries for the agents (e.g. `knowledgeSource`). */
  context: Partial<RunContext>;
  close(): Promise<void>;
}

/**
 * An application the run lifecycle (src/runs) drives: start, resume, replay, history and trace are
 * the same for every app; what differs is here. Apps live in src/apps/ (the QA team, ...).
 */
export interface RunApp {
  /** App name, recorded with every thread (`options.app`), so a resume finds the app again. */
  readonly name: string;
  /** The app's team registry (labels of trees and histories). */
  readonly team: Team;
  /**
   * The name the app graph stamps into its root checkpoints, when the graph is not the root
   * agent itself (the research pipeline stamps "research"): the root of the live tree and of
   * `codehop show`. Default: the team's root agent.
   */
  readonly rootName?: string;
  /** The app's graph over a checkpointer: its root agent with the app's input. */
  graph(checkpointer: BaseCheckpointSaver): AppGraph;
  /** Recursion limit of the app's root graph. */
  readonly recursionLimit: number;
  /** The graph input for a thread's recorded input text (a new run; a run that died before its first checkpoint). */
  input(text: string): Record<string, unknown>;
  /** The input text of a graph input, for the thread registry and the tree. */
  inputText(input: Record<string, unknown>): string;
  /**
   * What the thread records to be resumed the same way (e.g. `{ source: "corpus", corpus }`),
   * besides the app name and the model names the lifecycle adds. Must stay light: the CLI calls it
   * before loading any agent.
   */
  record(config: AppConfig, given: Pick<RunOptions, "source">): Record<string, unknown>;
  /**
   * Names of model callers outside the team's agents (plain graph nodes that call a model, e.g. a
   * writer), checked like the agents before a run and configurable with CODEHOP_MODEL_<NAME>.
   */
  readonly modelUsers?: readonly string[];
  /**
   * Opens the run's services. `stored` is the thread's record: a thread continues with what it
   * started with unless the caller names something else explicitly.
   */
  openServices(
    config: AppConfig,
    options: RunOptions,
    stored?: Record<string, unknown>,
  ): Promise<RunServices>;
  /**
   * The app's own result fields, read from a thread's latest state and merged over the generic
   * ones (e.g. the chat's reply as `answer` plus its citations; a research report's citations and
   * verification). Absent: the root agent's answer, sources and steps.
   */
  shapeResult?(snapshot: StateSnapshot): Partial<AskResult> & Record<string, unknown>;
  /**
   * Deletes what the app keeps about a thread outside the persistence (e.g. the chat's attached
   * files), when the thread is deleted; true when there was something. Absent: nothing.
   */
  deleteThread?(config: AppConfig, threadId: string): Promise<boolean>;
  /**
   * True for apps whose threads take one input after another (a conversation): `runTurn` adds an
   * input to such a thread, where `startRun` refuses a second one.
   */
  readonly multiTurn?: boolean;
}

/** Options shared by every run (start, resume, replay) of every app. */
export interface RunOptions {
  /** Configuration overrides (the rest comes from the environment, see src/runs/config.ts). */
  config?: AppConfigOverrides;
  /** An already open persistence (else `<home>/checkpoints.db` is opened and closed per call). */
  persistence?: Persistence;
  /** An already open knowledge source (else chosen by `config.corpus`: corpus DB or online Wikipedia). */
  source?: KnowledgeSource;
  /** A chat model (instance or name) for every agent, overriding the configuration. */
  model?: BaseChatModel | string;
  /** More run context for the agents (merged over what the lifecycle and the app set). */
  context?: Partial<RunContext>;
  /** Receives every stream event (`[namespace, mode, chunk]`), e.g. for a live tree. */
  onEvent?: (event: StreamEvent) => void;
  /**
   * Called once the thread id is known, before the first model call: the thread, where it is
   * checkpointed, its state when it continues one, and the app's root agent (the name of the
   * live tree's root).
   */
  onStart?: (info: {
    threadId: string;
    dbPath: string;
    state?: Record<string, unknown>;
    root: string;
  }) => void;
  /** Aborts the run (the thread stays resumable from its last checkpoint). */
  signal?: AbortSignal;
  /**
   * LangChain callback handlers of the run (beside the tracers the environment turns on,
   * src/tracing): they see the app graph, every agent, node, model call and tool call.
   */
  callbacks?: BaseCallbackHandler[];
  /**
   * MCP servers whose tools the run's agents get (src/tools/mcp.ts), by name, merged over the
   * configuration file's `mcpServers` (these win by name).
   */
  mcpServers?: Readonly<Record<string, McpServerOptions>>;
  /** Receives warnings that do not stop the run (e.g. an MCP tool that could not be offered). */
  onWarning?: (message: string) => void;
}

/**
 * What reading a thread's checkpoints back into a tree needs of its app (`codehop show`): its
 * name, the name its root stamps and which agents each agent calls. A {@link RunApp} is one; the
 * CLI's light copies (src/apps/registry.ts) let it inspect a thread without loading the app.
 */
export interface AppOutline {
  readonly name: string;
  /** See {@link RunApp.rootName}. */
  readonly rootName?: string;
  /** The team's root agent and, per agent, the agents it calls (see {@link Team}). */
  readonly team: {
    readonly root: string;
    readonly members: ReadonlyArray<{
      readonly name: string;
      readonly children: readonly string[];
    }>;
  };
}

/** The name of an app's root in trees and histories ({@link RunApp.rootName}, else its team's root agent). */
export function rootName(app: Pick<AppOutline, "rootName" | "team">): string {
  return app.rootName ?? app.team.root;
}
