import { LangChainTracer } from "@langchain/core/tracers/tracer_langchain";
import { Client } from "langsmith";
import type { CodehopEnv } from "../config/env.ts";

/**
 * LangSmith tracing from codehop's environment snapshot (LANGSMITH_TRACING, _ENDPOINT, _API_KEY,
 * _PROJECT, read by src/config/env.ts, so a `.env` file works too). LangChain itself turns its
 * tracer on from `process.env`; codehop adds its own LangChainTracer to the run instead, which
 * LangChain then does not add a second time (it looks for a handler named "langchain_tracer"), and
 * whose client codehop flushes before a run returns: a CLI process exits right after.
 */

const clients = new Map<string, Client>();

/** The LangSmith client of an endpoint and key (one per process, as LangChain's default). */
function clientFor(env: CodehopEnv): Client {
  const key = JSON.stringify([env.langsmithEndpoint, env.langsmithApiKey]);
  let client = clients.get(key);
  if (!client) {
    client = new Client({
      ...(env.langsmithEndpoint ? { apiUrl: env.langsmithEndpoint } : {}),
      ...(env.langsmithApiKey ? { apiKey: env.langsmithApiKey } : {}),
    });
    clients.set(key, client);
  }
  return client;
}

/** A tracer for one run, and how to wait until its runs are sent. */
export function langsmithTracing(env: CodehopEnv): {
  handler: LangChainTracer;
  flush: () => Promise<void>;
} {
  const client = clientFor(env);
  const handler = new LangChainTracer({
    client,
    ...(env.langsmithProject ? { projectName: env.langsmithProject } : {}),
  });
  return { handler, flush: () => client.awaitPendingTraceBatches() };
}
