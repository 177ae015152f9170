import { existsSync, readFileSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { Auth } from "@langchain/langgraph-sdk/auth";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { importModule } from "./graphs.ts";
import { invalidText } from "./limits.ts";

/**
 * Who is calling `codehop serve`, and what they may touch: LangGraph Platform's custom auth, for
 * every self-hosted user. The unit is the official `Auth` object of `@langchain/langgraph-sdk/auth`
 * — `authenticate(request)` returns the user, `on("threads:create" | "threads:read" | "*" ...)`
 * handlers add owner metadata and return filters — whether it comes from the operator's code
 * (`langgraph.json`'s `"auth": { "path": "./src/auth.ts:auth" }`, the same file `langgraph dev`
 * loads) or from codehop's built-in modes (API keys mapped to users, JWTs checked against an
 * identity provider's JWKS), which are such an object too.
 *
 * An Auth object that registers no authorization handler gets codehop's owner handlers
 * ({@link ownerOnly}): every resource is its creator's. Register `auth.on("*", () => {})` to share
 * everything instead.
 */

/** The authenticated user, as graphs see it in `config.configurable.langgraph_auth_user`. */
export interface AuthUser {
  identity: string;
  display_name: string;
  permissions: string[];
  is_authenticated: boolean;
  [field: string]: unknown;
}

/** Filters an authorization handler returns: metadata key → value, `{ $eq }` or `{ $contains }`. */
export type AuthFilters = Record<string, unknown>;

/** A refused request: the status (401, 403 ...), message and headers the client gets. */
export class AuthError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "AuthError";
  }
}

/** The handlers an `Auth` object holds (the SDK keeps them in `~handlerCache`). */
interface AuthHandlers {
  authenticate?: (request: Request) => unknown;
  callbacks?: Record<string, (args: Record<string, unknown>) => unknown>;
}

/** Whether `value` is an `Auth` object (duck-typed: the operator's module may load another copy). */
export function isAuthObject(value: unknown): value is Auth {
  return typeof value === "object" && value !== null && "~handlerCache" in value;
}

/** A server's authentication and authorization, from an `Auth` object. */
export interface ServerAuth {
  /** For the start-up line: what authenticates requests. */
  readonly description: string;
  /** The user of a request, or an {@link AuthError} (401 without valid credentials). */
  authenticate(request: Request): Promise<AuthUser>;
  /**
   * Runs the handler of `event` (`threads:read` ...) for `user` on `value` (which a handler may
   * change, e.g. add owner metadata): the filters it returns, undefined for none; an
   * {@link AuthError} (403) when it refuses.
   */
  authorize(
    user: AuthUser,
    event: string,
    value: Record<string, unknown>,
  ): Promise<AuthFilters | undefined>;
}

/**
 * codehop's default authorization: every thread, run and upload belongs to the user who created
 * it. Creates and updates get `metadata.owner = identity` (whatever the client sent there);
 * everything else is filtered to `{ owner: identity }`. The graphs' assistants are everyone's;
 * the store's namespaces are the user's own (`store` events: the namespace must start with the
 * user's identity).
 */
export function ownerOnly(args: {
  resource?: unknown;
  action?: unknown;
  value?: unknown;
  user: { identity: string };
}): AuthFilters | undefined {
  const { resource, action, user } = args;
  const value = (args.value ?? {}) as Record<string, unknown>;
  if (resource === "assistants" && (action === "read" || action === "search")) return undefined;
  if (resource === "store") {
    const namespace = Array.isArray(value.namespace) ? value.namespace : [];
    // A search or listing without a prefix: the user's own namespaces.
    if ((action === "search" || action === "list_namespaces") && namespace.length === 0) {
      value.namespace = [user.identity];
      return undefined;
    }
    if (namespace[0] !== user.identity)
      throw new AuthError(
        403,
        `A store namespace must start with your identity ("${user.identity}").`,
      );
    return undefined;
  }
  if (action === "create" || action === "update" || action === "create_run") {
    const metadata = value.metadata;
    value.metadata = {
      ...(metadata && typeof metadata === "object" ? metadata : {}),
      owner: user.identity,
    };
  }
  return { owner: user.identity };
}

/**
 * The user an `authenticate` handler returned, normalized as LangGraph's server does. An identity
 * that is empty or not storable text (a NUL, a lone surrogate: from a token's claim, say) is no
 * user: 401, before it can reach a query.
 */
function normalizeUser(result: unknown): AuthUser {
  const user = userOf(result);
  const problem = user.identity ? invalidText(user.identity) : "is empty";
  if (problem) throw new AuthError(401, `The credentials name an identity that ${problem}.`);
  return user;
}

function userOf(result: unknown): AuthUser {
  if (typeof result === "string" && result) {
    return { identity: result, display_name: result, permissions: [], is_authenticated: true };
  }
  if (result && typeof result === "object" && typeof (result as AuthUser).identity === "string") {
    const r = result as Partial<AuthUser> & { identity: string };
    const permissions = Array.isArray(r.permissions) ? r.permissions.map(String) : [];
    return {
      ...r,
      identity: r.identity,
      display_name: typeof r.display_name === "string" ? r.display_name : r.identity,
      permissions,
      is_authenticated: r.is_authenticated ?? true,
    };
  }
  throw new AuthError(
    500,
    "The auth handler returned no user: return a string or an object with `identity`.",
  );
}

/** An error a handler threw, as the client's answer (its status for an HTTPException, else 500). */
function asAuthError(err: unknown, fallback: number): AuthError {
  if (err instanceof AuthError) return err;
  const e = err as { status?: unknown; message?: unknown; headers?: unknown } | null;
  if (e && typeof e.status === "number" && e.status >= 400 && e.status < 600) {
    const headers =
      e.headers && typeof e.headers === "object" ? (e.headers as Record<string, string>) : {};
    return new AuthError(e.status, String(e.message || "Unauthorized"), headers);
  }
  return new AuthError(fallback, `The auth handler failed: ${String(e?.message ?? err)}`);
}

/** A {@link ServerAuth} over an `Auth` object (`description` names it for the start-up line). */
export function serverAuthOf(auth: Auth, description: string): ServerAuth {
  const handlers = (auth as unknown as { "~handlerCache": AuthHandlers })["~handlerCache"];
  const authenticate = handlers.authenticate;
  if (typeof authenticate !== "function")
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `${description} registers no authenticate handler (auth.authenticate(async (request) => ...)).`,
    );
  // No authorization handler at all: every resource is its creator's.
  const callbacks: Record<string, (args: Record<string, unknown>) => unknown> =
    handlers.callbacks && Object.keys(handlers.callbacks).length
      ? handlers.callbacks
      : { "*": ownerOnly as (args: Record<string, unknown>) => unknown };
  return {
    description,
    async authenticate(request) {
      let result: unknown;
      try {
        result = await authenticate(request);
      } catch (err) {
        throw asAuthError(err, 500);
      }
      return normalizeUser(result);
    },
    async authorize(user, event, value) {
      const [resource, action] = event.split(":");
      const key = [event, resource, `*:${action}`, "*"].find((k) => callbacks[k]);
      if (!key) return undefined;
      let result: unknown;
      try {
        result = await callbacks[key]({
          event,
          resource,
          action,
          value,
          user,
          permissions: user.permissions,
        });
      } catch (err) {
        throw asAuthError(err, 500);
      }
      if (result === undefined || result === null || result === true) return undefined;
      if (result === false) throw new AuthError(403, "Forbidden");
      if (typeof result !== "object")
        throw new AuthError(
          500,
          `The auth handler for ${event} returned ${typeof result}: return filters, a boolean or nothing.`,
        );
      return result as AuthFilters;
    },
  };
}

/**
 * The `auth.path` of a langgraph.json (`"./src/auth.ts:auth"`, relative to the file), or
 * undefined when it names none.
 */
export function authPathOf(graphsFile: string): string | undefined {
  const path = resolve(graphsFile);
  let spec: { auth?: { path?: unknown } };
  try {
    spec = JSON.parse(readFileSync(path, "utf8"));
  } catch {
    return undefined; // the graphs loader reports an unreadable file
  }
  const target = spec.auth?.path;
  if (target === undefined) return undefined;
  if (typeof target !== "string" || !target.trim())
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `${path}: "auth.path" must be "./file.ts:export".`,
    );
  const [file, exportName = "auth"] = target.split(":");
  const full = isAbsolute(file) ? file : join(dirname(path), file);
  return `${full}:${exportName}`;
}

/** Loads the `Auth` object `target` names (`/abs/file.ts:export`). */
export async function loadAuthFile(target: string): Promise<ServerAuth> {
  const at = target.lastIndexOf(":");
  const file = at > 1 ? target.slice(0, at) : target;
  const exportName = at > 1 ? target.slice(at + 1) : "auth";
  const module = existsSync(file) || !file.endsWith(".ts") ? file : file.replace(/\.ts$/, ".js");
  let auth: unknown;
  try {
    auth = (await importModule(module))[exportName || "default"];
  } catch (err) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Cannot load the auth file ${file}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  if (!isAuthObject(auth))
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `${file} does not export an Auth object as "${exportName}" (new Auth() from @langchain/langgraph-sdk/auth).`,
    );
  return serverAuthOf(auth, `the Auth object of ${file}`);
}
