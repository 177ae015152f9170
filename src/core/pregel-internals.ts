import type { RunnableConfig } from "@langchain/core/runnables";

/**
 * The private LangGraph configuration keys codehop relies on, in one place. They are not part of
 * LangGraph's public API: test/core/pregel-internals.test.ts checks them against the installed
 * LangGraph and fails loudly when an upgrade renames or reshapes them.
 */

/** LangGraph's per-task scratchpad in `configurable` (holds the subgraph invocation counter). */
export const PREGEL_SCRATCHPAD_KEY = "__pregel_scratchpad";

/**
 * LangGraph's key in `configurable` for the abort signals of the running graph. A graph invoked
 * inside a node inherits it and then listens on the *root* graph's signal instead of the `signal`
 * it was given: every concurrent sub-agent added two abort listeners per step to that one signal
 * (MaxListenersExceededWarning at ~6 concurrent sub-agents), and the child ignored its own signal,
 * so a sub-agent kept running after the parent's action had timed out.
 */
export const PREGEL_ABORT_SIGNALS_KEY = "__pregel_abort_signals";

/**
 * Pins the checkpoint namespace of the next graph invoked with this config to `index`. LangGraph
 * numbers graphs invoked inside one node by invocation order (ns, ns|1, ns|2 ...): when a resumed
 * action is served call 0 from the journal, call 1 would become the first invocation and pick up
 * call 0's finished checkpoints. Numbering by the call's index in the action — deterministic for
 * deterministic code — keeps every call on its own checkpoints across crashes and replays.
 */
export function pinSubgraphNamespace(config: RunnableConfig, index: number): RunnableConfig {
  const configurable = config.configurable as Record<string, unknown> | undefined;
  const pad = configurable?.[PREGEL_SCRATCHPAD_KEY];
  if (!pad || typeof pad !== "object") return config;
  // Reads fall through to the node's scratchpad; only the counter the child consumes is ours.
  const pinned = Object.create(pad) as { subgraphCounter: number };
  pinned.subgraphCounter = index;
  return { ...config, configurable: { ...configurable, [PREGEL_SCRATCHPAD_KEY]: pinned } };
}

/**
 * The config without the running graph's abort signals, so a graph invoked with it listens on the
 * `signal` of its own config (see {@link PREGEL_ABORT_SIGNALS_KEY}).
 */
export function withoutInheritedAbortSignals(config: RunnableConfig): RunnableConfig {
  const { [PREGEL_ABORT_SIGNALS_KEY]: _inherited, ...configurable } = config.configurable ?? {};
  return { ...config, configurable };
}

/**
 * LangGraph's key in `configurable` for the stream of the running graph. A graph invoked inside a
 * node with it writes its own events (values, updates) into the caller's stream, where a client
 * streaming subgraphs receives them.
 */
export const PREGEL_STREAM_KEY = "__pregel_stream";

/**
 * The tag LangGraph's "messages" stream mode skips (TAG_NOSTREAM, not exported by LangGraph): a
 * model called under it is not streamed to clients as a chat message.
 */
export const NOSTREAM_TAG = "langsmith:nostream";

/**
 * The config without the running graph's stream: a graph invoked with it still checkpoints under
 * the caller's namespace, but its events stay out of the caller's stream.
 */
export function withoutParentStream(config: RunnableConfig): RunnableConfig {
  const { [PREGEL_STREAM_KEY]: _stream, ...configurable } = config.configurable ?? {};
  return { ...config, configurable };
}
