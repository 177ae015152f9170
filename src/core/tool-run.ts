import { getCallbackManagerForConfig } from "@langchain/core/runnables";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";

/**
 * A tool call of a code action as a LangChain tool run: the run's callback handlers (LangSmith's
 * tracer, codehop's OpenTelemetry handler, LangGraph's `tools` stream mode) see it start and end,
 * and what the tool runs (a sub-agent's graph, its model calls) nests under it, because the tool
 * gets the tool run's child callbacks in its config — as a LangChain tool's `call` does. A config
 * without callback handlers costs nothing but the check.
 */
export async function traceToolRun<T>(
  toolName: string,
  args: Record<string, unknown>,
  config: LangGraphRunnableConfig,
  run: (config: LangGraphRunnableConfig) => Promise<T>,
): Promise<T> {
  const given = config.callbacks as { handlers?: unknown[] } | unknown[] | undefined;
  const count = Array.isArray(given) ? given.length : given?.handlers?.length;
  // No handler on the node's config (tracing off): nothing would see the tool run.
  if (!count) return run(config);
  const manager = await getCallbackManagerForConfig(config);
  if (!manager?.handlers.length) return run(config);
  const toolRun = await manager.handleToolStart(
    { lc: 1, type: "not_implemented", id: ["codehop", "tool", toolName] },
    args,
    undefined,
    undefined,
    undefined,
    undefined,
    toolName,
  );
  let out: T;
  try {
    out = await run({ ...config, callbacks: toolRun.getChild() });
  } catch (err) {
    await toolRun.handleToolError(err);
    throw err;
  }
  await toolRun.handleToolEnd(out);
  return out;
}
