import { setMaxListeners } from "node:events";
import type { Command } from "commander";
import type { RunOptions } from "../runs/app.ts";
import type { AskResult } from "../runs/result.ts";
import type { createLiveView, LiveView } from "../runs/tree-renderer.ts";
import { setDefaultSandboxMode } from "../core/default-sandbox.ts";
import { cliCommand, placeholder } from "../config/cli-command.ts";
import { colorsFor } from "../config/colors.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { stopOnCtrlC } from "./interrupt.ts";
import { approvalCommands, formatApproval } from "./approval-prompt.ts";

/** Flags shared by commands that run the agents. */
export interface RunFlags {
  json?: boolean;
  quiet?: boolean;
  corpus?: string;
  home?: string;
  model?: string;
}

/**
 * Adds the {@link RunFlags} of commands that continue a recorded thread (resume, replay): the
 * thread's own corpus and model are the defaults there.
 */
export function addContinueFlags(command: Command): Command {
  return command
    .option("--corpus <db>", "local corpus DB (default: the one the thread was started with)")
    .option("--home <dir>", "data directory (default CODEHOP_HOME or .codehop)")
    .option("--model <name>", "model for every agent (default CODEHOP_MODEL)")
    .option("--json", "print one JSON object when the run ends")
    .option("-q, --quiet", "no live tree");
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

/** What {@link terminalRun} hands to a run (start, resume, replay: src/runs/lifecycle.ts). */
export type TerminalRunOptions = Pick<RunOptions, "onEvent" | "onStart" | "signal" | "onWarning">;

/** Exit code of a command whose run paused for a human approval (the thread waits for it). */
export const EXIT_AWAITING_APPROVAL = 3;

/**
 * Wires a run to the terminal: prints the thread id as soon as it is known (stderr), draws the
 * live tree (stderr, unless --json/--quiet), and turns Ctrl-C into a clean stop that leaves the
 * thread resumable.
 */
export function terminalRun(
  flags: RunFlags,
  header: string,
  liveView: typeof createLiveView,
): {
  options: TerminalRunOptions;
  finish(): void;
} {
  const ctrlC = stopOnCtrlC({
    reason: new CodehopError(ErrorCodes.RUN_INTERRUPTED, "interrupted (Ctrl-C)"),
  });
  // Every nested agent and model call listens to this one signal, and LangGraph's runner adds a
  // listener per tick to the signals it derives from it: deep runs legitimately pass Node's
  // default of 10, which would print a "possible memory leak" warning in the middle of the tree.
  setMaxListeners(0, ctrlC.signal);
  let view: LiveView | undefined;
  return {
    options: {
      signal: ctrlC.signal,
      onStart: ({ threadId, dbPath, state, root }) => {
        process.stderr.write(`${header} — thread ${threadId} (checkpoints: ${dbPath})\n`);
        if (!flags.json && !flags.quiet) {
          // The root is named after the app's root agent (manager, planner ...), piped or not.
          view = liveView(process.stderr, { rootName: root });
          if (state) view.progress.seed(state);
        }
      },
      onEvent: (e) => view?.onEvent(e),
      onWarning: (message) => process.stderr.write(`codehop: warning: ${message}\n`),
    },
    finish() {
      // Idempotent: called on success before printing the result, and again from `finally`.
      view?.stop({ interrupted: ctrlC.signal.aborted });
      view = undefined;
      ctrlC.dispose();
    },
  };
}

/**
 * Runs one agent command (ask, resume, replay, each demo question) in the terminal: `run` gets
 * the {@link terminalRun} options, the result is printed with {@link printResult}, and the live
 * tree and the Ctrl-C handler are gone afterwards, whatever happens. With `json`, a failure under
 * --json also prints `{ error, thread_id }` on stdout ({@link withJsonErrors}).
 *
 * A run that pauses for a human approval: in a terminal (stdin and stderr TTYs, no --json) the
 * user is asked (approve / edit / reject) and the thread resumed with the answer, until the run
 * ends or the user leaves; otherwise the pending approval is printed with the commands that
 * answer it, and the exit code is {@link EXIT_AWAITING_APPROVAL}.
 */
export async function runInTerminal<R extends AskResult>(
  flags: RunFlags,
  header: string,
  run: (options: TerminalRunOptions) => Promise<R>,
  json?: { threadId: string; config?: RunOptions["config"] },
  print: (result: R, flags: RunFlags) => void | Promise<void> = printResult,
): Promise<void> {
  // One run, then the process exits: no sandbox process is started ahead for a next run.
  setDefaultSandboxMode("on-demand");
  // The live tree's renderer is loaded when a run starts, not with every command's module.
  const { createLiveView } = await import("../runs/tree-renderer.ts");
  let term = terminalRun(flags, header, createLiveView);
  try {
    let result = await (json
      ? withJsonErrors(flags, json.threadId, () => run(term.options))
      : run(term.options));
    const interactive = Boolean(process.stdin.isTTY && process.stderr.isTTY && !flags.json);
    while (result.approval && interactive) {
      term.finish();
      const { askDecision } = await import("./approval-prompt.ts");
      const decision = await askDecision(result.approval, {
        input: process.stdin,
        output: process.stderr,
      });
      if (!decision) break;
      const { resumeThread } = await import("../apps/run-thread.ts");
      term = terminalRun(flags, "codehop resume", createLiveView);
      const threadId = result.thread_id;
      // The same app continues the thread: its result has the same shape.
      result = (await resumeThread(threadId, {
        config: json?.config,
        ...term.options,
        approval: decision,
      })) as R;
    }
    // The final tree goes out before the result is printed under it.
    term.finish();
    await print(result, flags);
    if (result.approval) process.exitCode = EXIT_AWAITING_APPROVAL;
  } finally {
    term.finish();
  }
}

/**
 * Prints a finished run: one JSON object with --json, else the answer and how to continue. A
 * finished research run prints its report (src/cli/research-output.ts; `out` writes it to files);
 * a paused one prints the approval it waits for, whatever the app.
 */
export async function printResult(
  result: AskResult,
  flags: RunFlags & { out?: string },
): Promise<void> {
  // A research thread (resumed or replayed) prints its report (loaded only then).
  const r = result as AskResult & { report?: unknown; citations?: unknown };
  if (typeof r.report === "string" && Array.isArray(r.citations) && !result.approval) {
    const { printResearchResult } = await import("./research-output.ts");
    return printResearchResult(r as Parameters<typeof printResearchResult>[0], flags);
  }
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return;
  }
  if (result.approval) {
    process.stdout.write(
      `\n${formatApproval(result.approval)}\nThread: ${result.thread_id} (waiting for this approval; checkpoints: ${result.checkpoint_db})\n${approvalCommands(result.thread_id, result.approval, { home: flags.home })}\n`,
    );
    return;
  }
  const u = result.usage.total;
  const c = colorsFor(process.stdout);
  // show / history / replay read the data directory; replay takes the thread's own corpus.
  const home = { home: flags.home };
  const lines = [
    "",
    `${c.bold(c.green("Answer:"))} ${result.answer}`,
    result.sources.length
      ? `Sources: ${result.sources.map((s) => s.title).join("; ")}`
      : "Sources: (none reported)",
    ...verificationLines(result),
    `Usage: ${u.calls} model calls, ${u.input_tokens} input tokens (${u.cached_input_tokens} cached), ${u.output_tokens} output tokens — ` +
      Object.entries(result.usage.by_agent)
        .map(([a, x]) => `${a} ${x.calls} calls`)
        .join(", "),
    `Thread: ${result.thread_id} (status ${result.status}, ${result.steps} manager steps, ${(result.duration_ms / 1000).toFixed(1)} s)`,
    `Checkpoints: ${result.checkpoint_db}`,
    `  ${cliCommand(["show", result.thread_id], home)}   # the whole run as a tree`,
    `  ${cliCommand(["history", result.thread_id], home)}   # list checkpoints`,
    `  ${cliCommand(["replay", result.thread_id, "--checkpoint", placeholder("id")], home)}   # re-run / fork from one`,
    "",
  ];
  process.stdout.write(lines.join("\n"));
}

/** What `ask --verify` found, claim by claim (nothing for an unverified result). */
export function verificationLines(result: object): string[] {
  const v = (result as { verification?: any }).verification;
  const citations = (result as { citations?: any[] }).citations ?? [];
  if (!v || !Array.isArray(v.claims)) return [];
  if (v.status === "failed")
    return [`Verification FAILED (the answer is kept, unchecked): ${v.error ?? "no reason given"}`];
  // Nothing supports the model's answer: its claims are not printed, so none reads as a finding.
  if (v.claims.length > 0 && !v.claims.some((c: any) => c.supported || c.verdict === "fixed"))
    return [
      `Verification: none of the answer's ${v.claims.length} claim(s) is supported by a source passage (${v.usage?.calls ?? 0} verifier call(s)); the model's answer is withheld (--json: unsupported_answer).`,
    ];
  const mark: Record<string, string> = {
    supported: "supported",
    fixed: "partly supported",
    unsupported: "NOT supported",
    unverified: "not verified",
  };
  return [
    `Verification: ${v.supported} of ${v.checked} claim(s) supported by the source passages (${v.usage?.calls ?? 0} verifier call(s))`,
    ...v.claims.map(
      (c: any) =>
        `  - ${mark[c.verdict] ?? c.verdict}${c.citations?.length ? ` [${c.citations.join("][")}]` : ""}: ${c.text}${c.fixed_text ? ` → ${c.fixed_text}` : ""}${c.reason ? ` (${c.reason})` : ""}`,
    ),
    ...citations.map(
      (c: any) =>
        `  [${c.n}] ${c.title}${c.section ? ` — ${c.section}` : ""} (passage ${c.passage_id})`,
    ),
  ];
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

/**
 * `value` for --json output: every camelCase key of every object in it also under its snake_case
 * name (`resumedFrom` → `resumed_from`), the casing every codehop JSON output uses. The camelCase
 * names stay beside them: outputs that printed them before keep working for existing scripts.
 */
export function withSnakeCaseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withSnakeCaseKeys);
  if (!value || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const converted = withSnakeCaseKeys(v);
    out[key] = converted;
    const snake = key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    if (snake !== key && !(snake in value)) out[snake] = converted;
  }
  return out;
}
