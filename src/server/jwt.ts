import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload } from "jose";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { AuthError, type AuthUser } from "./auth.ts";

/**
 * Bearer JWTs from an identity provider (OIDC single sign-on: Keycloak, Auth0, Entra ID, Google
 * ...), checked with `jose`: the signature against the provider's JWKS (fetched on first use,
 * cached, fetched again for a key id it does not know), the issuer, the audience, the expiry and
 * not-before times. The user is the token's `sub` (or the claim `identityClaim` names); its
 * permissions come from `permissions` (a list) or `scope` (space-separated).
 */

/** What `codehop serve --jwks-url` checks. */
export interface JwtOptions {
  /** The provider's JWKS, e.g. https://idp.example.com/realms/acme/protocol/openid-connect/certs. */
  jwksUrl: string;
  /** The `iss` a token must carry (the provider's issuer URL). */
  issuer: string;
  /** The `aud` a token must carry (this API's client id / audience). */
  audience: string;
  /** The claim that names the user (default `sub`). */
  identityClaim?: string;
  /** Seconds of clock difference tolerated for `exp` / `nbf` (default 30). */
  clockToleranceSeconds?: number;
}

/** Signature algorithms accepted (asymmetric only: a JWKS holds public keys). */
const ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
];

/** Whether a bearer token looks like a JWT (three base64url parts). */
export function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token);
}

/** Checks what JWT authentication needs (CODEHOP_CONFIG_INVALID naming what is missing). */
export function checkJwtOptions(options: JwtOptions): URL {
  for (const [name, value] of [
    ["--jwks-url", options.jwksUrl],
    ["--jwt-issuer", options.issuer],
    ["--jwt-audience", options.audience],
  ] as const) {
    if (!value)
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `JWT authentication needs ${name} (CODEHOP_JWKS_URL, CODEHOP_JWT_ISSUER, CODEHOP_JWT_AUDIENCE): a token is checked against the provider's keys, issuer and audience.`,
      );
  }
  try {
    return new URL(options.jwksUrl);
  } catch {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `--jwks-url is not a URL: ${options.jwksUrl}`,
    );
  }
}

/** A verifier of bearer JWTs (throws {@link AuthError} 401 with the reason). */
export function jwtVerifier(options: JwtOptions): (token: string) => Promise<AuthUser> {
  const url = checkJwtOptions(options);
  const jwks = createRemoteJWKSet(url, { cooldownDuration: 30_000, cacheMaxAge: 10 * 60_000 });
  const claim = options.identityClaim ?? "sub";
  return async (token) => {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, jwks, {
        issuer: options.issuer,
        audience: options.audience,
        algorithms: ALGORITHMS,
        clockTolerance: options.clockToleranceSeconds ?? 30,
      }));
    } catch (err) {
      throw new AuthError(401, `Invalid bearer token: ${reason(err)}.`, {
        "www-authenticate": 'Bearer error="invalid_token"',
      });
    }
    const identity = payload[claim];
    if (typeof identity !== "string" || !identity)
      throw new AuthError(401, `Invalid bearer token: no "${claim}" claim naming the user.`);
    const permissions = Array.isArray(payload.permissions)
      ? payload.permissions.map(String)
      : typeof payload.scope === "string"
        ? payload.scope.split(" ").filter(Boolean)
        : [];
    const name = [payload.name, payload.preferred_username, payload.email].find(
      (v) => typeof v === "string",
    );
    return {
      identity,
      display_name: (name as string | undefined) ?? identity,
      permissions,
      is_authenticated: true,
      kind: "jwt",
      ...(typeof payload.email === "string" ? { email: payload.email } : {}),
    };
  };
}

/** Why jose refused a token, in words a client can act on (never the token itself). */
function reason(err: unknown): string {
  if (err instanceof joseErrors.JWTExpired) return "it has expired";
  if (err instanceof joseErrors.JWTClaimValidationFailed)
    return `claim "${err.claim}" ${err.reason === "check_failed" ? "does not match" : err.reason}`;
  if (err instanceof joseErrors.JWKSNoMatchingKey)
    return "no key of the identity provider signed it";
  if (err instanceof joseErrors.JWSSignatureVerificationFailed)
    return "its signature does not verify";
  if (err instanceof joseErrors.JOSEAlgNotAllowed) return "its algorithm is not accepted";
  if (err instanceof joseErrors.JWKSTimeout || err instanceof joseErrors.JOSEError)
    return (err as Error).message;
  return "it cannot be read";
}
