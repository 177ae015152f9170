import { basename, extname, join } from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { readEnv } from "../../config/env.ts";
import { CodehopError, ErrorCodes } from "../../errors.ts";
import type { EvalReport } from "../../eval/report.ts";
import { cliCommand } from "../../config/cli-command.ts";
import {
  DATASET_FORMATS,
  SYSTEM_NAMES,
  type DatasetFormat,
  type SystemName,
} from "../../eval/types.ts";
import { stopOnCtrlC } from "../interrupt.ts";

function positiveInt(name: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n <= 0)
      throw new InvalidArgumentError(`${name} must be a positive integer`);
    return n;
  };
}

/** `--max-error-rate`: a fraction in [0, 1] ("0.25") or a percentage ("25%"). */
export function errorRate(value: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(%?)\s*$/.exec(value);
  const n = m ? Number(m[1]) / (m[2] ? 100 : 1) : Number.NaN;
  if (!(n >= 0 && n <= 1))
    throw new InvalidArgumentError(
      "expected a fraction from 0 to 1 (e.g. 0.25) or a percentage (25%)",
    );
  return n;
}

/** Errors shown in the terminal after the table (report.md and report.html list them all). */
const ERRORS_SHOWN = 5;

/**
 * The systems whose share of failed questions is over `maxRate`, and the first errors of the
 * run, for the terminal.
 */
export function errorSummary(
  report: EvalReport,
  maxRate: number,
): { over: string[]; first: string[]; total: number } {
  const over: string[] = [];
  for (const s of report.systems) {
    if (s.questions > 0 && s.errors / s.questions > maxRate)
      over.push(
        `${s.system} ${s.errors}/${s.questions} (${Math.round((100 * s.errors) / s.questions)}%)`,
      );
  }
  const failed = report.results.filter((r) => r.error);
  const first = failed
    .slice(0, ERRORS_SHOWN)
    .map((r) => `  ${r.system} ${r.questionId}: ${String(r.error).split("\n")[0].slice(0, 240)}`);
  return { over, first, total: failed.length };
}

function systemList(value: string): SystemName[] {
  const names = value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = names.filter((n) => !SYSTEM_NAMES.includes(n as SystemName));
  if (names.length === 0 || unknown.length) {
    throw new InvalidArgumentError(
      `expected a comma-separated subset of ${SYSTEM_NAMES.join(",")}${unknown.length ? `, got ${unknown.join(",")}` : ""}`,
    );
  }
  return [...new Set(names)] as SystemName[];
}

/**
 * `codehop eval`: compares agentic / rag / direct on a multi-hop QA dataset with the configured
 * model and writes report.json, report.md, report.html and trajectory exports under --out.
 * Ctrl-C stops starting new questions, cancels the ones in flight and writes a partial report;
 * rerunning the same command continues where it stopped. A second Ctrl-C quits at once.
 */
export default function evalCommand(): Command {
  return new Command("eval")
    .description(
      "Measure answer quality, tokens and time of agentic / rag / direct on a QA dataset",
    )
    .requiredOption(
      "--dataset <file>",
      "dataset file (HotpotQA / 2Wiki JSON, MuSiQue JSONL, or JSONL of {question, answer, aliases?}), or a GAIA folder (metadata.jsonl and its attachments)",
    )
    .addOption(
      new Option(
        "--format <format>",
        "dataset format (guessed from the file when omitted)",
      ).choices([...DATASET_FORMATS]),
    )
    .option("--limit <n>", "only the first N questions", positiveInt("--limit"))
    .option("--concurrency <k>", "questions in flight at once", positiveInt("--concurrency"), 2)
    .addOption(
      new Option(
        "--systems <list>",
        `systems to compare, comma-separated, of ${SYSTEM_NAMES.join(", ")} (default agentic,rag,direct; GAIA: assistant,direct)`,
      ).argParser(systemList),
    )
    .option(
      "--out <dir>",
      "output directory (reports, results, checkpoints, corpus); reuse it to resume (default: $CODEHOP_HOME/eval/<dataset name>)",
    )
    .option("--k <n>", "passages retrieved by the rag baseline", positiveInt("--k"), 5)
    .option(
      "--timeout <seconds>",
      "time limit per question and system (over it: stored as an error, retried by the next run)",
      positiveInt("--timeout"),
    )
    .option(
      "--judge",
      "also grade answers with an LLM judge (CODEHOP_JUDGE_MODEL; on by default when it is set)",
    )
    .option("--no-judge", "do not run the LLM judge even if CODEHOP_JUDGE_MODEL is set")
    .option(
      "--max-error-rate <rate>",
      "exit with an error (code 2) when a system failed on more than this share of its questions (0-1 or N%; 1 = never)",
      errorRate,
      0.25,
    )
    .option("--no-progress", "no progress bar")
    .option(
      "--queue <url>",
      "distributed: put the questions on the Postgres queue at this postgres:// URL (run `codehop worker` processes against it) and build the report from their shared results",
    )
    .option(
      "--queue-schema <name>",
      "with --queue: schema of the job queue's tables",
      "codehop_queue",
    )
    .action(
      async (opts: {
        dataset: string;
        format?: DatasetFormat;
        limit?: number;
        concurrency: number;
        systems?: SystemName[];
        out?: string;
        k: number;
        timeout?: number;
        judge?: boolean;
        progress: boolean;
        maxErrorRate: number;
        queue?: string;
        queueSchema: string;
      }) => {
        const env = readEnv();
        const out =
          opts.out ?? join(env.home, "eval", basename(opts.dataset, extname(opts.dataset)));
        const ctrlC = stopOnCtrlC({
          onStop: () =>
            process.stderr.write(
              "\ncodehop eval: stopping — finishing the report (Ctrl-C again to quit now)\n",
            ),
          onQuit: () =>
            process.stderr.write(
              "\ncodehop eval: quitting now (the results already stored are kept)\n",
            ),
        });
        try {
          const { runEval } = await import("../../eval/runner.ts");
          const { terminalTable } = await import("../../eval/report.ts");
          const res = await runEval({
            dataset: opts.dataset,
            format: opts.format,
            limit: opts.limit,
            concurrency: opts.concurrency,
            systems: opts.systems,
            out,
            env,
            judge: opts.judge,
            k: opts.k,
            questionTimeoutMs: opts.timeout === undefined ? undefined : opts.timeout * 1000,
            signal: ctrlC.signal,
            progress: opts.progress ? undefined : false,
            executor: opts.queue
              ? (await import("../../server/eval-queue.ts")).queueExecutor({
                  databaseUrl: opts.queue,
                  queueSchema: opts.queueSchema,
                })
              : undefined,
          });
          process.stdout.write(`${terminalTable(res.report)}\n\n`);
          process.stdout.write(
            `report: ${res.files.html}\n        ${res.files.md}\n        ${res.files.json}\n`,
          );
          if (res.files.trajectories.length)
            process.stdout.write(`trajectories of correct answers: ${join(out, "trajectories")}\n`);
          const errors = errorSummary(res.report, opts.maxErrorRate);
          if (errors.total) {
            process.stderr.write(
              `\n${errors.total} question${errors.total === 1 ? "" : "s"} failed (scored wrong; a rerun of the same command tries them again). First errors:\n${errors.first.join("\n")}\n`,
            );
          }
          if (errors.over.length && !res.interrupted) {
            throw new CodehopError(
              ErrorCodes.EVAL_TOO_MANY_ERRORS,
              `Too many failed questions: ${errors.over.join(", ")} is over --max-error-rate ${opts.maxErrorRate}. ` +
                `The figures above measure the setup more than the model: fix the first errors (\`${cliCommand(["doctor"])}\` checks the endpoint), then rerun the same command.`,
            );
          }
          if (res.interrupted) {
            process.stdout.write(
              `interrupted: rerun the same command to finish (${res.report.progress.done}/${res.report.progress.expected} done)\n`,
            );
            process.exitCode = 130;
          }
        } catch (err) {
          // Ctrl-C before any question ran (e.g. while ingesting the dataset's corpus).
          if (CodehopError.isInstance(err) && err.code === ErrorCodes.RUN_INTERRUPTED) {
            process.stderr.write(`codehop eval: ${err.message}\n`);
            process.exitCode = 130;
            return;
          }
          throw err;
        } finally {
          ctrlC.dispose();
        }
      },
    );
}
