import { basename } from "node:path";
import { z } from "zod";
import type { CodehopEnv } from "../config/env.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { RunApp } from "../runs/app.ts";
import type { AnswerJudge } from "./judge.ts";
import type { EvalModelSettings } from "./model.ts";
import type { EvalReport } from "./report.ts";
import type { SystemFactoryContext } from "./systems.ts";
import type { EvalSystem } from "./system.ts";
import {
  SYSTEM_NAMES,
  type DatasetFormat,
  type EvalExample,
  type LoadedDataset,
  type QuestionResult,
  type SystemName,
} from "./types.ts";

/**
 * What an evaluation run is given and gives back: {@link runEval}'s options (validated here, with
 * their defaults), the executor contract that answers its questions (in this process or on
 * workers), its outcome, and the settings a resumed run must share with the first.
 */

/** Options of {@link runEval} (the `codehop eval` flags, plus hooks for library use and tests). */
export interface RunEvalOptions {
  /** Dataset file. */
  dataset: string;
  /** Dataset format; guessed from the file when omitted. */
  format?: DatasetFormat;
  /** Only the first N usable questions. */
  limit?: number;
  /** Questions in flight at once (default 2). */
  concurrency?: number;
  /** Systems to compare (default agentic, rag, direct). */
  systems?: SystemName[];
  /** Output directory: results DB, checkpoints, corpus, reports. Reusing it resumes the run. */
  out: string;
  /** Model and source configuration (default: `readEnv()`, i.e. the environment variables). */
  env?: CodehopEnv;
  /** Run the LLM judge (default: when CODEHOP_JUDGE_MODEL is set). */
  judge?: boolean;
  /**
   * Time limit per question and system, in ms (default none). A question over it is stored as an
   * error (scored wrong) and tried again by the next run; an agentic one resumes its thread.
   */
  questionTimeoutMs?: number;
  /** Passages retrieved by the rag baseline (default 5). */
  k?: number;
  /** Abort (Ctrl-C): in-flight questions are cancelled, finished ones kept, a partial report written. */
  signal?: AbortSignal;
  /** Show a progress bar on stderr (default: when stderr is a TTY). */
  progress?: boolean;
  /** Where progress lines and warnings go (default: stderr). */
  log?: (line: string) => void;
  /**
   * The app the agentic system runs (default: the QA app); its team registry names the agents
   * the model checks, the recorder and the report know.
   */
  app?: RunApp;
  /** Builds the systems; default {@link createSystems}. */
  createSystems?: (names: SystemName[], ctx: SystemFactoryContext) => Promise<EvalSystem[]>;
  /**
   * Who answers the pending questions: this process by default ({@link answerOne} in a pool of
   * `concurrency`); `codehop eval --queue` hands them to workers instead (src/server/eval-queue.ts).
   */
  executor?: EvalExecutor;
}

/** One question × system pair to answer. */
export interface EvalTask {
  example: EvalExample;
  system: EvalSystem;
}

/** What an {@link EvalExecutor} is given besides the tasks. */
export interface EvalExecution {
  runId: string;
  out: string;
  /** The dataset as loaded (all usable questions: the corpus is built from all of them). */
  dataset: LoadedDataset;
  /** The environment snapshot the run uses (model, sources ...). */
  env: CodehopEnv;
  settings: EvalModelSettings;
  systems: SystemName[];
  k: number;
  concurrency: number;
  /** The LLM judge, when the run grades answers. */
  judge?: AnswerJudge;
  questionTimeoutMs?: number;
  signal: AbortSignal;
  log: (line: string) => void;
  /** Stores a finished result (and counts it for progress); call it once per task. */
  record(result: QuestionResult): void;
}

/** Answers tasks, recording each result as it finishes (see {@link RunEvalOptions.executor}). */
export interface EvalExecutor {
  run(tasks: readonly EvalTask[], execution: EvalExecution): Promise<void>;
}

/** What a run produced. */
export interface EvalRunOutcome {
  report: EvalReport;
  /** Paths of report.json, report.md, report.html and the trajectory files. */
  files: { json: string; md: string; html: string; trajectories: string[] };
  /** Questions run now / skipped because a previous run finished them. */
  ran: number;
  skipped: number;
  /** True when the signal stopped the run before every question finished. */
  interrupted: boolean;
}

/** The systems compared by default on QA datasets. */
export const QA_SYSTEMS: readonly SystemName[] = ["agentic", "rag", "direct"];
/** The systems compared by default on GAIA. */
export const GAIA_SYSTEMS: readonly SystemName[] = ["assistant", "direct"];

/** Settings that must not change between a run and its resumption, or the figures would mix. */
export function fingerprint(settings: EvalModelSettings, format: DatasetFormat, dataset: string) {
  return {
    model: settings.model,
    baseURL: settings.baseURL ?? null,
    temperature: settings.temperature ?? null,
    maxTokens: settings.maxTokens ?? null,
    format,
    dataset: basename(dataset),
  };
}

/**
 * The options of {@link runEval} that are values, validated with their defaults — the one place
 * they live. A bad value fails before anything runs, with CODEHOP_CONFIG_INVALID naming the flag.
 */
export const EvalOptionsSchema = z.object({
  dataset: z.string().min(1, "--dataset is required"),
  out: z.string().min(1, "--out is required"),
  limit: z
    .number({ message: "--limit must be a positive integer" })
    .int("--limit must be a positive integer")
    .positive("--limit must be a positive integer")
    .optional(),
  concurrency: z
    .number({ message: "--concurrency must be a positive integer" })
    .int("--concurrency must be a positive integer")
    .positive("--concurrency must be a positive integer")
    .default(2),
  systems: z
    .array(
      z.enum(SYSTEM_NAMES, {
        message: `unknown system (expected some of ${SYSTEM_NAMES.join(", ")})`,
      }),
    )
    .min(1, "--systems names no system")
    .optional(),
  questionTimeoutMs: z
    .number({ message: "the question timeout must be positive" })
    .positive("the question timeout must be positive")
    .optional(),
  k: z
    .number({ message: "k must be a positive integer" })
    .int("k must be a positive integer")
    .positive("k must be a positive integer")
    .default(5),
});

/** Validates {@link RunEvalOptions}' values and fills their defaults (CODEHOP_CONFIG_INVALID otherwise). */
export function parseEvalOptions(options: RunEvalOptions): z.output<typeof EvalOptionsSchema> {
  const parsed = EvalOptionsSchema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const value = issue.path.reduce<unknown>(
      (v, key) => (v as Record<PropertyKey, unknown> | undefined)?.[key],
      options,
    );
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `${issue.message}, got ${JSON.stringify(value) ?? String(value)}`,
    );
  }
  return parsed.data;
}
