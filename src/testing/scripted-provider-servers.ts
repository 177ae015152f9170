import Fastify, { type FastifyInstance, type FastifyReply } from "fastify";
import {
  applyStop,
  approxTokens,
  type ChatMessage,
  type ChatRequest,
  type LoggedRequest,
  type Responder,
  type ScriptedReply,
  replyRule,
} from "./scripted-openai-server.ts";

/**
 * Local servers speaking the HTTP APIs of two model providers, with the scripted replies of
 * {@link Responder} (the same responders, trajectory rules included, as the OpenAI-compatible
 * server): LangChain's own provider clients (@langchain/anthropic over the Anthropic SDK,
 * @langchain/google-genai over Google's SDK) talk real HTTP to them, so only the model is simulated.
 *
 * - `anthropic`: the Messages API, `POST /v1/messages` (JSON, or SSE events `message_start` …
 *   `message_stop` with `stream: true`), `x-api-key` checked; `stop_sequences` cut the reply, which
 *   then ends with `stop_reason: "stop_sequence"`; usage `input_tokens` / `output_tokens`
 *   (`cache_read_input_tokens` from a scripted `cached_tokens`).
 * - `gemini`: `POST /v1beta/models/<model>:generateContent` and `:streamGenerateContent?alt=sse`,
 *   `x-goog-api-key` (or `?key=`) checked; `generationConfig.stopSequences` cut the reply; usage in
 *   `usageMetadata` (`promptTokenCount`, `candidatesTokenCount`, `cachedContentTokenCount`).
 *
 * Requests are logged as {@link ChatRequest}s (system prompt first as a `system` message, the
 * provider's assistant role as `assistant`), so tests assert on them as on the OpenAI server's.
 */

/** Which provider API a server speaks. */
export type ProviderApi = "anthropic" | "gemini";

/** Options of {@link ScriptedProviderServer.start}. */
export interface ScriptedProviderServerOptions {
  api: ProviderApi;
  responder: Responder;
  /** The key clients must send (default: any key is accepted, but one must be sent). */
  apiKey?: string;
}

/** A request of the provider API as a {@link ChatRequest} (what responders are given). */
interface Normalized {
  request: ChatRequest;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content.map((p: any) => (typeof p === "string" ? p : (p?.text ?? ""))).join("");
  return content == null ? "" : String(content);
}

function anthropicRequest(body: Record<string, any>): Normalized {
  const messages: ChatMessage[] = [];
  if (body.system !== undefined) messages.push({ role: "system", content: textOf(body.system) });
  for (const m of (body.messages ?? []) as any[])
    messages.push({ role: String(m.role), content: textOf(m.content) });
  return {
    request: {
      model: String(body.model ?? ""),
      messages,
      stop: Array.isArray(body.stop_sequences) ? body.stop_sequences.map(String) : [],
      stream: body.stream === true,
      maxTokens: body.max_tokens,
      temperature: body.temperature,
      body,
    },
  };
}

function geminiRequest(model: string, stream: boolean, body: Record<string, any>): Normalized {
  const messages: ChatMessage[] = [];
  const parts = (c: any) => textOf(c?.parts);
  if (body.systemInstruction)
    messages.push({ role: "system", content: parts(body.systemInstruction) });
  for (const c of (body.contents ?? []) as any[])
    messages.push({
      role: c.role === "model" ? "assistant" : String(c.role ?? "user"),
      content: parts(c),
    });
  const config = body.generationConfig ?? {};
  return {
    request: {
      model,
      messages,
      stop: Array.isArray(config.stopSequences) ? config.stopSequences.map(String) : [],
      stream,
      maxTokens: config.maxOutputTokens,
      temperature: config.temperature,
      body,
    },
  };
}

/** A running provider server. */
export class ScriptedProviderServer {
  /** Every model request received, in order. */
  readonly requests: LoggedRequest[] = [];
  /** Request headers, by request index (to check keys and versions). */
  readonly headers: Record<string, string | string[] | undefined>[] = [];
  /** The base URL the provider's client takes (ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL). */
  baseURL = "";
  responder: Responder;
  readonly api: ProviderApi;
  private readonly apiKey?: string;
  private readonly app: FastifyInstance;

  private constructor(options: ScriptedProviderServerOptions) {
    this.api = options.api;
    this.responder = options.responder;
    this.apiKey = options.apiKey;
    this.app = Fastify({ logger: false, bodyLimit: 50 * 1024 * 1024, forceCloseConnections: true });
    if (options.api === "anthropic") {
      this.app.post("/v1/messages", async (req, reply) => {
        const key = req.headers["x-api-key"];
        if (!key || (this.apiKey !== undefined && key !== this.apiKey))
          return reply.code(401).send({
            type: "error",
            error: { type: "authentication_error", message: "invalid x-api-key" },
          });
        const body = (req.body ?? {}) as Record<string, any>;
        return this.answer(anthropicRequest(body).request, req.headers, reply);
      });
      this.app.get("/v1/models", async () => ({
        data: [{ type: "model", id: "claude-scripted", display_name: "Scripted" }],
        has_more: false,
      }));
    } else {
      this.app.post<{ Params: { call: string }; Querystring: { key?: string } }>(
        "/v1beta/models/:call",
        async (req, reply) => {
          const key = req.headers["x-goog-api-key"] ?? req.query.key;
          if (!key || (this.apiKey !== undefined && key !== this.apiKey))
            return reply.code(400).send({
              error: { code: 400, message: "API key not valid.", status: "INVALID_ARGUMENT" },
            });
          const m = /^(.+):(generateContent|streamGenerateContent)$/.exec(req.params.call);
          if (!m) return reply.code(404).send({ error: { code: 404, message: "not found" } });
          const body = (req.body ?? {}) as Record<string, any>;
          const request = geminiRequest(m[1], m[2] === "streamGenerateContent", body).request;
          return this.answer(request, req.headers, reply);
        },
      );
      this.app.get("/v1beta/models", async () => ({
        models: [{ name: "models/gemini-scripted", displayName: "Scripted" }],
      }));
    }
  }

  /** Starts a server on 127.0.0.1, on a free port. */
  static async start(options: ScriptedProviderServerOptions): Promise<ScriptedProviderServer> {
    const server = new ScriptedProviderServer(options);
    const address = await server.app.listen({ host: "127.0.0.1", port: 0 });
    server.baseURL = address.replace("localhost", "127.0.0.1");
    return server;
  }

  async close(): Promise<void> {
    await this.app.close();
  }

  private async answer(
    request: ChatRequest,
    headers: Record<string, string | string[] | undefined>,
    reply: FastifyReply,
  ): Promise<unknown> {
    const index = this.requests.length;
    const log: LoggedRequest = { index, request, outcome: "pending" };
    this.requests.push(log);
    this.headers.push(headers);
    let scripted: ScriptedReply;
    try {
      scripted = await this.responder(request, { index, server: this as never });
    } catch (err) {
      log.outcome = "error";
      return reply.code(500).send(this.errorBody(500, `scripted responder failed: ${String(err)}`));
    }
    Object.assign(log, replyRule(scripted) ?? {});
    if (typeof scripted === "object" && scripted.delayMs) await sleep(scripted.delayMs);
    if (typeof scripted === "object" && "status" in scripted) {
      log.outcome = "error";
      return reply
        .code(scripted.status)
        .header("content-type", "application/json")
        .send(
          scripted.body ??
            JSON.stringify(this.errorBody(scripted.status, `scripted HTTP ${scripted.status}`)),
        );
    }
    if (typeof scripted === "object" && "garbage" in scripted) {
      log.outcome = "garbage";
      return reply.code(200).header("content-type", "application/json").send(scripted.garbage);
    }
    const raw = typeof scripted === "string" ? scripted : scripted.content;
    const content = applyStop(raw, request.stop);
    const stoppedAt =
      content.length < raw.length
        ? request.stop.find((s) => raw.startsWith(s, content.length))
        : undefined;
    log.outcome = "reply";
    log.content = content;
    const override = typeof scripted === "object" ? scripted.usage : undefined;
    const usage = {
      input:
        override?.prompt_tokens ?? approxTokens(request.messages.map((m) => m.content).join("\n")),
      output: override?.completion_tokens ?? approxTokens(content),
      cached: override?.cached_tokens ?? 0,
    };
    return this.api === "anthropic"
      ? this.anthropicReply(index, request, content, stoppedAt, usage, reply)
      : this.geminiReply(request, content, usage, reply);
  }

  private errorBody(status: number, message: string): unknown {
    return this.api === "anthropic"
      ? {
          type: "error",
          error: { type: status >= 500 ? "api_error" : "invalid_request_error", message },
        }
      : {
          error: { code: status, message, status: status >= 500 ? "INTERNAL" : "INVALID_ARGUMENT" },
        };
  }

  private anthropicReply(
    index: number,
    request: ChatRequest,
    content: string,
    stoppedAt: string | undefined,
    usage: { input: number; output: number; cached: number },
    reply: FastifyReply,
  ): unknown {
    const id = `msg_scripted_${index}`;
    const stop = {
      stop_reason: stoppedAt ? "stop_sequence" : "end_turn",
      stop_sequence: stoppedAt ?? null,
    };
    const usageBody = {
      input_tokens: usage.input,
      output_tokens: usage.output,
      cache_read_input_tokens: usage.cached,
      cache_creation_input_tokens: 0,
    };
    if (!request.stream)
      return {
        id,
        type: "message",
        role: "assistant",
        model: request.model,
        content: [{ type: "text", text: content }],
        ...stop,
        usage: usageBody,
      };
    reply.hijack();
    reply.raw.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const send = (event: string, data: unknown) =>
      reply.raw.write(
        `event: ${event}\ndata: ${JSON.stringify({ type: event, ...(data as object) })}\n\n`,
      );
    send("message_start", {
      message: {
        id,
        type: "message",
        role: "assistant",
        model: request.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...usageBody, output_tokens: 1 },
      },
    });
    send("content_block_start", { index: 0, content_block: { type: "text", text: "" } });
    send("ping", {});
    for (const piece of content.match(/[\s\S]{1,16}/g) ?? [])
      send("content_block_delta", { index: 0, delta: { type: "text_delta", text: piece } });
    send("content_block_stop", { index: 0 });
    send("message_delta", { delta: stop, usage: { output_tokens: usage.output } });
    send("message_stop", {});
    reply.raw.end();
    return reply;
  }

  private geminiReply(
    request: ChatRequest,
    content: string,
    usage: { input: number; output: number; cached: number },
    reply: FastifyReply,
  ): unknown {
    const usageMetadata = {
      promptTokenCount: usage.input,
      candidatesTokenCount: usage.output,
      totalTokenCount: usage.input + usage.output,
      ...(usage.cached ? { cachedContentTokenCount: usage.cached } : {}),
    };
    const response = (text: string, finished: boolean, withUsage: boolean) => ({
      candidates: [
        {
          content: { role: "model", parts: [{ text }] },
          ...(finished ? { finishReason: "STOP" } : {}),
          index: 0,
        },
      ],
      ...(withUsage ? { usageMetadata } : {}),
      modelVersion: request.model,
    });
    if (!request.stream) return response(content, true, true);
    reply.hijack();
    reply.raw.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const pieces = content.match(/[\s\S]{1,16}/g) ?? [""];
    pieces.forEach((piece, i) => {
      const last = i === pieces.length - 1;
      reply.raw.write(`data: ${JSON.stringify(response(piece, last, last))}\n\n`);
    });
    reply.raw.end();
    return reply;
  }
}
