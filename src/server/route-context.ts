import type { FastifyRequest } from "fastify";
import type { AuthFilters, AuthUser, ServerAuth } from "./auth.ts";
import type { Backend } from "./backend.ts";
import type { RunEventReader } from "./events.ts";
import type { ServerLimits } from "./limits.ts";
import { HttpError } from "./requests.ts";
import type { ApiThread } from "./store.ts";

/**
 * What every route of `codehop serve` is given: the backend, the authentication, the reader of
 * run events, the limits — and the ownership checks built on them (a handler's authorization of an
 * event, the thread a user may touch, the graph of an assistant or a thread).
 */

declare module "fastify" {
  interface FastifyRequest {
    /** The authenticated user (the anonymous one without authentication). */
    user: AuthUser;
  }
}

/** What the server opened for its routes. */
export interface RouteDeps {
  readonly backend: Backend;
  /** Undefined without authentication (one anonymous user). */
  readonly auth: ServerAuth | undefined;
  readonly reader: RunEventReader;
  readonly limits: ServerLimits;
}

/** {@link RouteDeps} plus the ownership checks every resource's routes use. */
export type RouteContext = ReturnType<typeof routeContext>;

/** The ownership checks of a server's routes over its backend and authentication. */
export function routeContext(deps: RouteDeps) {
  const { auth } = deps;
  const { store, graphs } = deps.backend;
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

  return {
    ...deps,
    authorize,
    authConfigurable,
    ownerOf,
    graphOf,
    requireThread,
    threadGraph,
  };
}
