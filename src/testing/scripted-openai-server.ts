import { LAST_ACTION_NOTE } from "../core/history.ts";
import Fastify, { type FastifyInstance } from "fastify";

/**
 * A local OpenAI-compatible server that replays scripted replies. It is the model for every test,
 * the demo and the benchmarks: codehop's real ChatOpenAI client talks real HTTP to it, so only the
 * thing outside the machine (the LLM) is simulated.
 *
 * Behaves like vLLM / llama.cpp where it matters: honours `stop` (cuts the reply before the first
 * stop sequence), streams SSE when asked (with a usage chunk for `stream_options.include_usage`),
 * reports usage with `prompt_tokens_details.cached_tokens` computed as the prefix shared with an
 * earlier request (a simulation of prefix caching), and serves `/v1/embeddings` with a
 * deterministic hashed bag-of-words embedding.
 */

/** One chat message as received. */
export interface ChatMessage {
  role: string;
  content: string;
  /** The URLs of its `image_url` content parts (data: URLs for inline images), when it has any. */
  images?: string[];
}

/** An audio file sent to `/v1/audio/transcriptions` (multipart form). */
export interface TranscriptionRequest {
  model: string;
  fileName: string;
  mediaType: string;
  bytes: Uint8Array;
}

/** What `/v1/audio/transcriptions` answers: the text, or an HTTP error. */
export type TranscriptionReply = string | { status: number; body?: string };

/** A chat completion request as received (parsed body). */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  stop: string[];
  stream: boolean;
  maxTokens?: number;
  temperature?: number;
  /** The raw JSON body. */
  body: Record<string, unknown>;
}

/** What the server does for one request. */
export type ScriptedReply =
  | string
  | {
      /** Reply text (cut at the first stop sequence, like a real server). */
      content: string;
      /** Wait before answering (simulated model latency, or a timeout test). */
      delayMs?: number;
      /** Override the computed usage. */
      usage?: { prompt_tokens: number; completion_tokens: number; cached_tokens?: number };
    }
  /** An HTTP error (e.g. 429, 500) with an optional body. */
  | { status: number; body?: string; delayMs?: number }
  /** HTTP 200 with a body that is not valid JSON. */
  | { garbage: string; delayMs?: number };

/** Decides the reply for a request. `index` counts requests to this server, from 0. */
export type Responder = (
  req: ChatRequest,
  ctx: { index: number; server: ScriptedOpenAIServer },
) => ScriptedReply | Promise<ScriptedReply>;

/** A request as logged, for assertions (counting calls per agent, checking stop sequences, ...). */
export interface LoggedRequest {
  index: number;
  request: ChatRequest;
  /** Rule name that answered (trajectoryResponder), if any. */
  rule?: string;
  /** Step index chosen by trajectoryResponder. */
  step?: number;
  /** "reply", "error", "garbage". */
  outcome: string;
  /** The content sent back (after stop-sequence cutting). */
  content?: string;
}

/** Approximate token count (≈ 4 characters per token), stable across runs. */
export function approxTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/** Cuts `text` before the earliest stop sequence, as OpenAI-compatible servers do. */
export function applyStop(text: string, stop: string[]): string {
  let cut = text.length;
  for (const s of stop) {
    if (!s) continue;
    const i = text.indexOf(s);
    if (i !== -1 && i < cut) cut = i;
  }
  return text.slice(0, cut);
}

/**
 * Deterministic embedding: hashed bag of lower-cased word tokens, L2-normalised. Similar texts get
 * similar vectors, which is enough to exercise the real vector-search code path offline.
 */
export function hashedEmbedding(text: string, dims = 64): number[] {
  const v = new Array<number>(dims).fill(0);
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    let h = 2166136261;
    for (let i = 0; i < word.length; i++) {
      h ^= word.charCodeAt(i);
      h = Math.imul(h, 16777619);
    }
    const idx = (h >>> 0) % dims;
    v[idx] += (h & 0x100) === 0 ? 1 : -1;
  }
  const norm = Math.sqrt(v.reduce((a, b) => a + b * b, 0)) || 1;
  return v.map((x) => x / norm);
}

function promptText(messages: ChatMessage[]): string {
  return messages.map((m) => `<${m.role}>${m.content}`).join("\n");
}

function commonPrefixLength(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

function normaliseContent(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part: any) => (typeof part === "string" ? part : (part?.text ?? "")))
      .join("");
  }
  return content == null ? "" : String(content);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Options for {@link ScriptedOpenAIServer.start}. */
export interface ScriptedServerOptions {
  responder: Responder;
  /** Port to listen on (0 = a free port, the default). */
  port?: number;
  /**
   * Interface to listen on (default 127.0.0.1); "0.0.0.0" lets other network namespaces reach it
   * (the serving bench's workers on simulated hosts). `baseURL` stays on loopback.
   */
  host?: string;
  /** Dimensions of /v1/embeddings vectors (default 64). */
  embeddingDims?: number;
  /**
   * The embedding /v1/embeddings answers with (default: {@link hashedEmbedding}, a hashed bag of
   * words of `embeddingDims`), e.g. a concept table's (src/testing/concept-embeddings.ts).
   */
  embed?: (text: string) => number[];
  /**
   * Answers `/v1/audio/transcriptions` (OpenAI's multipart API: `file`, `model`), as whisper.cpp's
   * server or vLLM do; without it the endpoint answers 404, as a chat-only server does.
   */
  transcribe?: (req: TranscriptionRequest) => TranscriptionReply | Promise<TranscriptionReply>;
  /**
   * Cut replies at the request's stop sequences, as OpenAI-compatible servers do (default true);
   * false plays a server or proxy that ignores them (what `codehop doctor` checks for).
   */
  honourStop?: boolean;
}

/** The running server. */
export class ScriptedOpenAIServer {
  /** Every chat request received, in order. */
  readonly requests: LoggedRequest[] = [];
  /** Number of /v1/embeddings requests. */
  embeddingRequests = 0;
  /** Every /v1/embeddings request: the model it named and how many texts it sent. */
  readonly embeddingLog: { model: string; texts: number }[] = [];
  /** Every /v1/audio/transcriptions request. */
  readonly transcriptionLog: TranscriptionRequest[] = [];
  /** Base URL to give ChatOpenAI / OPENAI_BASE_URL, e.g. http://127.0.0.1:PORT/v1. */
  baseURL = "";
  responder: Responder;
  private readonly honourStop: boolean;
  private readonly app: FastifyInstance;
  private readonly recentPrompts: string[] = [];

  private constructor(options: ScriptedServerOptions) {
    this.responder = options.responder;
    this.honourStop = options.honourStop ?? true;
    // forceCloseConnections: close() must not wait for idle keep-alive sockets of clients.
    this.app = Fastify({ logger: false, bodyLimit: 50 * 1024 * 1024, forceCloseConnections: true });
    const dims = options.embeddingDims ?? 64;
    const embed = options.embed ?? ((text: string) => hashedEmbedding(text, dims));

    this.app.get("/v1/models", async () => ({
      object: "list",
      data: [{ id: "scripted", object: "model", owned_by: "codehop" }],
    }));

    this.app.post("/v1/embeddings", async (req) => {
      this.embeddingRequests++;
      const body = (req.body ?? {}) as { input?: string | string[]; model?: string };
      const inputs = Array.isArray(body.input) ? body.input : [body.input ?? ""];
      this.embeddingLog.push({ model: String(body.model ?? ""), texts: inputs.length });
      return {
        object: "list",
        model: body.model ?? "hashed-bow",
        data: inputs.map((text, index) => ({
          object: "embedding",
          index,
          embedding: embed(String(text)),
        })),
        usage: { prompt_tokens: 0, total_tokens: 0 },
      };
    });

    // Multipart bodies (audio transcriptions) are read whole and parsed with the platform's FormData.
    this.app.addContentTypeParser(
      "multipart/form-data",
      { parseAs: "buffer" },
      (_req, body, done) => done(null, body),
    );
    this.app.post("/v1/audio/transcriptions", async (req, reply) => {
      if (!options.transcribe) return reply.code(404).send({ error: { message: "Not Found" } });
      const form = await new Response(req.body as Buffer, {
        headers: { "content-type": String(req.headers["content-type"]) },
      }).formData();
      const file = form.get("file");
      if (!(file instanceof Blob))
        return reply.code(400).send({ error: { message: "no file in the form" } });
      const request: TranscriptionRequest = {
        model: String(form.get("model") ?? ""),
        fileName: (file as File).name ?? "",
        mediaType: file.type,
        bytes: new Uint8Array(await file.arrayBuffer()),
      };
      this.transcriptionLog.push(request);
      const answer = await options.transcribe(request);
      if (typeof answer === "string") return { text: answer };
      return reply
        .code(answer.status)
        .send(answer.body ?? JSON.stringify({ error: { message: "scripted error" } }));
    });

    this.app.post("/v1/chat/completions", async (req, reply) => {
      const body = (req.body ?? {}) as Record<string, any>;
      const stopRaw = body.stop;
      const request: ChatRequest = {
        model: String(body.model ?? ""),
        messages: ((body.messages ?? []) as any[]).map((m) => {
          const images = Array.isArray(m.content)
            ? m.content
                .filter((p: any) => p?.type === "image_url")
                .map((p: any) => String(p.image_url?.url ?? p.image_url ?? ""))
            : [];
          return {
            role: String(m.role),
            content: normaliseContent(m.content),
            ...(images.length ? { images } : {}),
          };
        }),
        stop: Array.isArray(stopRaw) ? stopRaw.map(String) : stopRaw ? [String(stopRaw)] : [],
        stream: body.stream === true,
        maxTokens: body.max_tokens ?? body.max_completion_tokens,
        temperature: body.temperature,
        body,
      };
      const index = this.requests.length;
      const log: LoggedRequest = { index, request, outcome: "pending" };
      this.requests.push(log);
      let scripted: ScriptedReply;
      try {
        scripted = await this.responder(request, { index, server: this });
      } catch (err) {
        log.outcome = "error";
        return reply
          .code(500)
          .send({ error: { message: `scripted responder failed: ${String(err)}` } });
      }
      const meta = replyRule(scripted);
      if (meta) Object.assign(log, meta);
      if (typeof scripted === "object" && scripted.delayMs) await sleep(scripted.delayMs);
      if (typeof scripted === "object" && "status" in scripted) {
        log.outcome = "error";
        return reply
          .code(scripted.status)
          .header("content-type", "application/json")
          .send(
            scripted.body ??
              JSON.stringify({ error: { message: `scripted HTTP ${scripted.status}` } }),
          );
      }
      if (typeof scripted === "object" && "garbage" in scripted) {
        log.outcome = "garbage";
        return reply.code(200).header("content-type", "application/json").send(scripted.garbage);
      }
      const raw = typeof scripted === "string" ? scripted : scripted.content;
      const content = this.honourStop ? applyStop(raw, request.stop) : raw;
      log.outcome = "reply";
      log.content = content;

      const prompt = promptText(request.messages);
      let cached = 0;
      for (const prev of this.recentPrompts)
        cached = Math.max(cached, commonPrefixLength(prev, prompt));
      this.recentPrompts.push(prompt);
      if (this.recentPrompts.length > 64) this.recentPrompts.shift();
      const override = typeof scripted === "object" ? scripted.usage : undefined;
      const usage = {
        prompt_tokens: override?.prompt_tokens ?? approxTokens(prompt),
        completion_tokens: override?.completion_tokens ?? approxTokens(content),
        total_tokens: 0,
        prompt_tokens_details: { cached_tokens: override?.cached_tokens ?? Math.floor(cached / 4) },
      };
      usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
      const id = `chatcmpl-scripted-${index}`;
      const created = Math.floor(Date.now() / 1000);
      const finish = "stop";

      if (!request.stream) {
        return {
          id,
          object: "chat.completion",
          created,
          model: request.model,
          choices: [
            {
              index: 0,
              message: { role: "assistant", content },
              finish_reason: finish,
              logprobs: null,
            },
          ],
          usage,
        };
      }
      reply.hijack();
      reply.raw.writeHead(200, {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        connection: "keep-alive",
      });
      const send = (obj: unknown) => reply.raw.write(`data: ${JSON.stringify(obj)}\n\n`);
      const chunk = (delta: Record<string, unknown>, finish_reason: string | null) => ({
        id,
        object: "chat.completion.chunk",
        created,
        model: request.model,
        choices: [{ index: 0, delta, finish_reason }],
      });
      send(chunk({ role: "assistant", content: "" }, null));
      const pieces = content.match(/[\s\S]{1,16}/g) ?? [];
      for (const piece of pieces) send(chunk({ content: piece }, null));
      send(chunk({}, finish));
      if (body.stream_options?.include_usage) {
        send({
          id,
          object: "chat.completion.chunk",
          created,
          model: request.model,
          choices: [],
          usage,
        });
      }
      reply.raw.write("data: [DONE]\n\n");
      reply.raw.end();
      return reply;
    });
  }

  /** Starts a server on 127.0.0.1 (a free port unless one is given). */
  static async start(options: ScriptedServerOptions): Promise<ScriptedOpenAIServer> {
    const server = new ScriptedOpenAIServer(options);
    await server.app.listen({ host: options.host ?? "127.0.0.1", port: options.port ?? 0 });
    const { port } = server.app.server.address() as { port: number };
    server.baseURL = `http://127.0.0.1:${port}/v1`;
    return server;
  }

  /** Requests answered by a given trajectory rule. */
  requestsFor(rule: string): LoggedRequest[] {
    return this.requests.filter((r) => r.rule === rule);
  }

  async close(): Promise<void> {
    await this.app.close();
  }
}

const RULE_META = Symbol("codehop.scripted.rule");

/** The rule and step a trajectory rule (or {@link namedReply}) tagged a reply with, for request logs. */
export function replyRule(reply: ScriptedReply): { rule?: string; step?: number } | undefined {
  return (reply as any)?.[RULE_META];
}

/**
 * A reply tagged with the name of what produced it, as trajectory rules tag theirs: the request
 * log then shows `rule` (and `requestsFor(rule)` finds it) for replies a responder computes.
 */
export function namedReply(reply: ScriptedReply, rule: string, step = 0): ScriptedReply {
  const tagged: any = typeof reply === "string" ? { content: reply } : { ...reply };
  tagged[RULE_META] = { rule, step };
  return tagged;
}

/** One scripted agent trajectory. */
export interface TrajectoryRule {
  /** Name used in the request log (e.g. "manager", "wiki:eiffel"). */
  name: string;
  /**
   * Which requests this rule answers: matched against the task, i.e. the first user message
   * (substring or RegExp), or a predicate over the whole request.
   */
  task: string | RegExp | ((req: ChatRequest) => boolean);
  /** Only match when the system prompt contains this (e.g. to tell planning calls apart). */
  system?: string | RegExp;
  /**
   * Replies by step. The step of a request is the number of user messages after the task message
   * (each observation is one user message; the note recalling the last action is not counted),
   * capped at the last entry.
   */
  steps: ScriptedReply[];
}

function matches(pattern: string | RegExp, text: string): boolean {
  return typeof pattern === "string" ? text.includes(pattern) : pattern.test(text);
}

/**
 * Step of a request: user messages after the first one (observations so far), not counting the
 * condensed view's note recalling the last action.
 */
export function observationCount(req: ChatRequest): number {
  const first = req.messages.findIndex((m) => m.role === "user");
  if (first === -1) return 0;
  return req.messages
    .slice(first + 1)
    .filter((m) => m.role === "user" && !LAST_ACTION_NOTE.test(m.content)).length;
}

/**
 * Responder replaying trajectories keyed by each agent's task text. Stateless (the step comes from
 * the prompt itself), so concurrent agents, resumed runs and replays all get consistent replies.
 * Rules are tried in order; the first match answers. Unmatched requests get `fallback` or an HTTP
 * 500 naming the task, so a test fails loudly instead of hanging.
 */
export function trajectoryResponder(rules: TrajectoryRule[], fallback?: Responder): Responder {
  return async (req, ctx) => {
    const system = req.messages.find((m) => m.role === "system")?.content ?? "";
    const task = req.messages.find((m) => m.role === "user")?.content ?? "";
    for (const rule of rules) {
      if (rule.system && !matches(rule.system, system)) continue;
      const ok = typeof rule.task === "function" ? rule.task(req) : matches(rule.task, task);
      if (!ok) continue;
      const step = Math.min(observationCount(req), rule.steps.length - 1);
      const reply = rule.steps[step];
      const tagged: any = typeof reply === "string" ? { content: reply } : { ...reply };
      tagged[RULE_META] = { rule: rule.name, step };
      return tagged;
    }
    if (fallback) return fallback(req, ctx);
    return {
      status: 500,
      body: JSON.stringify({
        error: { message: `no scripted rule for task: ${task.slice(0, 200)}` },
      }),
    };
  };
}
