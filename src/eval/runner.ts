import { randomBytes } from "node:crypto";
import { resolve } from "node:path";
import cliProgress from "cli-progress";
import { qaApp } from "../apps/qa/app.ts";
import { teamAgentNames } from "../framework/team.ts";
import { detectModel, loadAppConfig } from "../runs/config.ts";
import { readEnv } from "../config/env.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { KnowledgeSource } from "../store/types.ts";
import { runPool } from "../util/concurrency.ts";
import { createJudge, describeError, localExecutor } from "./answer.ts";
import { openEvalSource, type EvalSourceInfo } from "./corpus.ts";
import { describeBadRecord, loadDataset } from "./datasets.ts";
import { createChatModel, evalModelSettings } from "./model.ts";
import { terminalTable } from "./report.ts";
import { ResultsStore, resultKey } from "./results-store.ts";
import {
  type EvalRunOutcome,
  fingerprint,
  GAIA_SYSTEMS,
  parseEvalOptions,
  QA_SYSTEMS,
  type RunEvalOptions,
} from "./run-options.ts";
import { createSystems, type SystemFactoryContext } from "./systems.ts";
import type { EvalSystem } from "./system.ts";
import type { EvalExample, LoadedDataset, QuestionResult, SystemName } from "./types.ts";
import { writeReports } from "./write-reports.ts";

/**
 * `codehop eval`'s run: the dataset loaded, the systems prepared with one model, the pending
 * question × system pairs handed to an executor with progress on stderr, stored answers graded,
 * the reports written. Its options and executor contract are run-options.ts, one answer is
 * answer.ts, the report files write-reports.ts.
 */

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

/** The first `limit` usable questions, and the bad records among the records read up to them. */
function selectExamples(full: LoadedDataset, limit: number | undefined): LoadedDataset {
  if (limit === undefined || limit >= full.examples.length) return full;
  const examples = full.examples.slice(0, limit);
  const last = examples[examples.length - 1].position.index;
  return { ...full, examples, bad: full.bad.filter((b) => b.position.index < last) };
}

export { answerOne, createJudge, type AnswerContext } from "./answer.ts";
export {
  EvalOptionsSchema,
  GAIA_SYSTEMS,
  parseEvalOptions,
  QA_SYSTEMS,
  type EvalExecution,
  type EvalExecutor,
  type EvalRunOutcome,
  type EvalTask,
  type RunEvalOptions,
} from "./run-options.ts";
export { writeReports } from "./write-reports.ts";
export { terminalTable };
