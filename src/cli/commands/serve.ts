import { Command, InvalidArgumentError } from "commander";
import { readEnv } from "../../config/env.ts";
import {
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
  corsOrigin?: string[];
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
    new Command("serve")
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
    const { startServer } = await import("../../server/app.ts");
    const env = readEnv();
    const modes = flags.auth ?? (env.auth ? authModes(env.auth) : []);
    const jwksUrl = flags.jwksUrl ?? env.jwksUrl;
    const server = await startServer({
      ...serverFlagsToOptions(flags),
      port: flags.port,
      host: flags.host,
      insecure: flags.insecure,
      corsOrigins: flags.corsOrigin ?? corsOrigins(env.corsOrigins.join(",")),
      auth: {
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
      },
    });
    const { graphs, persistence } = server.backend;
    process.stderr.write(
      `codehop serve: listening on ${server.url} (graphs ${graphs.ids.join(", ")}; database ${persistence.location}; authentication: ${server.authentication})\n`,
    );
    await untilStopped(() => server.close());
  });
}
