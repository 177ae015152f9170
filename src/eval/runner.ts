import { randomBytes } from "node:crypto";
import { renameSync, writeFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import cliProgress from "cli-progress";
import { z } from "zod";
import { qaApp } from "../apps/qa/app.ts";
import type { RunApp } from "../runs/app.ts";
import { teamAgentNames } from "../framework/team.ts";
import { detectModel, loadAppConfig } from "../runs/config.ts";
import { readEnv, type CodehopEnv } from "../config/env.ts";
import { endpointErrorText } from "../core/models.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { KnowledgeSource } from "../store/types.ts";
import { openEvalSource, type EvalSourceInfo } from "./corpus.ts";
import { describeBadRecord, loadDataset } from "./datasets.ts";
import { htmlReport } from "./html.ts";
import { AnswerJudge } from "./judge.ts";
import { gaiaScore } from "./gaia.ts";
import { scoreAnswer } from "./metrics.ts";
import { createChatModel, evalModelSettings, type EvalModelSettings } from "./model.ts";
import { runPool } from "../util/concurrency.ts";
import { EvalRecorder } from "./recorder.ts";
import { markdownReport, summarize, terminalTable, type EvalReport } from "./report.ts";
import { ResultsStore, resultKey } from "./results-store.ts";
import { createSystems, type SystemFactoryContext } from "./systems.ts";
import type { EvalSystem } from "./system.ts";
import { exportTrajectories } from "./trajectories.ts";
import {
  SYSTEM_NAMES,
  type AgentUsage,
  type DatasetFormat,
  type EvalExample,
  type LoadedDataset,
  type QuestionResult,
  type SystemName,
} from "./types.ts";

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

/** Interval of progress lines when there is no progress bar. */
const PROGRESS_LINE_MS = 30_000;

/** "1h 02m", "3m 05s", "42s". */
export function formatSeconds(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s >= 3600)
    return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  if (s >= 60) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${s}s`;
}

/** Bad records named on the console (report.md lists all). */
const MAX_LOGGED_BAD = 20;

/** Settings that must not change between a run and its resumption, or the figures would mix. */
function fingerprint(settings: EvalModelSettings, format: DatasetFormat, dataset: string) {
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

/**
 * Runs the evaluation: loads the dataset (bad records reported and skipped), prepares the
 * systems with the same model, answers every (question, system) pair not finished by a previous
 * run in this output directory, with at most `concurrency` in flight, storing each result as it
 * finishes, then writes report.json / report.md / report.html and the trajectory export.
 */
export async function runEval(options: RunEvalOptions): Promise<EvalRunOutcome> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const out = resolve(options.out);
  const checked = parseEvalOptions(options);
  const concurrency = checked.concurrency;
  let env = options.env ?? readEnv();
  // Like `codehop ask`: with an endpoint but no CODEHOP_MODEL, use the first model it lists.
  if (!env.model && env.openaiBaseUrl) {
    const detected = await detectModel(
      loadAppConfig({}, env),
      teamAgentNames((options.app ?? qaApp).team),
    );
    if (detected) env = { ...env, model: detected };
  }
  const settings = evalModelSettings(env);
  const judge = (options.judge ?? !!env.judgeModel) ? createJudge(env) : undefined;
  const full = loadDataset(options.dataset, { format: options.format });
  const dataset = selectExamples(full, options.limit);
  // GAIA's tasks (files, the web) are the general assistant's, compared with the bare model.
  const systemsWanted: SystemName[] =
    checked.systems ?? (dataset.format === "gaia" ? [...GAIA_SYSTEMS] : [...QA_SYSTEMS]);
  // Some releases skip thousands (MuSiQue-full's unanswerable half): name the first ones only.
  for (const b of dataset.bad.slice(0, MAX_LOGGED_BAD)) log(`skipped ${describeBadRecord(b)}`);
  if (dataset.bad.length > MAX_LOGGED_BAD)
    log(
      `... and ${dataset.bad.length - MAX_LOGGED_BAD} more skipped records (all listed in report.md)`,
    );

  const store = new ResultsStore(out);
  const systems: EvalSystem[] = [];
  let sourceToClose: KnowledgeSource | undefined;
  try {
    const fp = fingerprint(settings, dataset.format, options.dataset);
    const previous = store.getMeta<typeof fp>("fingerprint");
    if (previous && JSON.stringify(previous) !== JSON.stringify(fp)) {
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `${out} holds results of a run with different settings (${JSON.stringify(previous)}), not ${JSON.stringify(fp)}: ` +
          "use another --out directory so the figures do not mix",
      );
    }
    store.setMeta("fingerprint", fp);
    const runId =
      store.getMeta<string>("runId") ??
      `eval-${new Date().toISOString().slice(0, 10).replace(/-/g, "")}-${randomBytes(3).toString("hex")}`;
    store.setMeta("runId", runId);

    const model = createChatModel(settings, env.openaiApiKey);
    let opened: Promise<{ source: KnowledgeSource; info: EvalSourceInfo }> | undefined;
    const factoryCtx: SystemFactoryContext = {
      env: env,
      settings,
      model,
      dataset,
      out,
      runId,
      k: checked.k,
      log,
      app: options.app,
      // Opened once, on first use, and shared by rag and agentic.
      openSource: async () => {
        opened ??= openEvalSource(
          full,
          full.examples,
          out,
          env,
          log,
          store.getMeta<EvalSourceInfo>("source"),
          options.signal,
        );
        const { source, info } = await opened;
        sourceToClose = source;
        factoryCtx.source = info as unknown as Record<string, unknown>;
        return source;
      },
    };
    systems.push(...(await (options.createSystems ?? createSystems)(systemsWanted, factoryCtx)));

    // A system whose prompts or settings changed since its stored results were made would mix
    // two configurations in one figure: refuse, like a model change.
    const previousConfig = store.getMeta<{ systems?: Record<string, unknown> }>("config");
    for (const s of systems) {
      const before = previousConfig?.systems?.[s.name];
      if (
        before !== undefined &&
        JSON.stringify(before) !== JSON.stringify(s.config) &&
        store.hasResults(s.name)
      ) {
        throw new CodehopError(
          ErrorCodes.CONFIG_INVALID,
          `${out} holds ${s.name} results made with a different configuration (${JSON.stringify(before)}), not ${JSON.stringify(s.config)}: ` +
            "use another --out directory so the figures do not mix",
        );
      }
    }
    const config = {
      model: settings,
      systems: {
        ...(previousConfig?.systems ?? {}),
        ...Object.fromEntries(systems.map((s) => [s.name, s.config])),
      },
      judge: judge ? { model: env.judgeModel, baseURL: env.judgeBaseUrl ?? null } : null,
      concurrency,
      limit: options.limit ?? null,
    };
    store.setMeta("config", config);
    if (factoryCtx.source) store.setMeta("source", factoryCtx.source);

    const finished = store.finishedKeys();
    const ungraded = judge ? store.finishedKeys({ unjudged: true }) : new Set<string>();
    const tasks: { example: EvalExample; system: EvalSystem }[] = [];
    // With a judge, answers stored by an earlier run without one are graded (no new model call).
    const toGrade: { example: EvalExample; system: EvalSystem }[] = [];
    for (const example of dataset.examples) {
      for (const system of systems) {
        const key = resultKey(system.name, example.id);
        if (!finished.has(key)) tasks.push({ example, system });
        else if (ungraded.has(key)) toGrade.push({ example, system });
      }
    }
    const expected = dataset.examples.length * systems.length;
    const skipped = expected - tasks.length;
    if (skipped)
      log(`resuming ${runId}: ${skipped} of ${expected} question × system results already done`);
    if (toGrade.length) log(`grading ${toGrade.length} stored answers with the judge`);

    const signal = options.signal ?? new AbortController().signal;
    const showBar = options.progress ?? !!process.stderr.isTTY;
    const runStarted = Date.now();
    let lastLine = runStarted;
    const bar = showBar
      ? new cliProgress.SingleBar(
          {
            format: "eval [{bar}] {value}/{total} | {percentage}% | ETA {eta_formatted} | {status}",
            hideCursor: true,
            etaBuffer: 16,
            stream: process.stderr,
          },
          cliProgress.Presets.shades_classic,
        )
      : undefined;
    const tally = new Map<SystemName, { n: number; em: number }>();
    bar?.start(tasks.length, 0, { status: "starting" });
    let ran = 0;

    const record = (result: QuestionResult) => {
      store.put(result);
      ran++;
      const t = tally.get(result.system) ?? { n: 0, em: 0 };
      t.n++;
      t.em += result.em;
      tally.set(result.system, t);
      const status = [...tally]
        .map(([s, v]) => `${s} EM ${((100 * v.em) / v.n).toFixed(0)}%`)
        .join(" · ");
      bar?.increment(1, { status });
      // Without a bar (logs of a detached run, CI), a progress line at most every 30 s.
      if (!bar && options.progress !== false && Date.now() - lastLine >= PROGRESS_LINE_MS) {
        lastLine = Date.now();
        const elapsed = (Date.now() - runStarted) / 1000;
        const eta = (elapsed / ran) * (tasks.length - ran);
        log(`eval: ${ran}/${tasks.length} done, ETA ${formatSeconds(eta)} | ${status}`);
      }
    };
    await (options.executor ?? localExecutor).run(tasks, {
      runId,
      out,
      dataset,
      env,
      settings,
      systems: systemsWanted,
      k: checked.k,
      concurrency,
      judge,
      questionTimeoutMs: options.questionTimeoutMs,
      signal,
      log,
      record,
    });
    if (judge && toGrade.length) {
      await runPool(
        toGrade,
        concurrency,
        async ({ example, system }) => {
          const stored = store.result(system.name, example.id);
          if (!stored || stored.error) return;
          // Graded already, but the column says not (written by a codehop from before the column):
          // set the flag so later runs stop queueing it.
          if (stored.judge) return store.setJudge(system.name, example.id, stored.judge);
          try {
            store.setJudge(
              system.name,
              example.id,
              await judge.judge(example.question, example.answers, stored.prediction, signal),
            );
          } catch (err) {
            // A judge failure leaves the stored answer as it was: the next run grades it again.
            if (!signal.aborted)
              log(`judge failed on ${system.name} ${example.id}: ${describeError(err)}`);
          }
        },
        signal,
      );
    }
    bar?.stop();
    const interrupted = signal.aborted && ran < tasks.length;
    if (interrupted)
      log(
        `interrupted: ${ran} of ${tasks.length} pending results finished; partial report written, rerun to continue`,
      );

    const written = writeReports(store, {
      out,
      runId,
      dataset,
      systems: systems.map((s) => s.name),
    });
    return { ...written, ran, skipped, interrupted };
  } finally {
    for (const s of systems) await s.close?.().catch(() => undefined);
    await sourceToClose?.close().catch(() => undefined);
    store.close();
  }
}

/** Answers the tasks in this process, at most `concurrency` at once. */
const localExecutor: EvalExecutor = {
  async run(tasks, execution) {
    await runPool(
      tasks,
      execution.concurrency,
      async ({ example, system }) => {
        const result = await answerOne(example, system, {
          runId: execution.runId,
          signal: execution.signal,
          judge: execution.judge,
          timeoutMs: execution.questionTimeoutMs,
          log: execution.log,
        });
        // Interrupted: nothing stored, the rerun will redo it.
        if (result) execution.record(result);
      },
      execution.signal,
    );
  },
};

/** The first `limit` usable questions, and the bad records among the records read up to them. */
function selectExamples(full: LoadedDataset, limit: number | undefined): LoadedDataset {
  if (limit === undefined || limit >= full.examples.length) return full;
  const examples = full.examples.slice(0, limit);
  const last = examples[examples.length - 1].position.index;
  return { ...full, examples, bad: full.bad.filter((b) => b.position.index < last) };
}

/** The LLM judge of `env` (CODEHOP_JUDGE_MODEL ...). */
export function createJudge(env: CodehopEnv): AnswerJudge {
  if (!env.judgeModel) {
    throw new CodehopError(
      ErrorCodes.MODEL_NOT_CONFIGURED,
      "--judge needs CODEHOP_JUDGE_MODEL (and CODEHOP_JUDGE_BASE_URL / CODEHOP_JUDGE_API_KEY if it is not the main endpoint)",
    );
  }
  const model = createChatModel(
    {
      model: env.judgeModel,
      baseURL: env.judgeBaseUrl,
      temperature: 0,
      maxRetries: env.maxRetries ?? 2,
      timeoutMs: env.modelTimeoutMs,
    },
    env.judgeApiKey,
  );
  return new AnswerJudge(model);
}

/** What {@link answerOne} needs besides the question and the system. */
export interface AnswerContext {
  runId: string;
  /** The run's signal (Ctrl-C). */
  signal: AbortSignal;
  judge?: AnswerJudge;
  /** Per-question time limit for the system (0/undefined = none). */
  timeoutMs?: number;
  log: (line: string) => void;
}

/** Runs one system on one question; `undefined` when the run was interrupted mid-question. */
export async function answerOne(
  example: EvalExample,
  system: EvalSystem,
  ctx: AnswerContext,
): Promise<QuestionResult | undefined> {
  // A per-question signal: model clients add abort listeners to whatever signal they get, so
  // handing them the run-wide one would pile up a listener per call. It also carries the
  // per-question time limit.
  const question = new AbortController();
  const forward = () => question.abort(ctx.signal.reason);
  ctx.signal.addEventListener("abort", forward, { once: true });
  const timer = ctx.timeoutMs
    ? setTimeout(() => question.abort(new Error("question timeout")), ctx.timeoutMs)
    : undefined;
  try {
    return await answerOneWith(example, system, ctx, question.signal, () => clearTimeout(timer));
  } finally {
    clearTimeout(timer);
    ctx.signal.removeEventListener("abort", forward);
  }
}

/** The score a system learns from: GAIA's correctness (reported as EM), else token F1. */
function scoreFor(example: EvalExample): "em" | "f1" {
  return example.scoring === "gaia" ? "em" : "f1";
}

async function answerOneWith(
  example: EvalExample,
  system: EvalSystem,
  ctx: AnswerContext,
  signal: AbortSignal,
  stopTimer: () => void,
): Promise<QuestionResult | undefined> {
  const threadId = `${ctx.runId}:${system.name}:${example.id}`;
  const recorder = new EvalRecorder(system.name, system.agents);
  const started = performance.now();
  let prediction = "";
  let sources: string[] = [];
  let steps = 0;
  let status: string | undefined;
  let reportedUsage: Record<string, AgentUsage> | undefined;
  let error: string | undefined;
  try {
    const res = await system.answer(example, { threadId, recorder, signal });
    prediction = res.answer;
    sources = res.sources;
    steps = res.steps;
    status = res.status;
    reportedUsage = res.usage;
  } catch (err) {
    // Ctrl-C: nothing is stored, the rerun redoes (or, agentic, resumes) the question.
    if (ctx.signal.aborted) return undefined;
    // Over the time limit: stored as an error (scored wrong); a rerun tries again.
    error = signal.aborted
      ? `timed out after ${(ctx.timeoutMs ?? 0) / 1000} s`
      : describeError(err);
  }
  stopTimer();
  const wallMs = performance.now() - started;
  if (ctx.signal.aborted && error) return undefined;
  const scores = scoreAnswer(prediction, example.answers);
  // GAIA: its own rule decides correctness (numbers, lists, strings), reported as EM.
  if (example.scoring === "gaia")
    scores.em = example.answers.some((gold) => gaiaScore(prediction, gold)) ? 1 : 0;
  if (system.scored && !error) {
    try {
      await system.scored(example, { threadId, recorder, signal }, scores[scoreFor(example)]);
    } catch (err) {
      if (ctx.signal.aborted) return undefined;
      ctx.log(`reflection failed on ${system.name} ${example.id}: ${describeError(err)}`);
    }
  }
  const supportRecall = supportingRecall(example, system.name, sources, !!error);
  let verdict;
  if (ctx.judge && !error) {
    try {
      verdict = await ctx.judge.judge(example.question, example.answers, prediction, ctx.signal);
    } catch (err) {
      if (ctx.signal.aborted) return undefined;
      // The answer stands; the next run with a judge grades it (see toGrade in runEval).
      ctx.log(`judge failed on ${system.name} ${example.id}: ${describeError(err)}`);
    }
  }
  const usage = reportedUsage ?? recorder.usage;
  const sum = (k: "calls" | "inputTokens" | "outputTokens" | "cachedTokens") =>
    Object.values(usage).reduce((a, u) => a + u[k], 0);
  return {
    system: system.name,
    questionId: example.id,
    index: example.position.index,
    question: example.question,
    answers: example.answers,
    ...(example.kind ? { kind: example.kind } : {}),
    prediction,
    ...scores,
    supportRecall,
    judge: verdict,
    modelCalls: sum("calls"),
    inputTokens: sum("inputTokens"),
    outputTokens: sum("outputTokens"),
    cachedTokens: sum("cachedTokens"),
    usage,
    steps,
    status,
    wallMs: Math.round(wallMs),
    error,
    threadId,
    sources,
    transcripts: recorder.transcripts(),
    finishedAt: new Date().toISOString(),
  };
}

/** Share of the supporting pages among the pages used (titles compared case-insensitively). */
function supportingRecall(
  example: EvalExample,
  system: SystemName,
  sources: string[],
  failed: boolean,
): number | undefined {
  if (system === "direct" || example.supportingTitles.length === 0) return undefined;
  if (failed) return 0;
  const used = new Set(sources.map((t) => t.trim().toLowerCase()));
  const found = example.supportingTitles.filter((t) => used.has(t.trim().toLowerCase())).length;
  return found / example.supportingTitles.length;
}

function describeError(err: unknown): string {
  if (CodehopError.isInstance(err)) return `${err.message} [${err.code}]`;
  // A model endpoint's failure as a sentence (status and the server's message, no raw body).
  return endpointErrorText(err);
}

/** Rebuilds every report file from the stored results. */
export function writeReports(
  store: ResultsStore,
  ctx: { out: string; runId: string; dataset: LoadedDataset; systems: SystemName[] },
): Omit<EvalRunOutcome, "ran" | "skipped" | "interrupted"> {
  const selected = new Set(ctx.dataset.examples.map((e) => e.id));
  const results = store
    .all()
    .filter((r) => selected.has(r.questionId) && ctx.systems.includes(r.system));
  const expected = ctx.dataset.examples.length * ctx.systems.length;
  const report: EvalReport = {
    runId: ctx.runId,
    generatedAt: new Date().toISOString(),
    partial: results.length < expected,
    progress: { expected, done: results.length },
    dataset: {
      path: ctx.dataset.path,
      format: ctx.dataset.format,
      questions: ctx.dataset.examples.length,
      bad: ctx.dataset.bad,
      source: store.getMeta<Record<string, unknown> | null>("source") ?? undefined,
    },
    config: store.getMeta<Record<string, unknown>>("config") ?? {},
    systems: ctx.systems.map((s) => summarize(s, results)),
    results,
  };
  const transcriptsOf = (r: { system: SystemName; questionId: string }) =>
    store.transcripts(r.system, r.questionId);
  const files = {
    json: join(ctx.out, "report.json"),
    md: join(ctx.out, "report.md"),
    html: join(ctx.out, "report.html"),
    trajectories: exportTrajectories(join(ctx.out, "trajectories"), results, transcriptsOf),
  };
  // Write to a temp name and rename, so a reader never sees half a report.
  writeAtomic(files.json, JSON.stringify(report, null, 2) + "\n");
  writeAtomic(files.md, markdownReport(report));
  writeAtomic(files.html, htmlReport(report, transcriptsOf, { outDir: ctx.out }));
  return { report, files };
}

function writeAtomic(path: string, text: string): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

export { terminalTable };
