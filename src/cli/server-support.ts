import { type Command, InvalidArgumentError } from "commander";
import { readEnv } from "../config/env.ts";
import type { BackendOptions } from "../server/backend.ts";

/** Flags shared by `codehop serve` and `codehop worker`. */
export interface ServerFlags {
  databaseUrl?: string;
  schema?: string;
  queueSchema?: string;
  graphs?: string;
  lease?: number;
}

/** A whole number flag (>= 0). */
export function wholeNumber(name: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 0)
      throw new InvalidArgumentError(`${name} must be a whole number`);
    return n;
  };
}

/** Adds the {@link ServerFlags} to a command. */
export function serverFlags(command: Command): Command {
  return command
    .option(
      "--database-url <url>",
      "postgres:// URL of the shared database (default CODEHOP_DATABASE_URL)",
    )
    .option("--schema <name>", "schema of codehop's tables", "public")
    .option("--queue-schema <name>", "schema of the job queue's tables", "codehop_queue")
    .option("--graphs <file>", "langgraph.json whose graphs are served (default: codehop's own)")
    .option(
      "--lease <seconds>",
      "a worker silent this long loses its runs to other workers (>= 10; use the same value everywhere)",
      wholeNumber("--lease"),
      30,
    );
}

/** The backend options of the flags (the database URL falls back to CODEHOP_DATABASE_URL). */
export function serverFlagsToOptions(flags: ServerFlags): BackendOptions {
  return {
    databaseUrl: flags.databaseUrl ?? readEnv().databaseUrl ?? "",
    schema: flags.schema,
    queueSchema: flags.queueSchema,
    graphsFile: flags.graphs,
    leaseSeconds: flags.lease,
  };
}

/**
 * First thing a `serve` or `worker` action does: in the bundled CLI (dist/bundle), when the
 * langgraph.json to serve names modules the bundle does not hold (the operator's graphs or auth
 * file), throws the {@link RUN_UNBUNDLED} error, on which bin/codehop.mjs runs the command again
 * from dist/cli/main.js: those modules import LangGraph and codehop from node_modules and must
 * share them with the server (classes checked with instanceof). codehop's own graphs run from the
 * bundle (about a second less CPU to start).
 */
export async function leaveBundleForOperatorCode(graphsFile: string | undefined): Promise<void> {
  const { bundledModules, RUN_UNBUNDLED } = await import("../server/bundled-modules.ts");
  if (!bundledModules()) return;
  const { DEFAULT_GRAPHS_FILE, modulesOutsideBundle } = await import("../server/graphs.ts");
  const outside = modulesOutsideBundle(graphsFile ?? DEFAULT_GRAPHS_FILE);
  if (outside.length)
    throw Object.assign(new Error(`operator modules (${outside.join(", ")}): run from dist/cli`), {
      [RUN_UNBUNDLED]: true,
    });
}

/**
 * Keeps a server or worker process up until SIGINT or SIGTERM, then calls `stop` once (a second
 * signal exits at once).
 */
export function untilStopped(stop: () => Promise<void>): Promise<void> {
  return new Promise((resolve) => {
    let stopping = false;
    const onSignal = () => {
      if (stopping) process.exit(130);
      stopping = true;
      void stop()
        .catch((err: unknown) => process.stderr.write(`codehop: ${(err as Error).message}\n`))
        .finally(resolve);
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  });
}
