import type { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import type { CodehopEnv } from "../config/env.ts";

/**
 * Tracing of runs, switched on by the environment and off by default: LangSmith
 * (LANGSMITH_TRACING=true: one trace per run, with a run per agent graph, node, model call and
 * tool call) and OpenTelemetry spans with the GenAI semantic conventions exported over OTLP/HTTP
 * (CODEHOP_OTEL=1). Each is a LangChain callback handler given to the run; with both off, a run
 * gets no handler and loads none of their packages.
 */

/** The tracing of one run: handlers for its config, and how to wait until they sent everything. */
export interface RunTracing {
  handlers: BaseCallbackHandler[];
  /** Sends what is buffered (call before the run's result is handed back). */
  flush(): Promise<void>;
}

const OFF: RunTracing = { handlers: [], flush: async () => {} };

/** The tracing handlers the environment asks for (none by default). */
export async function runTracing(env: CodehopEnv): Promise<RunTracing> {
  if (!env.langsmithTracing && !env.otelTracing) return OFF;
  const parts: Array<{ handler: BaseCallbackHandler; flush: () => Promise<void> }> = [];
  if (env.langsmithTracing) parts.push((await import("./langsmith.ts")).langsmithTracing(env));
  if (env.otelTracing) parts.push((await import("./otel.ts")).otelTracing(env));
  return {
    handlers: parts.map((p) => p.handler),
    flush: async () => {
      await Promise.all(parts.map((p) => p.flush().catch(() => {})));
    },
  };
}
