import { BaseTracer, type Run } from "@langchain/core/tracers/base";
import {
  type Attributes,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import type { CodehopEnv } from "../config/env.ts";

/**
 * OpenTelemetry spans of a run, with the GenAI semantic conventions: a LangChain callback handler
 * that turns the run tree LangChain reports into spans —
 * - an agent graph: `invoke_agent <agent>` (`gen_ai.operation.name` "invoke_agent",
 *   `gen_ai.agent.name`; the root also `gen_ai.conversation.id`, the thread);
 * - a step (a graph node: plan, act, observe ...): a span named by the node (`langgraph.node`,
 *   `langgraph.step`);
 * - a model call: `chat <model>` (kind CLIENT; `gen_ai.operation.name` "chat",
 *   `gen_ai.provider.name` and the older `gen_ai.system`, `gen_ai.request.model` /
 *   `.temperature` / `.max_tokens` / `.stop_sequences`, `gen_ai.response.model` / `.id` /
 *   `.finish_reasons`, `gen_ai.usage.input_tokens` / `.output_tokens`);
 * - a tool call: `execute_tool <tool>` (`gen_ai.operation.name` "execute_tool", `gen_ai.tool.name`).
 * Runs LangGraph hides (`langsmith:hidden`) and bare lambdas get no span of their own. Spans are
 * exported over OTLP/HTTP (JSON) in batches, by one tracer provider per process and endpoint.
 * Library users with an OpenTelemetry SDK of their own give {@link OtelCallbackHandler} their
 * tracer instead.
 */

/** GenAI `gen_ai.provider.name` of LangChain's `ls_provider` values (others pass as they are). */
const PROVIDER_NAMES: Record<string, string> = {
  openai: "openai",
  anthropic: "anthropic",
  google_genai: "gcp.gemini",
  "google-genai": "gcp.gemini",
  google_vertexai: "gcp.vertex_ai",
  bedrock: "aws.bedrock",
  amazon_bedrock: "aws.bedrock",
  mistralai: "mistral_ai",
  groq: "groq",
};

function isAgentGraph(run: Run): boolean {
  const id = (run.serialized as { id?: unknown } | undefined)?.id;
  return run.run_type === "chain" && Array.isArray(id) && id.at(-1) === "CompiledStateGraph";
}

function hidden(run: Run): boolean {
  return (
    (run.tags ?? []).includes("langsmith:hidden") ||
    (run.run_type === "chain" && run.name === "RunnableLambda")
  );
}

const metadataOf = (run: Run) => (run.extra?.metadata ?? {}) as Record<string, unknown>;

/** Attributes without the undefined ones (OpenTelemetry drops them with a warning). */
function attrs(values: Record<string, unknown>): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(values)) {
    if (v === undefined || v === null) continue;
    if (Array.isArray(v)) out[k] = v.map(String);
    else if (typeof v === "number" || typeof v === "boolean" || typeof v === "string") out[k] = v;
    else out[k] = String(v);
  }
  return out;
}

/** What a span is called and starts with, for a run. */
function spanStart(run: Run): { name: string; kind: SpanKind; attributes: Attributes } {
  const meta = metadataOf(run);
  if (run.run_type === "llm") {
    const params = (run.extra?.invocation_params ?? {}) as Record<string, unknown>;
    const model = String(meta.ls_model_name ?? params.model ?? params.model_name ?? run.name);
    const provider = String(meta.ls_provider ?? "");
    const providerName = PROVIDER_NAMES[provider] ?? provider;
    return {
      name: `chat ${model}`,
      kind: SpanKind.CLIENT,
      attributes: attrs({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": providerName || undefined,
        "gen_ai.system": providerName || undefined,
        "gen_ai.request.model": model,
        "gen_ai.request.temperature": meta.ls_temperature,
        "gen_ai.request.max_tokens": meta.ls_max_tokens,
        "gen_ai.request.stop_sequences": meta.ls_stop,
        "gen_ai.agent.name": meta.codehop_agent,
      }),
    };
  }
  if (run.run_type === "tool")
    return {
      name: `execute_tool ${run.name}`,
      kind: SpanKind.INTERNAL,
      attributes: attrs({
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": run.name,
        "gen_ai.tool.type": "function",
      }),
    };
  if (isAgentGraph(run))
    return {
      name: `invoke_agent ${run.name}`,
      kind: SpanKind.INTERNAL,
      attributes: attrs({
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": run.name,
        "gen_ai.conversation.id": run.parent_run_id ? undefined : meta.thread_id,
      }),
    };
  return {
    name: run.name,
    kind: SpanKind.INTERNAL,
    attributes: attrs({
      "langgraph.node": meta.langgraph_node,
      "langgraph.step": meta.langgraph_step,
    }),
  };
}

/** Attributes a model call's span gets when it ends: usage, response model, finish reasons. */
function llmEndAttributes(run: Run): Attributes {
  const generations = (run.outputs?.generations ?? []) as Array<Array<{ message?: any }>>;
  const message = generations[0]?.[0]?.message;
  const usage = message?.usage_metadata ?? message?.kwargs?.usage_metadata;
  const meta = (message?.response_metadata ?? message?.kwargs?.response_metadata ?? {}) as Record<
    string,
    unknown
  >;
  const finish = meta.finish_reason ?? meta.stop_reason ?? meta.finishReason;
  return attrs({
    "gen_ai.usage.input_tokens": usage?.input_tokens,
    "gen_ai.usage.output_tokens": usage?.output_tokens,
    "gen_ai.response.model": meta.model_name ?? meta.model ?? meta.modelVersion,
    "gen_ai.response.id": message?.id ?? message?.kwargs?.id,
    "gen_ai.response.finish_reasons": finish === undefined ? undefined : [String(finish)],
  });
}

/**
 * A LangChain callback handler that records each run as an OpenTelemetry span of `tracer` (see
 * the module comment for names and attributes).
 */
export class OtelCallbackHandler extends BaseTracer {
  name = "codehop_otel";
  /** The span of each run, or of its nearest ancestor with one (hidden runs). */
  private readonly spans = new Map<string, Span | undefined>();
  /** Runs that own their span (ended with the run). */
  private readonly own = new Set<string>();

  constructor(private readonly tracer: Tracer) {
    super();
  }

  protected async persistRun(): Promise<void> {}

  override async onRunCreate(run: Run): Promise<void> {
    const parent = run.parent_run_id ? this.spans.get(run.parent_run_id) : undefined;
    if (hidden(run)) {
      this.spans.set(run.id, parent);
      return;
    }
    const { name, kind, attributes } = spanStart(run);
    const context = parent ? trace.setSpan(ROOT_CONTEXT, parent) : ROOT_CONTEXT;
    const span = this.tracer.startSpan(
      name,
      { kind, attributes, startTime: run.start_time },
      context,
    );
    this.spans.set(run.id, span);
    this.own.add(run.id);
  }

  override async onRunUpdate(run: Run): Promise<void> {
    const span = this.spans.get(run.id);
    this.spans.delete(run.id);
    if (!span || !this.own.delete(run.id)) return;
    if (run.run_type === "llm") span.setAttributes(llmEndAttributes(run));
    if (run.error) {
      const type = /^([A-Za-z]*Error)\b/.exec(run.error)?.[1] ?? "error";
      span.setAttribute("error.type", type);
      span.setStatus({ code: SpanStatusCode.ERROR, message: run.error.slice(0, 500) });
    }
    span.end(run.end_time);
  }
}

/** Parses OTLP headers (`k=v,k2=v2`, values URL-encoded as the OpenTelemetry spec says). */
export function parseOtlpHeaders(raw: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of (raw ?? "").split(",")) {
    const i = pair.indexOf("=");
    if (i <= 0) continue;
    out[decodeURIComponent(pair.slice(0, i).trim())] = decodeURIComponent(pair.slice(i + 1).trim());
  }
  return out;
}

/** The default OTLP/HTTP traces URL (a collector on this machine). */
export const DEFAULT_OTLP_TRACES_URL = "http://localhost:4318/v1/traces";

const providers = new Map<string, TracerProvider>();

/** The tracer provider of an endpoint (one per process: its batch processor is shared by runs). */
function providerFor(env: CodehopEnv): TracerProvider {
  const url = env.otelEndpoint ?? DEFAULT_OTLP_TRACES_URL;
  const key = JSON.stringify([url, env.otelHeaders, env.otelServiceName]);
  let provider = providers.get(key);
  if (!provider) {
    const exporter = new OTLPTraceExporter({ url, headers: parseOtlpHeaders(env.otelHeaders) });
    provider = new TracerProvider({
      resource: resourceFromAttributes({ "service.name": env.otelServiceName ?? "codehop" }),
      spanProcessors: [new BatchSpanProcessor({ exporter })],
    });
    providers.set(key, provider);
  }
  return provider;
}

/** The handler of one run and how to wait until its spans are exported. */
export function otelTracing(env: CodehopEnv): {
  handler: OtelCallbackHandler;
  flush: () => Promise<void>;
} {
  const provider = providerFor(env);
  return {
    handler: new OtelCallbackHandler(provider.getTracer("codehop")),
    flush: () => provider.forceFlush(),
  };
}
