import { EventEmitter, setMaxListeners } from "node:events";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { AskResult } from "./result.ts";
import { createLiveView, type LiveView } from "./tree-renderer.ts";
import type { RunOptions } from "./run.ts";

/** Flags shared by commands that run the agents. */
export interface RunFlags {
  json?: boolean;
  quiet?: boolean;
  corpus?: string;
  home?: string;
  model?: string;
}

/** Configuration overrides from CLI flags (everything else comes from the environment). */
export function configFromFlags(flags: RunFlags): RunOptions["config"] {
  const config: NonNullable<RunOptions["config"]> = {};
  if (flags.corpus) config.corpus = flags.corpus;
  if (flags.home) config.home = flags.home;
  if (flags.model) {
    // "--model" means every agent: per-agent CODEHOP_MODEL_<AGENT> overrides are dropped.
    config.model = flags.model;
    config.models = {};
  }
  return config;
}

/**
 * Wires a run to the terminal: prints the thread id as soon as it is known (stderr), draws the
 * live tree (stderr, unless --json/--quiet), and turns Ctrl-C into a clean stop that leaves the
 * thread resumable.
 */
export function terminalRun(
  flags: RunFlags,
  header: string,
): {
  options: Pick<RunOptions, "onEvent" | "onStart" | "signal">;
  finish(): void;
} {
  const controller = new AbortController();
  // Every nested agent and model call listens to this one signal, and LangGraph's runner adds a
  // listener per tick to the signals it derives from it: deep runs legitimately pass Node's
  // default of 10, which would print a "possible memory leak" warning in the middle of the tree.
  setMaxListeners(0, controller.signal);
  EventEmitter.defaultMaxListeners = Math.max(EventEmitter.defaultMaxListeners, 200);
  let view: LiveView | undefined;
  const onSigint = () => {
    if (controller.signal.aborted) process.exit(130);
    controller.abort(new CodehopError(ErrorCodes.RUN_INTERRUPTED, "interrupted (Ctrl-C)"));
  };
  process.on("SIGINT", onSigint);
  return {
    options: {
      signal: controller.signal,
      onStart: ({ threadId, dbPath, state }) => {
        process.stderr.write(`${header} — thread ${threadId} (checkpoints: ${dbPath})\n`);
        if (!flags.json && !flags.quiet) {
          view = createLiveView(process.stderr);
          if (state) view.progress.seed(state);
        }
      },
      onEvent: (e) => view?.onEvent(e),
    },
    finish() {
      // Idempotent: called on success before printing the result, and again from `finally`.
      view?.stop();
      view = undefined;
      process.off("SIGINT", onSigint);
    },
  };
}

/** Prints a finished run: one JSON object with --json, else the answer and how to continue. */
export function printResult(result: AskResult, flags: RunFlags): void {
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return;
  }
  const u = result.usage.total;
  const lines = [
    "",
    `Answer: ${result.answer}`,
    result.sources.length
      ? `Sources: ${result.sources.map((s) => s.title).join("; ")}`
      : "Sources: (none reported)",
    `Usage: ${u.calls} model calls, ${u.input_tokens} input tokens (${u.cached_input_tokens} cached), ${u.output_tokens} output tokens — ` +
      Object.entries(result.usage.by_agent)
        .map(([a, x]) => `${a} ${x.calls} calls`)
        .join(", "),
    `Thread: ${result.thread_id} (status ${result.status}, ${result.steps} manager steps, ${(result.duration_ms / 1000).toFixed(1)} s)`,
    `Checkpoints: ${result.checkpoint_db}`,
    `  codehop show ${result.thread_id}               # the whole run as a tree`,
    `  codehop history ${result.thread_id}            # list checkpoints`,
    `  codehop replay ${result.thread_id} --checkpoint <id>   # re-run / fork from one`,
    "",
  ];
  process.stdout.write(lines.join("\n"));
}

/**
 * Runs a command body; with --json a failure also prints one JSON object `{ error, thread_id }` on
 * stdout so scripts always get JSON. The error is rethrown for the CLI's plain message + exit code.
 */
export async function withJsonErrors<T>(
  flags: RunFlags,
  threadId: string | undefined,
  body: () => Promise<T>,
): Promise<T> {
  try {
    return await body();
  } catch (err) {
    if (flags.json) {
      const code = CodehopError.isInstance(err) ? err.code : "CODEHOP_INTERNAL";
      const message = err instanceof Error ? err.message : String(err);
      process.stdout.write(
        `${JSON.stringify({ error: { code, message }, thread_id: threadId ?? null })}\n`,
      );
    }
    throw err;
  }
}
