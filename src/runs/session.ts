import { readEnv } from "../config/env.ts";
import type { CommandContext } from "../config/cli-command.ts";
import type { MemorySettings } from "../core/memory.ts";
import type { RunContext } from "../core/run-context.ts";
import { LazyStore, memoryStoreOptions, openMemoryStore } from "../memory/open.ts";
import { openPersistenceFor, type Persistence } from "../persistence/open.ts";
import type { AppGraph, RunApp, RunOptions, RunServices } from "./app.ts";
import {
  assertModelConfigured,
  detectModel,
  loadAppConfig,
  modelSettingsOf,
  persistenceLocation,
  type AppConfig,
} from "./config.ts";
import { openRunMcp, type RunMcp } from "./mcp.ts";
import { memoryContext, memorySettingsOf } from "./memory.ts";

/**
 * A run's session (src/runs/lifecycle.ts runs it): what one start / resume / replay opens — the
 * persistence, the app's graph, its services and MCP servers, the memory store — the model it
 * resolves, and the run context it hands the graph.
 */

/** What one start / resume / replay opens, and closes at the end. */
export interface Session {
  readonly app: RunApp;
  readonly config: AppConfig;
  readonly persistence: Persistence;
  /** The app's graph over this session's checkpointer (built on first use, then reused). */
  readonly graph: AppGraph;
  /** The run's services, once prepared. */
  services?: RunServices;
  /** The run's MCP servers and their tools, once prepared (none configured: undefined). */
  mcp?: RunMcp;
  /** The long-term memory store of the session's runs (LangGraph's `config.store`), opened on first use. */
  readonly memory: LazyStore;
  /** Memory settings from the environment (undefined: off). */
  readonly memorySettings?: MemorySettings;
  /** Lessons recalled for the run's input (reflection). */
  lessons?: string[];
  close(): Promise<void>;
}

/** Opens a session of `app` (persistence under the configured home unless one is given). */
export async function openSession(
  app: RunApp,
  options: Pick<RunOptions, "config" | "persistence">,
  config: AppConfig = loadAppConfig(options.config),
  open: { mustExist?: boolean } = {},
): Promise<Session> {
  const persistence =
    options.persistence ?? (await openPersistenceFor(persistenceLocation(config), open));
  let graph: AppGraph | undefined;
  const env = readEnv();
  const memory = new LazyStore(() =>
    openMemoryStore(persistenceLocation(config), memoryStoreOptions(env)),
  );
  const session: Session = {
    app,
    config,
    persistence,
    memory,
    memorySettings: memorySettingsOf(env),
    get graph() {
      graph ??= app.graph(persistence.checkpointer);
      return graph;
    },
    async close() {
      await session.services?.close().catch(() => {});
      await session.mcp?.close().catch(() => {});
      await memory.close().catch(() => {});
      if (!options.persistence) await persistence.close();
    },
  };
  return session;
}

/** Every name a model is resolved for in `app`: its agents, then its other model callers. */
export function modelUsersOf(app: RunApp): string[] {
  return [...app.team.members.map((m) => m.name), ...(app.modelUsers ?? [])];
}

/** Fills in the endpoint's first model when none is configured, then checks every agent has one. */
async function requireModel(session: Session): Promise<void> {
  const { config, app } = session;
  const agents = modelUsersOf(app);
  if (!config.model && config.baseURL) config.model = await detectModel(config, agents);
  assertModelConfigured(config, agents);
}

/**
 * A resumed thread uses the model it was started with when none is configured now (before asking
 * the endpoint which models it serves).
 */
function applyStoredModel(config: AppConfig, stored: Record<string, unknown>): void {
  if (!config.model && typeof stored.model === "string" && stored.model)
    config.model = stored.model;
  if (!Object.keys(config.models).length && stored.models && typeof stored.models === "object")
    config.models = { ...(stored.models as Record<string, string>) };
}

/**
 * Everything a run needs before its first model call: the model the thread was started with
 * (`stored`, when none is configured now), else the endpoint's first, and the app's services.
 */
export async function prepareRun(
  session: Session,
  options: RunOptions,
  stored?: Record<string, unknown>,
): Promise<void> {
  if (stored) applyStoredModel(session.config, stored);
  if (!options.model) await requireModel(session);
  session.services = await session.app.openServices(session.config, options, stored);
  session.mcp = await openRunMcp(session.config, options, session.app.team);
}

/**
 * A run that could not be prepared (no model, a bad corpus, an MCP server that does not start)
 * never started: a thread without a checkpoint is removed from the registry again (the CLI
 * records it before loading the agents), so `codehop threads` lists no 0-checkpoint "failed"
 * thread for a configuration error; asking again starts it afresh. A thread with checkpoints (a
 * conversation's earlier rounds) is marked failed, and one stopped by its user while preparing
 * (Ctrl-C) stays registered as interrupted, resumable with its recorded input.
 */
export async function preparationFailed(
  session: Session,
  threadId: string,
  err: unknown,
  options: RunOptions,
): Promise<void> {
  const { persistence } = session;
  const interrupted = Boolean(options.signal?.aborted);
  const checkpoints = (await persistence.threads.get(threadId))?.checkpoints ?? 0;
  if (!interrupted && checkpoints === 0) return persistence.deleteThread(threadId);
  await persistence.threads.fail(threadId, err instanceof Error ? err.message : String(err), {
    interrupted,
  });
}

/** The run context of a run: models, journal, the app's services, the caller's extras. */
export function runContextFor(session: Session, options: RunOptions, replay: boolean): RunContext {
  const { config, persistence } = session;
  const context: RunContext = {
    // A replay forks: its tasks get new ids, so recorded calls are matched by position too.
    journal: replay ? persistence.journal.forReplay() : persistence.journal,
    modelSettings: modelSettingsOf(config),
    ...session.services?.context,
    ...(session.mcp ? { agentTools: session.mcp.agentTools } : {}),
    ...(session.lessons?.length ? { lessons: session.lessons } : {}),
  };
  Object.assign(
    context,
    memoryContext(session.memorySettings, session.app.team.root, context.agentTools),
  );
  Object.assign(context, options.context);
  if (options.model) context.model = options.model;
  else {
    if (config.model) context.model = config.model;
    if (Object.keys(config.models).length) context.models = config.models;
  }
  return context;
}

/**
 * What printed next-step commands repeat for a run: the data directory and corpus it was given
 * (flags or API options), so `codehop resume ...` reaches the same thread.
 */
export function commandContext(options: Pick<RunOptions, "config">): CommandContext {
  return { home: options.config?.home, corpus: options.config?.corpus };
}
