import { timingSafeEqual } from "node:crypto";
import { isIP } from "node:net";
import { Auth } from "@langchain/langgraph-sdk/auth";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { ApiKeyStore } from "./api-keys.ts";
import {
  authPathOf,
  AuthError,
  type AuthUser,
  loadAuthFile,
  ownerOnly,
  type ServerAuth,
  serverAuthOf,
} from "./auth.ts";
import { checkJwtOptions, type JwtOptions, jwtVerifier, looksLikeJwt } from "./jwt.ts";

/**
 * How `codehop serve` authenticates, chosen by the operator: the `Auth` object of langgraph.json's
 * `auth.path` (the operator's code decides alone), else codehop's built-in modes, any of which
 * may be on at once — one shared key (`--api-key`), API keys mapped to users in the database
 * (`--auth keys`, managed with `codehop keys`), JWTs from an identity provider (`--jwks-url`).
 * With none, the server listens on a loopback address only, unless `--insecure`.
 */

/** What the operator turned on. */
export interface AuthOptions {
  /** One key every client shares (`--api-key`, CODEHOP_API_KEY): one user, {@link SHARED_KEY_USER}. */
  apiKey?: string;
  /** API keys of the database (`--auth keys`): each mapped to its user. */
  apiKeys?: boolean;
  /** Bearer JWTs checked against an identity provider (`--jwks-url` ...). */
  jwt?: JwtOptions;
  /**
   * The `Auth` object to load (`/abs/auth.ts:auth`); default: the `auth.path` of the graphs'
   * langgraph.json, if any.
   */
  authFile?: string;
}

/** The identity of a client holding the shared key. */
export const SHARED_KEY_USER = "shared-key";

/** Whether `host` is a loopback address (only this machine can connect). */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  if (h === "localhost" || h === "::1") return true;
  return isIP(h) === 4 && h.startsWith("127.");
}

/** Constant-time string comparison. */
function same(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The credential of a request: `x-api-key`, else `Authorization: Bearer`. */
export function credentialOf(
  headers: Headers,
): { value: string; from: "x-api-key" | "bearer" } | undefined {
  const apiKey = headers.get("x-api-key")?.trim();
  if (apiKey) return { value: apiKey, from: "x-api-key" };
  const bearer = bearerOf(headers);
  return bearer ? { value: bearer, from: "bearer" } : undefined;
}

/** The token of an `Authorization: Bearer` header. */
function bearerOf(headers: Headers): string | undefined {
  return /^Bearer\s+(\S+)\s*$/i.exec(headers.get("authorization") ?? "")?.[1];
}

/** codehop's built-in authentication as an `Auth` object (owner-only authorization). */
export function builtinAuth(options: {
  apiKey?: string;
  keys?: ApiKeyStore;
  jwt?: (token: string) => Promise<AuthUser>;
}): Auth {
  const ways = [
    options.apiKey || options.keys ? "an API key (x-api-key)" : "",
    options.jwt ? "a bearer token from the identity provider" : "",
  ].filter(Boolean);
  /** The user of one credential, or undefined when it is none codehop knows. */
  const userOf = async (value: string, from: "x-api-key" | "bearer") => {
    if (options.jwt && from === "bearer" && looksLikeJwt(value)) return options.jwt(value);
    if (options.keys) {
      const user = await options.keys.verify(value);
      if (user) return user;
    }
    if (options.apiKey && same(value, options.apiKey))
      return {
        identity: SHARED_KEY_USER,
        display_name: SHARED_KEY_USER,
        permissions: [],
        is_authenticated: true,
        kind: "shared_key",
      };
    return undefined;
  };
  return new Auth()
    .authenticate(async (request: Request) => {
      const credential = credentialOf(request.headers);
      if (!credential)
        throw new AuthError(401, `Authentication required: send ${ways.join(" or ")}.`, {
          "www-authenticate": "Bearer",
        });
      const user = await userOf(credential.value, credential.from);
      if (!user) throw new AuthError(401, "Invalid API key.", { "www-authenticate": "Bearer" });
      // A bearer token beside the x-api-key that is another user's credential: which user the
      // request acts for would depend on which header a server reads first, so it acts for none.
      // (A bearer codehop does not know, such as a proxy's own, is not a credential here.)
      const bearer = bearerOf(request.headers);
      if (credential.from === "x-api-key" && bearer && bearer !== credential.value) {
        const other = await userOf(bearer, "bearer").catch(() => undefined);
        if (other && other.identity !== user.identity)
          throw new AuthError(
            401,
            "The x-api-key and the Authorization header are credentials of two different users: send one.",
            { "www-authenticate": "Bearer" },
          );
      }
      return user;
    })
    .on("*", ownerOnly as never);
}

/**
 * Checks the operator's choice before anything starts: an empty `apiKey` (a variable that was not
 * set, pasted into the command) is an error, not an open server; no authentication at all is
 * refused on a non-loopback `host` unless `insecure`. Returns whether any is configured.
 */
export function checkAuthChoice(
  options: AuthOptions & { graphsFile: string },
  host: string,
  insecure = false,
): boolean {
  if (options.apiKey !== undefined && !options.apiKey.trim()) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      "--api-key is empty (was CODEHOP_API_KEY set?): refusing to start a server without the key it was asked to require. Set the variable, or choose another authentication (--auth keys, --jwks-url).",
    );
  }
  if (options.jwt) checkJwtOptions(options.jwt);
  const any = Boolean(
    options.apiKey ||
    options.apiKeys ||
    options.jwt ||
    options.authFile ||
    authPathOf(options.graphsFile),
  );
  if (!any && !isLoopback(host) && !insecure) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Refusing to listen on ${host} without authentication: anyone who can reach it could run graphs on your model endpoint and read every thread. Turn on authentication (--api-key, --auth keys with \`codehop keys add <user>\`, --jwks-url, or an auth.path in langgraph.json), listen on 127.0.0.1, or pass --insecure if something in front of the server authenticates.`,
    );
  }
  return any;
}

/**
 * The server's authentication from the operator's options (undefined: none configured; see
 * {@link checkAuthChoice}).
 */
export async function openServerAuth(
  options: AuthOptions & { graphsFile: string },
  keys: () => Promise<ApiKeyStore>,
  warn: (message: string) => void,
): Promise<ServerAuth | undefined> {
  const file = options.authFile ?? authPathOf(options.graphsFile);
  const builtin = Boolean(options.apiKey || options.apiKeys || options.jwt);
  if (file) {
    if (builtin)
      warn(
        `the auth file ${file} decides who is who; --api-key, --auth keys and --jwks-url are not used`,
      );
    return loadAuthFile(file);
  }
  if (!builtin) return undefined;
  const apiKey = options.apiKey?.trim();
  if (apiKey && apiKey.length < 16)
    warn(`the API key is ${apiKey.length} characters long: use a random key of 32 or more`);
  const store = options.apiKeys ? await keys() : undefined;
  const jwt = options.jwt ? jwtVerifier(options.jwt) : undefined;
  const modes = [
    apiKey ? "a shared API key" : "",
    store ? "API keys of the database (codehop keys)" : "",
    jwt ? `JWTs of ${options.jwt!.issuer}` : "",
  ].filter(Boolean);
  return serverAuthOf(builtinAuth({ apiKey, keys: store, jwt }), modes.join(", "));
}
