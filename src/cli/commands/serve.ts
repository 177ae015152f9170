import { Command, InvalidArgumentError } from "commander";
import { readEnv, SERVE_LIMIT_ENV } from "../../config/env.ts";
import type { LimitSettings } from "../../server/limits.ts";
import {
  leaveBundleForOperatorCode,
  serverFlags,
  serverFlagsToOptions,
  type ServerFlags,
  untilStopped,
  wholeNumber,
} from "../server-support.ts";

/** Flags of `codehop serve`. */
interface ServeFlags extends ServerFlags {
  port: number;
  host: string;
  apiKey?: string;
  auth?: string[];
  jwksUrl?: string;
  jwtIssuer?: string;
  jwtAudience?: string;
  jwtIdentityClaim?: string;
  insecure?: boolean;
  maxBodyMb?: number;
  maxJsonDepth?: number;
  maxJsonKeys?: number;
  requestsPerMinute?: number;
  maxActiveRuns?: number;
  maxRunningRuns?: number;
  maxThreadUploadMb?: number;
  maxUserUploadMb?: number;
  corsOrigin?: string[];
}

/** A size in MB (fractions allowed, >= 0). */
function megabytes(name: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!value.trim() || !Number.isFinite(n) || n < 0)
      throw new InvalidArgumentError(`${name} must be a number of MB (0 or more)`);
    return n;
  };
}

/** The per-user limits of `codehop serve` (src/server/limits.ts), each with its variable. */
function limitFlags(command: Command): Command {
  const v = SERVE_LIMIT_ENV;
  return command
    .option(
      "--max-body-mb <mb>",
      `largest request body (default 64; ${v.maxBodyMb})`,
      megabytes("--max-body-mb"),
    )
    .option(
      "--max-json-depth <n>",
      `deepest JSON nesting of a body (default 64; ${v.maxJsonDepth})`,
      wholeNumber("--max-json-depth"),
    )
    .option(
      "--max-json-keys <n>",
      `most keys plus array items in a JSON body (default 100000; ${v.maxJsonMembers})`,
      wholeNumber("--max-json-keys"),
    )
    .option(
      "--requests-per-minute <n>",
      `requests per user a minute, 429 beyond (default 1200, 0: none; ${v.requestsPerMinute})`,
      wholeNumber("--requests-per-minute"),
    )
    .option(
      "--max-active-runs <n>",
      `runs per user pending or running at once, 429 beyond (default 20, 0: none; ${v.maxActiveRuns})`,
      wholeNumber("--max-active-runs"),
    )
    .option(
      "--max-running-runs <n>",
      `runs per user executing at once, the rest wait queued (default 4, 0: none; ${v.maxRunningRuns})`,
      wholeNumber("--max-running-runs"),
    )
    .option(
      "--max-thread-upload-mb <mb>",
      `uploaded files one thread keeps (default 200, 0: none; ${v.maxThreadUploadMb})`,
      megabytes("--max-thread-upload-mb"),
    )
    .option(
      "--max-user-upload-mb <mb>",
      `uploaded files one user keeps over all threads (default 1000, 0: none; ${v.maxUserUploadMb})`,
      megabytes("--max-user-upload-mb"),
    );
}

/** The limits of the flags given (the others come from CODEHOP_SERVE_* or the defaults). */
function limitSettings(flags: ServeFlags): LimitSettings {
  const all: LimitSettings = {
    maxBodyMb: flags.maxBodyMb,
    maxJsonDepth: flags.maxJsonDepth,
    maxJsonMembers: flags.maxJsonKeys,
    requestsPerMinute: flags.requestsPerMinute,
    maxActiveRuns: flags.maxActiveRuns,
    maxRunningRuns: flags.maxRunningRuns,
    maxThreadUploadMb: flags.maxThreadUploadMb,
    maxUserUploadMb: flags.maxUserUploadMb,
  };
  for (const [key, value] of Object.entries(all) as [keyof LimitSettings, number | undefined][]) {
    if (value === undefined) delete all[key];
    else if (value === 0 && (key === "maxBodyMb" || key.startsWith("maxJson")))
      throw new InvalidArgumentError(`a body always has a bound: ${key} must be above 0`);
  }
  return all;
}

/** `--cors-origin a,b`: each an origin as a browser sends it (`http://localhost:3000`) or `*`. */
function corsOrigins(value: string): string[] {
  const origins = value
    .split(",")
    .map((o) => o.trim())
    .filter(Boolean);
  for (const origin of origins) {
    if (origin === "*") continue;
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      parsed = undefined;
    }
    if (!parsed || !/^https?:$/.test(parsed.protocol) || parsed.origin !== origin)
      throw new InvalidArgumentError(
        `${origin} is not an origin: write it as the browser sends it, scheme://host[:port] without a path or trailing slash (e.g. http://localhost:3000), or * for any`,
      );
  }
  return origins;
}

/** `--auth keys[,jwt]`: the built-in authentication modes to turn on. */
function authModes(value: string): string[] {
  const modes = value
    .split(",")
    .map((m) => m.trim())
    .filter(Boolean);
  const unknown = modes.filter((m) => m !== "keys" && m !== "jwt");
  if (unknown.length)
    throw new InvalidArgumentError(
      `unknown authentication mode ${unknown.join(", ")} (keys: API keys of \`codehop keys\`; jwt: --jwks-url)`,
    );
  return modes;
}

/** `codehop serve`: the LangGraph server API over Postgres; runs go to `codehop worker` processes. */
export default function serveCommand(): Command {
  return serverFlags(
    limitFlags(new Command("serve"))
      .description(
        "HTTP server speaking the LangGraph server API (LangGraph SDK, Studio, agent-chat-ui) over Postgres; runs are queued for `codehop worker`",
      )
      .option("--port <n>", "port", wholeNumber("--port"), 8123)
      .option("--host <address>", "interface to listen on", "127.0.0.1")
      .option(
        "--api-key <key>",
        "one key every client sends (x-api-key header; default CODEHOP_API_KEY); an empty key is an error",
      )
      .option(
        "--auth <modes>",
        "built-in authentication: keys (API keys mapped to users: `codehop keys add <user>`), jwt (needs --jwks-url); default CODEHOP_AUTH",
        authModes,
      )
      .option(
        "--jwks-url <url>",
        "accept JWT bearer tokens signed by this JWKS (default CODEHOP_JWKS_URL)",
      )
      .option("--jwt-issuer <iss>", "issuer the tokens must carry (default CODEHOP_JWT_ISSUER)")
      .option(
        "--jwt-audience <aud>",
        "audience the tokens must carry (default CODEHOP_JWT_AUDIENCE)",
      )
      .option("--jwt-identity-claim <claim>", "claim that names the user", "sub")
      .option(
        "--cors-origin <origins>",
        "browser origins whose pages may call the server, comma-separated (agent-chat-ui: http://localhost:3000; * for any; default CODEHOP_CORS_ORIGINS)",
        corsOrigins,
      )
      .option(
        "--insecure",
        "listen on a non-loopback address without authentication (something in front of the server authenticates)",
      ),
  ).action(async (flags: ServeFlags) => {
    const env = readEnv();
    const modes = flags.auth ?? (env.auth ? authModes(env.auth) : []);
    const jwksUrl = flags.jwksUrl ?? env.jwksUrl;
    const auth = {
      // An empty --api-key (an unset variable pasted into the command) is refused, not ignored.
      apiKey: flags.apiKey ?? env.apiKey,
      apiKeys: modes.includes("keys"),
      jwt:
        jwksUrl || modes.includes("jwt")
          ? {
              jwksUrl: jwksUrl ?? "",
              issuer: flags.jwtIssuer ?? env.jwtIssuer ?? "",
              audience: flags.jwtAudience ?? env.jwtAudience ?? "",
              identityClaim: flags.jwtIdentityClaim,
            }
          : undefined,
    };
    // An open server (an empty key, no authentication on a routable address) is refused before
    // the server's modules load (startServer checks again): a refusal costs a fraction of a start.
    const { checkAuthChoice } = await import("../../server/auth-modes.ts");
    const { DEFAULT_GRAPHS_FILE } = await import("../../server/graphs.ts");
    checkAuthChoice(
      { ...auth, graphsFile: flags.graphs ?? DEFAULT_GRAPHS_FILE },
      flags.host,
      flags.insecure,
    );
    await leaveBundleForOperatorCode(flags.graphs);
    const { startServer } = await import("../../server/app.ts");
    const { resolveLimits } = await import("../../server/limits.ts");
    const server = await startServer({
      ...serverFlagsToOptions(flags),
      port: flags.port,
      host: flags.host,
      insecure: flags.insecure,
      limits: resolveLimits(limitSettings(flags)),
      corsOrigins: flags.corsOrigin ?? corsOrigins(env.corsOrigins.join(",")),
      auth,
    });
    const { graphs, persistence } = server.backend;
    process.stderr.write(
      `codehop serve: listening on ${server.url} (graphs ${graphs.ids.join(", ")}; database ${persistence.location}; authentication: ${server.authentication})\n`,
    );
    await untilStopped(() => server.close());
  });
}
