import { Command } from "commander";
import { readEnv } from "../../config/env.ts";
import {
  serverFlags,
  serverFlagsToOptions,
  type ServerFlags,
  untilStopped,
  wholeNumber,
} from "../server-support.ts";

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
        "require this key from clients (x-api-key header; default CODEHOP_API_KEY, unset = no key)",
      ),
  ).action(async (flags: ServerFlags & { port: number; host: string; apiKey?: string }) => {
    const { startServer } = await import("../../server/app.ts");
    const apiKey = flags.apiKey ?? readEnv().apiKey;
    const server = await startServer({
      ...serverFlagsToOptions(flags),
      port: flags.port,
      host: flags.host,
      apiKey,
    });
    const { graphs, persistence } = server.backend;
    process.stderr.write(
      `codehop serve: listening on ${server.url} (graphs ${graphs.ids.join(", ")}; database ${persistence.location}${apiKey ? "; API key required" : ""})\n`,
    );
    await untilStopped(() => server.close());
  });
}
