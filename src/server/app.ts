import { randomUUID } from "node:crypto";
import cors from "@fastify/cors";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { z } from "zod";
import { ApiKeyStore } from "./api-keys.ts";
import { AuthError, type AuthFilters, type AuthUser, type ServerAuth } from "./auth.ts";
import { type AuthOptions, checkAuthChoice, openServerAuth } from "./auth-modes.ts";
import { type Backend, type BackendOptions, openBackend } from "./backend.ts";
import { RunEventReader } from "./events.ts";
import { STREAM_MODES } from "./execute.ts";
import { assistantIdOf, DEFAULT_GRAPHS_FILE, type ServedGraph } from "./graphs.ts";
import {
  installLimits,
  limitVariable,
  refusalOf,
  RequestRefused,
  resolveLimits,
  type ServerLimits,
} from "./limits.ts";
import { inClient, RUNS_QUEUE } from "./queue.ts";
import { addStoreRoutes } from "./store-routes.ts";
import { LazyStore, memoryStoreOptions } from "../memory/open.ts";
import { readEnv } from "../config/env.ts";
import { stateToThreadState, toJson } from "./serialize.ts";
import { chatSettingsFromEnv } from "../apps/chat/conversation/settings.ts";
import { ClientSettingError, clientSchemaOf, vetClientRun } from "../core/client-settings.ts";
import { storeUploads } from "../core/uploads.ts";
import {
  type ApiThread,
  type MultitaskStrategy,
  RunConflict,
  type RunKwargs,
  RunLimitReached,
  type RunRecord,
  TERMINAL_RUN_STATUSES,
} from "./store.ts";

/**
 * `codehop serve`: an HTTP server speaking the LangGraph server API that @langchain/langgraph-sdk,
 * LangGraph Studio and agent-chat-ui use — assistants (one per graph of langgraph.json), threads,
 * runs (create / wait / stream / join / cancel), thread state and history — over Postgres. It runs
 * nothing itself: a run is a row plus a job on the queue, executed by `codehop worker` processes;
 * its stream is read back from the events workers write, so any server process can serve any run.
 *
 * Why not @langchain/langgraph-api's embed server (`createEmbedServer`): it executes each run
 * inside the HTTP request of the server process (no queue, no workers), keeps run state and
 * cancellation in process memory, has no assistants routes nor `runs.wait` / `join`, and is
 * marked experimental (no semver).
 */

/** Options of {@link startServer}. */
export interface ServerOptions extends BackendOptions {
  /** Port (0: any free port). Default 8123, the SDK's default. */
  port?: number;
  /** Interface to listen on. Default 127.0.0.1. */
  host?: string;
  /**
   * One key every client must send as `x-api-key` (the SDK's `apiKey`) or `Authorization:
   * Bearer` (shorthand for `auth.apiKey`).
   */
  apiKey?: string;
  /** How clients authenticate (see src/server/auth-modes.ts); none: loopback only. */
  auth?: AuthOptions;
  /** Listen on a non-loopback address without authentication (`--insecure`). */
  insecure?: boolean;
  /**
   * Browser origins allowed to call the server from their pages (CORS), e.g. agent-chat-ui's
   * `http://localhost:3000`; `*` allows any. Default none: a page of another origin cannot read
   * any answer (nor send an API key: its preflight is not answered).
   */
  corsOrigins?: string[];
  /** Receives warnings (no authentication on loopback, a short key ...). Default: stderr. */
  onWarning?: (message: string) => void;
  /** Stream events of runs that ended longer ago than this are deleted. Default 3600 s. */
  eventRetentionSeconds?: number;
  /**
   * Entries of the thread-deletion log (read by workers to drop their own data of a deleted
   * thread) older than this are deleted. Default: the chat files' retention
   * (CODEHOP_CHAT_FILES_RETENTION_DAYS, 30 days); 0 keeps them.
   */
  deletionLogRetentionSeconds?: number;
  /**
   * Per-user limits and request checks (src/server/limits.ts); unset ones come from CODEHOP_SERVE_*
   * or the defaults.
   */
  limits?: Partial<ServerLimits>;
}

/** A started server. */
export interface RunningServer {
  readonly url: string;
  readonly backend: Backend;
  readonly app: FastifyInstance;
  /** What authenticates clients ("none" without authentication). */
  readonly authentication: string;
  close(): Promise<void>;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The authenticated user (the anonymous one without authentication). */
    user: AuthUser;
  }
}

/** The user of every request of a server without authentication. */
const ANONYMOUS: AuthUser = {
  identity: "anonymous",
  display_name: "anonymous",
  permissions: [],
  is_authenticated: false,
};

const VERSION = "0.1.0";

/** Retry-After of a run refused because its user has as many pending or running as they may. */
const RUN_LIMIT_RETRY_SECONDS = 5;

/** An HTTP error with the status and message the client gets (plus fields for its JSON body). */
class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** `checkpoint` keys a client may give (a run's or a state read's checkpoint on its own thread). */
const CHECKPOINT_KEYS = new Set(["checkpoint_id", "checkpoint_ns", "checkpoint_map"]);

/**
 * A client's checkpoint object, or a 422 naming a key it may not carry: the thread comes from the
 * URL, and LangGraph's private keys (`__pregel_*`) are never a client's.
 */
function clientCheckpoint(
  checkpoint: Record<string, unknown> | null | undefined,
  field: string,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(checkpoint ?? {})) {
    if (key === "thread_id") continue; // the URL's thread wins (the SDK echoes it back)
    if (!CHECKPOINT_KEYS.has(key))
      throw new HttpError(
        422,
        `${field}.${key}: not a checkpoint key (use checkpoint_id, checkpoint_ns, checkpoint_map).`,
      );
    if (key === "checkpoint_map" ? typeof value !== "object" : typeof value !== "string")
      throw new HttpError(422, `${field}.${key}: must be a string.`);
    out[key] = value;
  }
  return out;
}

/** A refused client setting as the HTTP error the client gets (403 / 422, naming the key). */
function settingRefused(err: ClientSettingError): HttpError {
  return new HttpError(err.status, err.message, { code: err.code, key: err.path });
}

const StreamMode = z.enum(STREAM_MODES);
const RunCreate = z.object({
  assistant_id: z.string().min(1),
  input: z.unknown().optional(),
  command: z
    .object({
      resume: z.unknown().optional(),
      update: z.unknown().optional(),
      goto: z.unknown().optional(),
    })
    .nullish(),
  config: z
    .object({
      configurable: z.record(z.string(), z.unknown()).optional(),
      recursion_limit: z.number().int().positive().optional(),
      tags: z.array(z.string()).optional(),
    })
    .passthrough()
    .nullish(),
  context: z.record(z.string(), z.unknown()).nullish(),
  metadata: z.record(z.string(), z.unknown()).nullish(),
  stream_mode: z.union([StreamMode, z.array(StreamMode)]).nullish(),
  stream_subgraphs: z.boolean().nullish(),
  stream_resumable: z.boolean().nullish(),
  checkpoint_id: z.string().nullish(),
  checkpoint: z.record(z.string(), z.unknown()).nullish(),
  interrupt_before: z.union([z.literal("*"), z.array(z.string())]).nullish(),
  interrupt_after: z.union([z.literal("*"), z.array(z.string())]).nullish(),
  multitask_strategy: z.enum(["reject", "enqueue", "interrupt", "rollback"]).nullish(),
  if_not_exists: z.enum(["create", "reject"]).nullish(),
  on_disconnect: z.enum(["cancel", "continue"]).nullish(),
  on_completion: z.enum(["delete", "keep"]).nullish(),
  after_seconds: z.number().nullish(),
});
type RunCreateBody = z.infer<typeof RunCreate>;
const ThreadCount = z.object({
  metadata: z.record(z.string(), z.unknown()).nullish(),
  values: z.record(z.string(), z.unknown()).nullish(),
  status: z.enum(["idle", "busy", "interrupted", "error"]).nullish(),
});

/** Parses a body with a schema, or a 422 naming what is wrong. */
function parse<T>(schema: z.ZodType<T>, body: unknown): T {
  const r = schema.safeParse(body ?? {});
  if (!r.success) {
    throw new HttpError(
      422,
      r.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; "),
    );
  }
  return r.data;
}

const iso = (d: Date | string | null | undefined) =>
  d ? (d instanceof Date ? d.toISOString() : d) : null;

function threadJson(t: ApiThread) {
  return {
    thread_id: t.thread_id,
    created_at: iso(t.created_at),
    updated_at: iso(t.updated_at),
    metadata: t.metadata,
    status: t.status,
    values: t.values ?? null,
    interrupts: t.interrupts ?? {},
    config: {},
  };
}

function runJson(r: RunRecord) {
  return {
    run_id: r.run_id,
    thread_id: r.thread_id,
    assistant_id: r.assistant_id,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
    status: r.status,
    metadata: r.metadata,
    kwargs: r.kwargs,
    multitask_strategy: r.multitask_strategy,
  };
}

/** A Fetch API request of a Fastify request's method, URL and headers, for `Auth.authenticate`. */
function fetchRequest(req: FastifyRequest): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    try {
      headers.set(name, Array.isArray(value) ? value.join(", ") : String(value));
    } catch {
      // a header value the Fetch API refuses: the handler does not see it
    }
  }
  let url: string;
  try {
    url = new URL(req.url, `http://${req.headers.host ?? "localhost"}`).href;
  } catch {
    url = new URL(req.url.replace(/[^\x21-\x7e]/g, ""), "http://localhost").href;
  }
  return new Request(url, { method: req.method, headers });
}

/** Whether metadata matches an authorization handler's filters (for the in-memory assistants). */
function matchesFilters(metadata: Record<string, unknown>, filters: AuthFilters | undefined) {
  for (const [key, condition] of Object.entries(filters ?? {})) {
    const value = metadata[key];
    if (condition && typeof condition === "object" && !Array.isArray(condition)) {
      const c = condition as { $eq?: unknown; $contains?: unknown };
      if ("$eq" in c && JSON.stringify(value) !== JSON.stringify(c.$eq)) return false;
      if ("$contains" in c) {
        const wanted = Array.isArray(c.$contains) ? c.$contains : [c.$contains];
        if (!Array.isArray(value) || !wanted.every((w) => value.includes(w))) return false;
      }
    } else if (value !== condition) return false;
  }
  return true;
}

/** Starts `codehop serve` on the database of `options`. */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const host = options.host ?? "127.0.0.1";
  const warn =
    options.onWarning ?? ((message: string) => process.stderr.write(`codehop serve: ${message}\n`));
  const authOptions = {
    ...options.auth,
    ...(options.apiKey !== undefined ? { apiKey: options.apiKey } : {}),
    graphsFile: options.graphsFile ?? DEFAULT_GRAPHS_FILE,
  };
  // Refused before anything opens: an empty key, no authentication on a routable address.
  checkAuthChoice(authOptions, host, options.insecure);
  const backend = await openBackend(options);
  let auth: ServerAuth | undefined;
  try {
    auth = await openServerAuth(
      authOptions,
      async () => new ApiKeyStore(backend.persistence.pool, backend.persistence.schema),
      warn,
    );
  } catch (err) {
    await backend.close();
    throw err;
  }
  if (!auth)
    warn(
      `no authentication: every client of ${host} is one anonymous user who sees every thread (--api-key, --auth keys or --jwks-url turn it on)`,
    );
  const { store, queue, graphs, persistence } = backend;
  const reader = new RunEventReader(store, options.databaseUrl);
  await reader.start();
  const limits: ServerLimits = { ...resolveLimits(), ...options.limits };
  const app = Fastify({ logger: false, bodyLimit: limits.maxBodyBytes });

  if (options.corsOrigins?.length) {
    // Registered (awaited) before the authentication hook: a preflight carries no credentials,
    // and a 401 must carry the CORS headers for the page to read it.
    const origins = options.corsOrigins;
    await app.register(cors, {
      origin: origins.includes("*") ? "*" : origins,
      // What @langchain/langgraph-sdk reads from answers (a streamed run's id, a page's total).
      exposedHeaders: ["content-location", "x-pagination-total"],
      maxAge: 600,
    });
  }
  app.decorateRequest("user", null as unknown as AuthUser);
  app.addHook("onRequest", async (req, reply) => {
    if (!auth) {
      req.user = ANONYMOUS;
      return;
    }
    if (req.url.split("?")[0] === "/ok") return;
    try {
      req.user = await auth.authenticate(fetchRequest(req));
    } catch (err) {
      const e = err instanceof AuthError ? err : new AuthError(500, String(err));
      await reply
        .code(e.status)
        .headers(e.headers)
        .send({ error: e.status === 401 ? "Unauthorized" : "AuthError", message: e.message });
      return reply;
    }
  });
  // Per-user request rate, body shape before parsing, strings PostgreSQL can store.
  await installLimits(app, limits, (req) =>
    auth && req.user ? `user:${req.user.identity}` : `ip:${req.ip}`,
  );
  app.setErrorHandler(async (err: Error & { statusCode?: number; code?: string }, _req, reply) => {
    const refusal = refusalOf(err, limits);
    const status =
      err instanceof HttpError
        ? err.status
        : err instanceof AuthError
          ? err.status
          : (refusal?.status ?? err.statusCode ?? 500);
    const message = refusal?.message ?? err.message;
    const extra =
      err instanceof HttpError
        ? err.extra
        : err instanceof RequestRefused && err.field
          ? { field: err.field }
          : {};
    if (err instanceof AuthError) reply.headers(err.headers);
    if (err instanceof HttpError) reply.headers(err.headers);
    await reply.code(status).send({ error: err.name, message, detail: message, ...extra });
  });

  /**
   * Runs the authorization handler of `event` for the request's user on `value` (which it may
   * change: owner metadata); returns its filters. Nothing without authentication.
   */
  const authorize = async (
    req: FastifyRequest,
    event: string,
    value: Record<string, unknown>,
  ): Promise<AuthFilters | undefined> =>
    auth ? auth.authorize(req.user, event, value) : undefined;
  /** The `configurable` keys that hand the user to graphs and tools (as LangGraph Platform does). */
  const authConfigurable = (req: FastifyRequest): Record<string, unknown> =>
    auth
      ? {
          langgraph_auth_user: JSON.parse(JSON.stringify(req.user)),
          langgraph_auth_user_id: req.user.identity,
          langgraph_auth_permissions: req.user.permissions,
        }
      : {};
  const ownerOf = (req: FastifyRequest) => (auth ? req.user.identity : null);

  const graphOf = (assistantId: string) => {
    const found = graphs.resolve(assistantId);
    if (!found)
      throw new HttpError(
        404,
        `Assistant "${assistantId}" not found (graphs: ${graphs.ids.join(", ")}).`,
      );
    return found;
  };
  const assistantJson = (graphId: string) => ({
    assistant_id: assistantIdOf(graphId),
    graph_id: graphId,
    name: graphId,
    description: null,
    config: {},
    context: {},
    metadata: { created_by: "system" },
    version: 1,
    created_at: new Date(0).toISOString(),
    updated_at: new Date(0).toISOString(),
  });
  /**
   * A thread the request's user may touch for `event` (`threads:read` ...), its handler's filters
   * applied in the query: another user's thread is not found (404), like a thread that does not
   * exist.
   */
  const requireThread = async (
    req: FastifyRequest,
    threadId: string,
    event = "threads:read",
    value: Record<string, unknown> = { thread_id: threadId },
  ) => {
    const filters = await authorize(req, event, value);
    const thread = await store.getThread(threadId, filters);
    if (!thread) throw new HttpError(404, `Thread ${threadId} not found`);
    return thread;
  };
  /** The graph a thread was run with (for its state), or undefined before its first run. */
  const threadGraph = (thread: ApiThread) => {
    const id = thread.metadata.graph_id;
    return typeof id === "string" ? graphs.resolve(id)?.graph : undefined;
  };

  // ---------------------------------------------------------------------------------------------
  // Meta and assistants

  app.get("/ok", async () => ({ ok: true }));
  app.get("/info", async () => ({
    version: VERSION,
    flags: { assistants: true, crons: false, langsmith: false },
    host: { kind: "codehop", project_id: null, revision_id: null },
    workers: await store.liveWorkers(3 * (options.leaseSeconds ?? 30)),
  }));
  app.post("/assistants/search", async (req) => {
    const body = parse(
      z.object({
        graph_id: z.string().nullish(),
        metadata: z.record(z.string(), z.unknown()).nullish(),
        limit: z.number().int().positive().default(10),
        offset: z.number().int().nonnegative().default(0),
      }),
      req.body,
    );
    const filters = await authorize(req, "assistants:search", { ...body });
    // Every assistant here is a graph's, with metadata { created_by: "system" }; the whole list
    // is filtered before a page of it is taken.
    const system: Record<string, unknown> = { created_by: "system" };
    const matches = Object.entries(body.metadata ?? {}).every(([k, v]) => system[k] === v);
    return graphs.ids
      .filter((id) => matches && (!body.graph_id || id === body.graph_id))
      .map(assistantJson)
      .filter((a) => matchesFilters(a.metadata, filters))
      .slice(body.offset, body.offset + body.limit);
  });
  app.post("/assistants/count", async (req) => {
    const filters = await authorize(req, "assistants:search", {});
    return graphs.ids.map(assistantJson).filter((a) => matchesFilters(a.metadata, filters)).length;
  });
  /** An assistant the request's user may read (404 otherwise). */
  const readableAssistant = async (req: FastifyRequest, id: string) => {
    const found = graphOf(id);
    const filters = await authorize(req, "assistants:read", { assistant_id: id });
    const assistant = assistantJson(found.graphId);
    if (!matchesFilters(assistant.metadata, filters))
      throw new HttpError(404, `Assistant "${id}" not found.`);
    return { ...found, assistant };
  };
  app.get<{ Params: { id: string } }>(
    "/assistants/:id",
    async (req) => (await readableAssistant(req, req.params.id)).assistant,
  );
  app.get<{ Params: { id: string }; Querystring: { xray?: string } }>(
    "/assistants/:id/graph",
    async (req) => {
      const { graph } = await readableAssistant(req, req.params.id);
      const xray = req.query.xray;
      const drawing = await graph.getGraphAsync({
        xray: xray === "true" ? true : xray && /^\d+$/.test(xray) ? Number(xray) : undefined,
      });
      return drawing.toJSON();
    },
  );

  // ---------------------------------------------------------------------------------------------
  // Threads

  app.post("/threads", async (req) => {
    const body = parse(
      z.object({
        thread_id: z.string().min(1).nullish(),
        metadata: z.record(z.string(), z.unknown()).nullish(),
        if_exists: z.enum(["raise", "do_nothing"]).nullish(),
      }),
      req.body,
    );
    const value = {
      thread_id: body.thread_id ?? undefined,
      metadata: { ...body.metadata },
      if_exists: body.if_exists ?? "raise",
    };
    await authorize(req, "threads:create", value);
    const thread = await store.createThread(value.thread_id, value.metadata, "raise");
    if (thread) return threadJson(thread);
    // The id is taken: with do_nothing, the existing thread — if it is the user's to read.
    const existing =
      value.if_exists === "do_nothing"
        ? await store.getThread(
            value.thread_id!,
            await authorize(req, "threads:read", { thread_id: value.thread_id }),
          )
        : undefined;
    if (!existing) throw new HttpError(409, `Thread ${body.thread_id} already exists`);
    return threadJson(existing);
  });
  app.post("/threads/search", async (req) => {
    const body = parse(
      z.object({
        metadata: z.record(z.string(), z.unknown()).nullish(),
        values: z.record(z.string(), z.unknown()).nullish(),
        ids: z.array(z.string()).max(1000).nullish(),
        status: z.enum(["idle", "busy", "interrupted", "error"]).nullish(),
        limit: z.number().int().positive().max(1000).default(10),
        offset: z.number().int().nonnegative().default(0),
        sort_by: z.enum(["created_at", "updated_at", "thread_id", "status"]).nullish(),
        sort_order: z.enum(["asc", "desc"]).nullish(),
      }),
      req.body,
    );
    const filters = await authorize(req, "threads:search", { ...body });
    const threads = await store.searchThreads({
      metadata: body.metadata ?? undefined,
      values: body.values ?? undefined,
      status: body.status ?? undefined,
      ids: body.ids ?? undefined,
      filters,
      limit: body.limit,
      offset: body.offset,
      sortBy: body.sort_by ?? undefined,
      sortOrder: body.sort_order ?? undefined,
    });
    return threads.map(threadJson);
  });
  app.post("/threads/count", async (req) => {
    const body = parse(ThreadCount, req.body);
    const filters = await authorize(req, "threads:search", { ...body });
    return store.countThreads({
      metadata: body.metadata ?? undefined,
      values: body.values ?? undefined,
      status: body.status ?? undefined,
      filters,
    });
  });
  app.get<{ Params: { tid: string } }>("/threads/:tid", async (req) =>
    threadJson(await requireThread(req, req.params.tid)),
  );
  app.patch<{ Params: { tid: string } }>("/threads/:tid", async (req) => {
    const body = parse(
      z.object({ metadata: z.record(z.string(), z.unknown()).default({}) }),
      req.body,
    );
    const value = { thread_id: req.params.tid, metadata: { ...body.metadata } };
    const filters = await authorize(req, "threads:update", value);
    const thread = await store.patchThread(req.params.tid, value.metadata, filters);
    if (!thread) throw new HttpError(404, `Thread ${req.params.tid} not found`);
    return threadJson(thread);
  });
  app.post<{ Params: { tid: string } }>("/threads/:tid/copy", async (req) => {
    const source = await requireThread(req, req.params.tid);
    const value = { thread_id: randomUUID(), metadata: { ...source.metadata } };
    await authorize(req, "threads:create", value);
    return threadJson(
      await store.copyThread(source, value.thread_id, value.metadata, ownerOf(req)),
    );
  });
  app.delete<{ Params: { tid: string } }>("/threads/:tid", async (req, reply) => {
    const thread = await requireThread(req, req.params.tid, "threads:delete");
    const inflight = await store.listRuns(thread.thread_id, { limit: 100, offset: 0 });
    for (const run of inflight)
      if (!TERMINAL_RUN_STATUSES.includes(run.status))
        await store.requestCancel(store.pool, run.run_id, "interrupt");
    await persistence.deleteThread(thread.thread_id);
    await store.deleteThreadRows(thread.thread_id);
    return reply.code(204).send();
  });

  const readState = async (
    req: FastifyRequest,
    threadId: string,
    checkpoint: Record<string, unknown> | undefined,
    subgraphs: boolean,
  ) => {
    const thread = await requireThread(req, threadId);
    const graph = threadGraph(thread);
    if (!graph) {
      return {
        values: {},
        next: [],
        tasks: [],
        metadata: null,
        created_at: null,
        checkpoint: null,
        parent_checkpoint: null,
        interrupts: [],
      };
    }
    const state = await graph.getState(
      { configurable: { ...checkpoint, thread_id: threadId } },
      { subgraphs },
    );
    return stateToThreadState(state);
  };
  app.get<{ Params: { tid: string }; Querystring: { subgraphs?: string } }>(
    "/threads/:tid/state",
    async (req) => readState(req, req.params.tid, undefined, req.query.subgraphs === "true"),
  );
  app.get<{ Params: { tid: string; cid: string }; Querystring: { subgraphs?: string } }>(
    "/threads/:tid/state/:cid",
    async (req) =>
      readState(
        req,
        req.params.tid,
        { checkpoint_id: req.params.cid },
        req.query.subgraphs === "true",
      ),
  );
  app.post<{ Params: { tid: string } }>("/threads/:tid/state/checkpoint", async (req) => {
    const body = parse(
      z.object({
        checkpoint: z.record(z.string(), z.unknown()),
        subgraphs: z.boolean().nullish(),
      }),
      req.body,
    );
    return readState(
      req,
      req.params.tid,
      clientCheckpoint(body.checkpoint, "checkpoint"),
      Boolean(body.subgraphs),
    );
  });
  app.post<{ Params: { tid: string } }>("/threads/:tid/state", async (req) => {
    const body = parse(
      z.object({
        values: z.unknown(),
        as_node: z.string().nullish(),
        checkpoint_id: z.string().nullish(),
        checkpoint: z.record(z.string(), z.unknown()).nullish(),
      }),
      req.body,
    );
    const thread = await requireThread(req, req.params.tid, "threads:update");
    const graph = threadGraph(thread);
    if (!graph) throw new HttpError(409, "The thread has no graph yet: run it once first.");
    const config = await graph.updateState(
      {
        configurable: {
          ...clientCheckpoint(body.checkpoint, "checkpoint"),
          ...(body.checkpoint_id ? { checkpoint_id: body.checkpoint_id } : {}),
          thread_id: thread.thread_id,
        },
      },
      body.values,
      body.as_node ?? undefined,
    );
    return { checkpoint: config.configurable };
  });
  const history = async (
    req: FastifyRequest,
    threadId: string,
    q: { limit?: number; before?: unknown; metadata?: unknown; checkpoint?: unknown },
  ) => {
    const thread = await requireThread(req, threadId);
    const graph = threadGraph(thread);
    if (!graph) return [];
    const out = [];
    // A checkpoint id, a checkpoint ({ checkpoint_id ... }) or a config ({ configurable }).
    const beforeCheckpoint =
      typeof q.before === "string"
        ? { checkpoint_id: q.before }
        : q.before && typeof q.before === "object"
          ? clientCheckpoint(
              ("configurable" in q.before
                ? (q.before as { configurable: unknown }).configurable
                : q.before) as Record<string, unknown>,
              "before",
            )
          : undefined;
    const before = beforeCheckpoint
      ? { configurable: { ...beforeCheckpoint, thread_id: threadId } }
      : undefined;
    for await (const state of graph.getStateHistory(
      {
        configurable: {
          ...clientCheckpoint(q.checkpoint as Record<string, unknown> | undefined, "checkpoint"),
          thread_id: threadId,
        },
      },
      { limit: q.limit ?? 10, before, filter: q.metadata ?? undefined },
    ))
      out.push(stateToThreadState(state));
    return out;
  };
  app.post<{ Params: { tid: string } }>("/threads/:tid/history", async (req) =>
    history(
      req,
      req.params.tid,
      parse(
        z.object({
          limit: z.number().int().positive().default(10),
          before: z.unknown().optional(),
          metadata: z.record(z.string(), z.unknown()).nullish(),
          checkpoint: z.record(z.string(), z.unknown()).nullish(),
        }),
        req.body,
      ),
    ),
  );
  app.get<{ Params: { tid: string }; Querystring: { limit?: string; before?: string } }>(
    "/threads/:tid/history",
    async (req) =>
      history(req, req.params.tid, {
        limit: req.query.limit ? Number(req.query.limit) : undefined,
        before: req.query.before,
      }),
  );

  // ---------------------------------------------------------------------------------------------
  // Runs

  /**
   * A run request's context and configurable as the graph's clients may set them (403 / 422
   * naming the first key refused), and its recursion limit held to the graph's own.
   */
  const vetRunSettings = (graph: ServedGraph, body: RunCreateBody) => {
    const configurable: Record<string, unknown> = {
      ...body.config?.configurable,
      ...(body.checkpoint_id ? { checkpoint_id: body.checkpoint_id } : {}),
      ...clientCheckpoint(body.checkpoint, "checkpoint"),
    };
    let vetted;
    try {
      vetted = vetClientRun(clientSchemaOf(graph), { context: body.context, configurable });
    } catch (err) {
      if (err instanceof ClientSettingError) throw settingRefused(err);
      throw err;
    }
    // The steps a run may take: at most what the graph was built with (LangGraph's 25 without).
    const own = (graph as { config?: { recursionLimit?: number } }).config?.recursionLimit ?? 25;
    const asked = body.config?.recursion_limit;
    return {
      context: vetted.context ?? {},
      configurable: vetted.configurable ?? {},
      recursionLimit: asked ? Math.min(asked, own) : undefined,
    };
  };

  /**
   * Refuses (413) uploads that would take a thread or a user past their upload bytes; files the
   * thread already holds count once. Called in the transaction that creates the run, under the
   * user's lock (store.createRun), so two runs cannot both pass.
   */
  const checkUploadRoom = async (
    threadId: string,
    owner: string | null,
    uploads: Array<{ sha256: string; bytes: Buffer }>,
    client: Parameters<typeof store.uploadBytes>[2],
  ) => {
    if (!uploads.length || (!limits.maxThreadUploadBytes && !limits.maxUserUploadBytes)) return;
    const held = await store.uploadBytes(threadId, owner, client);
    const seen = new Set(held.hashes);
    let added = 0;
    for (const u of uploads) {
      if (seen.has(u.sha256)) continue;
      seen.add(u.sha256);
      added += u.bytes.length;
    }
    const over = (limit: number, used: number, what: string, variable: string) => {
      if (limit && used + added > limit)
        throw new HttpError(
          413,
          `These uploads (${added} bytes) would take ${what} past its ${limit} bytes of files (${used} held; ${variable}): delete a thread or send smaller files.`,
        );
    };
    over(
      limits.maxThreadUploadBytes,
      held.thread,
      "the thread",
      limitVariable("maxThreadUploadMb"),
    );
    if (owner)
      over(limits.maxUserUploadBytes, held.user, "your account", limitVariable("maxUserUploadMb"));
  };

  /** Creates a run (and its thread for stateless runs or `if_not_exists: "create"`). */
  const createRun = async (
    req: FastifyRequest,
    threadId: string | undefined,
    body: RunCreateBody,
  ) => {
    const { graphId, graph } = graphOf(body.assistant_id);
    // What the client may set, vetted before anything is stored (src/core/client-settings.ts).
    const settings = vetRunSettings(graph, body);
    if (body.multitask_strategy === "rollback") {
      throw new HttpError(
        422,
        'multitask_strategy "rollback" is not supported by codehop serve (use "interrupt": the thread keeps the stopped run\'s checkpoints).',
      );
    }
    const temporary = threadId === undefined && (body.on_completion ?? "delete") === "delete";
    // The run's authorization: its handler may mark the run's metadata (owner); its filters
    // apply to the thread the run goes on.
    const runValue: Record<string, unknown> = {
      thread_id: threadId ?? null,
      assistant_id: body.assistant_id,
      metadata: { ...body.metadata },
      multitask_strategy: body.multitask_strategy ?? "reject",
      if_not_exists: body.if_not_exists ?? "reject",
      after_seconds: body.after_seconds ?? null,
      kwargs: { input: body.input ?? null, context: settings.context },
    };
    const filters = await authorize(req, "threads:create_run", runValue);
    const newThread = async (thread_id: string | undefined) => {
      const value = { thread_id, metadata: {}, if_exists: "raise" };
      await authorize(req, "threads:create", value);
      return store.createThread(thread_id, value.metadata, "raise");
    };
    let id = threadId;
    // A thread made for this run goes again if the run is refused (limits).
    let madeHere = false;
    if (id === undefined) {
      id = (await newThread(undefined))!.thread_id;
      madeHere = true;
    } else if (!(await store.getThread(id, filters))) {
      // Creating it when the id is free; another user's thread is not found, as if absent.
      if (body.if_not_exists !== "create" || !(await newThread(id)))
        throw new HttpError(404, `Thread ${id} not found`);
    }
    const modes = body.stream_mode
      ? Array.isArray(body.stream_mode)
        ? body.stream_mode
        : [body.stream_mode]
      : [];
    // Uploaded files are stored once, outside the run's input, events and checkpoints — in the
    // transaction that creates the run, so a refused run (a busy thread) leaves none behind.
    const uploads: Array<{ sha256: string; bytes: Buffer }> = [];
    const input = await storeUploads(body.input ?? null, async (sha256, bytes) => {
      uploads.push({ sha256, bytes });
    });
    const kwargs: RunKwargs = {
      input,
      command: (body.command as RunKwargs["command"]) ?? null,
      config: {
        ...(body.config?.tags ? { tags: body.config.tags } : {}),
        ...(settings.recursionLimit ? { recursion_limit: settings.recursionLimit } : {}),
        configurable: { ...settings.configurable, ...authConfigurable(req) },
      },
      context: settings.context,
      stream_mode: modes.length ? modes : ["values"],
      subgraphs: Boolean(body.stream_subgraphs),
      ...(body.interrupt_before ? { interrupt_before: body.interrupt_before } : {}),
      ...(body.interrupt_after ? { interrupt_after: body.interrupt_after } : {}),
      temporary,
    };
    try {
      const { run } = await store.createRun(
        {
          threadId: id,
          assistantId: body.assistant_id,
          graphId,
          kwargs,
          metadata: runValue.metadata as Record<string, unknown>,
          multitaskStrategy: (body.multitask_strategy ?? "reject") as MultitaskStrategy,
          owner: ownerOf(req),
          maxActive: limits.maxActiveRuns,
          maxRunning: limits.maxRunningRuns,
          filters,
        },
        async (client, runId) => {
          await checkUploadRoom(id, ownerOf(req), uploads, client);
          for (const u of uploads)
            await store.putUpload(id, u.sha256, u.bytes, client, ownerOf(req));
          await queue.send(
            RUNS_QUEUE,
            { runId },
            {
              singletonKey: id,
              ...(body.after_seconds ? { startAfter: body.after_seconds } : {}),
              db: inClient(client),
            },
          );
        },
      );
      return run;
    } catch (err) {
      if (madeHere) await store.deleteThreadRows(id).catch(() => {});
      if (err instanceof RunConflict)
        throw new HttpError(err.message.endsWith("not found") ? 404 : 422, err.message);
      if (err instanceof RunLimitReached)
        throw new HttpError(
          429,
          `${err.message} (${limitVariable("maxActiveRuns")})`,
          {},
          { "retry-after": String(RUN_LIMIT_RETRY_SECONDS) },
        );
      throw err;
    }
  };

  /** The CORS headers set on `reply` (lost when a hijacked reply writes its own head). */
  const corsHeaders = (reply: FastifyReply) =>
    Object.fromEntries(
      Object.entries(reply.getHeaders()).filter(([name]) => name.startsWith("access-control-")),
    );

  /** Streams a run's events as SSE (from `after`, ending when the run ends). */
  const sse = async (
    req: FastifyRequest,
    reply: FastifyReply,
    run: RunRecord,
    options: { after?: string; cancelOnDisconnect?: boolean; location: string },
  ) => {
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      ...corsHeaders(reply),
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      connection: "keep-alive",
      "content-location": options.location,
      location: `/threads/${run.thread_id}/runs/${run.run_id}/stream`,
    });
    const closed = new AbortController();
    res.on("close", () => {
      closed.abort();
      if (options.cancelOnDisconnect && !res.writableFinished)
        void store.requestCancel(store.pool, run.run_id, "interrupt").catch(() => {});
    });
    try {
      for await (const e of reader.events(run.run_id, {
        after: options.after,
        signal: closed.signal,
        // A comment line alone (no blank line: the SDK would read one as an empty event).
        onIdle: () => res.write(": heartbeat\n"),
      })) {
        res.write(`id: ${e.id}\nevent: ${e.event}\ndata: ${e.data}\n\n`);
      }
    } catch (err) {
      res.write(
        `event: error\ndata: ${toJson({ error: "StreamError", message: (err as Error).message })}\n\n`,
      );
    }
    res.end();
  };

  /** Answers with a run's result, sending newlines while it runs (keeps proxies and clients from timing out). */
  const waitResult = async (reply: FastifyReply, run: RunRecord, location: string) => {
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      ...corsHeaders(reply),
      "content-type": "application/json",
      "content-location": location,
    });
    const closed = new AbortController();
    res.on("close", () => closed.abort());
    let result = await reader.result(run.run_id, closed.signal, () => res.write("\n"));
    if (result === null) result = (await store.getThread(run.thread_id))?.values ?? null;
    res.end(toJson(result));
  };

  const location = (run: RunRecord, stateless: boolean) =>
    stateless ? `/runs/${run.run_id}` : `/threads/${run.thread_id}/runs/${run.run_id}`;

  for (const stateless of [false, true]) {
    const prefix = stateless ? "" : "/threads/:tid";
    app.post<{ Params: { tid?: string } }>(`${prefix}/runs`, async (req, reply) => {
      const run = await createRun(req, req.params.tid, parse(RunCreate, req.body));
      reply.header("content-location", location(run, stateless));
      return runJson(run);
    });
    app.post<{ Params: { tid?: string } }>(`${prefix}/runs/wait`, async (req, reply) => {
      const run = await createRun(req, req.params.tid, parse(RunCreate, req.body));
      await waitResult(reply, run, location(run, stateless));
    });
    app.post<{ Params: { tid?: string } }>(`${prefix}/runs/stream`, async (req, reply) => {
      const body = parse(RunCreate, req.body);
      const run = await createRun(req, req.params.tid, body);
      await sse(req, reply, run, {
        cancelOnDisconnect: body.on_disconnect === "cancel",
        location: location(run, stateless),
      });
    });
  }

  /** A run of a thread the request's user may touch for `event` (404 otherwise). */
  const requireRun = async (
    req: FastifyRequest,
    threadId: string,
    runId: string,
    event = "threads:read",
  ) => {
    await requireThread(
      req,
      threadId,
      event,
      event === "threads:read" ? { thread_id: threadId } : { thread_id: threadId, run_id: runId },
    );
    const run = await store.getRun(runId, threadId);
    if (!run) throw new HttpError(404, `Run ${runId} not found on thread ${threadId}`);
    return run;
  };
  app.get<{
    Params: { tid: string };
    Querystring: { limit?: string; offset?: string; status?: string };
  }>("/threads/:tid/runs", async (req) => {
    await requireThread(req, req.params.tid);
    const runs = await store.listRuns(req.params.tid, {
      limit: Number(req.query.limit ?? 10),
      offset: Number(req.query.offset ?? 0),
      status: req.query.status,
    });
    return runs.map(runJson);
  });
  app.get<{ Params: { tid: string; rid: string } }>("/threads/:tid/runs/:rid", async (req) =>
    runJson(await requireRun(req, req.params.tid, req.params.rid)),
  );
  app.delete<{ Params: { tid: string; rid: string } }>(
    "/threads/:tid/runs/:rid",
    async (req, reply) => {
      const run = await requireRun(req, req.params.tid, req.params.rid, "threads:delete");
      if (!TERMINAL_RUN_STATUSES.includes(run.status))
        throw new HttpError(409, `Run ${run.run_id} is ${run.status}: cancel it first.`);
      await store.deleteRun(run.run_id, run.thread_id);
      return reply.code(204).send();
    },
  );
  app.get<{ Params: { tid: string; rid: string } }>(
    "/threads/:tid/runs/:rid/join",
    async (req, reply) => {
      const run = await requireRun(req, req.params.tid, req.params.rid);
      await waitResult(reply, run, location(run, false));
    },
  );
  app.get<{ Params: { tid: string; rid: string }; Querystring: { cancel_on_disconnect?: string } }>(
    "/threads/:tid/runs/:rid/stream",
    async (req, reply) => {
      const run = await requireRun(req, req.params.tid, req.params.rid);
      const lastEventId = req.headers["last-event-id"];
      await sse(req, reply, run, {
        after: typeof lastEventId === "string" && /^\d+$/.test(lastEventId) ? lastEventId : "0",
        cancelOnDisconnect: req.query.cancel_on_disconnect === "true",
        location: location(run, false),
      });
    },
  );
  app.post<{
    Params: { tid: string; rid: string };
    Querystring: { wait?: string; action?: string };
  }>("/threads/:tid/runs/:rid/cancel", async (req, reply) => {
    const run = await requireRun(req, req.params.tid, req.params.rid, "threads:update");
    const action = req.query.action ?? "interrupt";
    if (action !== "interrupt")
      throw new HttpError(422, `Cancel action "${action}" is not supported (use "interrupt").`);
    await store.requestCancel(store.pool, run.run_id, "interrupt");
    const wait = req.query.wait === "1" || req.query.wait === "true";
    if (wait) for await (const _ of reader.events(run.run_id)) void _;
    return reply.code(wait ? 204 : 202).send();
  });

  // A run by its id alone (a stateless run, whose thread is gone when it ends): the user's filters
  // apply to the run's own metadata, which its creator's authorization marked.
  app.get<{ Params: { rid: string }; Querystring: { cancel_on_disconnect?: string } }>(
    "/runs/:rid/stream",
    async (req, reply) => {
      const filters = await authorize(req, "threads:read", { run_id: req.params.rid });
      const run = await store.getRun(req.params.rid, undefined, filters);
      if (!run) throw new HttpError(404, `Run ${req.params.rid} not found`);
      const lastEventId = req.headers["last-event-id"];
      await sse(req, reply, run, {
        after: typeof lastEventId === "string" && /^\d+$/.test(lastEventId) ? lastEventId : "0",
        cancelOnDisconnect: req.query.cancel_on_disconnect === "true",
        location: location(run, true),
      });
    },
  );

  // ---------------------------------------------------------------------------------------------
  // Store: the long-term memory the workers' runs use (config.store), each user's namespaces

  const memory = new LazyStore(async () => {
    const { openPostgresMemoryStore } = await import("../memory/postgres-store.ts");
    return openPostgresMemoryStore(
      { pool: persistence.pool, schema: persistence.schema },
      memoryStoreOptions(readEnv()),
    );
  });
  addStoreRoutes(app, { store: () => memory.store(), authorize });

  // Streams of old runs go after a while (the runs themselves stay listed); so do entries of the
  // thread-deletion log older than the chat files' retention (store.pruneThreadDeletions).
  const retention = options.eventRetentionSeconds ?? 3600;
  const deletionLogSeconds =
    options.deletionLogRetentionSeconds ?? chatSettingsFromEnv().filesRetentionDays * 86_400;
  const prune = setInterval(() => {
    void store.pruneEvents(retention).catch(() => {});
    // (0: files are kept forever, so is the log)
    if (deletionLogSeconds > 0) void store.pruneThreadDeletions(deletionLogSeconds).catch(() => {});
  }, 60_000);
  prune.unref();

  await app.listen({ port: options.port ?? 8123, host });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    backend,
    app,
    authentication: auth?.description ?? "none",
    close() {
      closing ??= (async () => {
        clearInterval(prune);
        await reader.stop();
        await app.close();
        await memory.close().catch(() => {});
        await backend.close();
      })();
      return closing;
    },
  };
}
