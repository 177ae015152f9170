import cors from "@fastify/cors";
import Fastify, { type FastifyInstance } from "fastify";
import { ApiKeyStore } from "./api-keys.ts";
import { AuthError, type AuthUser, type ServerAuth } from "./auth.ts";
import { type AuthOptions, checkAuthChoice, openServerAuth } from "./auth-modes.ts";
import { addAssistantRoutes } from "./assistant-routes.ts";
import { type Backend, type BackendOptions, openBackend } from "./backend.ts";
import { RunEventReader } from "./events.ts";
import { DEFAULT_GRAPHS_FILE } from "./graphs.ts";
import {
  installLimits,
  drainRefusedBody,
  refusalOf,
  RequestRefused,
  resolveLimits,
  type ServerLimits,
} from "./limits.ts";
import { fetchRequest, HttpError } from "./requests.ts";
import { routeContext } from "./route-context.ts";
import { addRunRoutes } from "./run-routes.ts";
import { addStoreRoutes } from "./store-routes.ts";
import { addThreadRoutes } from "./thread-routes.ts";
import { LazyStore, memoryStoreOptions } from "../memory/open.ts";
import { readEnv } from "../config/env.ts";
import { chatSettingsFromEnv } from "../apps/chat/conversation/settings.ts";
import { CodehopError } from "../errors.ts";

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
 *
 * This file starts the server (authentication hook, limits, errors, the store's pruning); the
 * routes are by resource: assistant-routes.ts (and /ok, /info), thread-routes.ts (threads, state,
 * history), run-routes.ts (runs; run-create.ts creates one), store-routes.ts (the memory store),
 * over route-context.ts (ownership checks) and requests.ts (errors, parsing, JSON of rows).
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

/** The user of every request of a server without authentication. */
const ANONYMOUS: AuthUser = {
  identity: "anonymous",
  display_name: "anonymous",
  permissions: [],
  is_authenticated: false,
};

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
  const { store, persistence } = backend;
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
  app.setErrorHandler(async (err: Error & { statusCode?: number; code?: string }, req, reply) => {
    const refusal = refusalOf(err, limits);
    if (!req.raw.complete) {
      // A body refused before it was read (too large, bad shape): the rest is read and dropped
      // so the client gets this answer; Fastify's "connection: close" would reset it instead.
      drainRefusedBody(req, limits);
      reply.removeHeader("connection");
    }
    const status =
      err instanceof HttpError
        ? err.status
        : err instanceof AuthError
          ? err.status
          : (refusal?.status ?? err.statusCode ?? 500);
    // A server error's own message (a database's, a library's) is not the client's to read: it
    // goes to the server's log, the client gets a stable sentence. codehop's errors say what a
    // user may know (CODEHOP_CHECKPOINT_CORRUPT names the thread, never stored bytes).
    const internal = status >= 500 && !(err instanceof HttpError) && !(err instanceof CodehopError);
    if (internal) console.error(`codehop serve: ${req.method} ${req.url}: ${err.stack ?? err}`);
    const message = internal
      ? "Internal server error (the server's log has the details)."
      : (refusal?.message ?? err.message);
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

  const ctx = routeContext({ backend, auth, reader, limits });
  addAssistantRoutes(app, ctx);
  addThreadRoutes(app, ctx);
  addRunRoutes(app, ctx);

  // ---------------------------------------------------------------------------------------------
  // Store: the long-term memory the workers' runs use (config.store), each user's namespaces

  const memory = new LazyStore(async () => {
    const { openPostgresMemoryStore } = await import("../memory/postgres-store.ts");
    return openPostgresMemoryStore(
      { pool: persistence.pool, schema: persistence.schema },
      memoryStoreOptions(readEnv()),
    );
  });
  addStoreRoutes(app, { store: () => memory.store(), authorize: ctx.authorize });

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
