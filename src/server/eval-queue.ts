import { join } from "node:path";
import type { Job, PgBoss } from "pg-boss";
import pg from "pg";
import { type CodehopEnv, readEnv } from "../config/env.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { openEvalSource } from "../eval/corpus.ts";
import { scoreAnswer } from "../eval/metrics.ts";
import { createChatModel, type EvalModelSettings } from "../eval/model.ts";
import {
  answerOne,
  createJudge,
  type EvalExecution,
  type EvalExecutor,
  type EvalTask,
} from "../eval/runner.ts";
import { createSystems } from "../eval/systems.ts";
import type { EvalSystem } from "../eval/system.ts";
import type {
  DatasetFormat,
  EvalExample,
  LoadedDataset,
  QuestionResult,
  SystemName,
} from "../eval/types.ts";
import type { KnowledgeSource } from "../store/types.ts";
import { ensureDir } from "../util/fs-safe.ts";
import { withAdvisoryLock } from "../persistence/postgres-database.ts";
import { openPostgresPersistence } from "../persistence/postgres.ts";
import { type Backend, queueOptionsOf } from "./backend.ts";
import { DEAD_EVAL_QUEUE, EVAL_QUEUE, openQueue, pollSecondsOf, workEagerly } from "./queue.ts";

/**
 * Distributed evaluation: `codehop eval --queue postgres://...` puts every (question, system) pair
 * that is not finished on the queue, `codehop worker` processes answer them, and each result goes
 * to a shared table; the coordinator copies results into its output directory's results store as
 * they arrive and writes the report from there as usual, so a rerun skips what is finished (in
 * either place) and Ctrl-C leaves a consistent partial report (queued questions keep running on the
 * workers; the next run collects them).
 *
 * What a worker needs is stored once per evaluation (`codehop_evals`): the dataset's questions
 * (their paragraphs make the per-dataset corpus, which each worker ingests into its own cache), the
 * systems, k, the time limit and the model settings. Workers use the coordinator's model settings
 * (model name, endpoint, sampling) so the figures are one configuration; API keys are never stored:
 * each worker reads its own (OPENAI_API_KEY, CODEHOP_JUDGE_API_KEY). Agentic threads are
 * checkpointed in the shared database, so a question taken over from a lost worker resumes.
 */

/** What workers need to answer the questions of one evaluation. */
interface EvalSpec {
  runId: string;
  datasetPath: string;
  format: DatasetFormat;
  examples: EvalExample[];
  systems: SystemName[];
  k: number;
  questionTimeoutMs?: number;
  settings: EvalModelSettings;
  judge: { model: string; baseURL: string | null } | null;
}

/** A queued question. */
interface EvalJob {
  runId: string;
  system: SystemName;
  questionId: string;
}

/** NOTIFY channel: a result of an evaluation was stored (payload: the eval's run id). */
const RESULTS_CHANNEL = "codehop_eval_results";

function tablesSql(schema: string): string {
  return `
CREATE TABLE IF NOT EXISTS "${schema}".codehop_evals (
  run_id TEXT PRIMARY KEY,
  spec TEXT NOT NULL,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS "${schema}".codehop_eval_results (
  run_id TEXT NOT NULL,
  system TEXT NOT NULL,
  question_id TEXT NOT NULL,
  result TEXT NOT NULL,
  worker_id TEXT,
  finished_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, system, question_id)
);`;
}

async function ensureTables(pool: pg.Pool, schema: string): Promise<void> {
  await withAdvisoryLock(pool, `codehop-eval-setup:${schema}`, () => pool.query(tablesSql(schema)));
}

/** Options of {@link queueExecutor}. */
export interface QueueExecutorOptions {
  /** postgres:// URL shared with the workers. */
  databaseUrl: string;
  schema?: string;
  queueSchema?: string;
  leaseSeconds?: number;
}

/** The executor of `codehop eval --queue`: enqueue, then collect the workers' results. */
export function queueExecutor(options: QueueExecutorOptions): EvalExecutor {
  return {
    async run(tasks: readonly EvalTask[], execution: EvalExecution) {
      const persistence = await openPostgresPersistence({
        url: options.databaseUrl,
        schema: options.schema,
        poolSize: 3,
      });
      const { pool, schema } = persistence;
      let queue: PgBoss | undefined;
      const listener = new pg.Client({ connectionString: options.databaseUrl });
      listener.on("error", () => {});
      try {
        await ensureTables(pool, schema);
        queue = await openQueue({
          url: options.databaseUrl,
          schema: options.queueSchema,
          leaseSeconds: options.leaseSeconds,
          poolSize: 3,
        });
        const spec: EvalSpec = {
          runId: execution.runId,
          datasetPath: execution.dataset.path,
          format: execution.dataset.format,
          examples: execution.dataset.examples,
          systems: execution.systems,
          k: execution.k,
          questionTimeoutMs: execution.questionTimeoutMs,
          settings: execution.settings,
          judge: execution.judge
            ? { model: execution.env.judgeModel!, baseURL: execution.env.judgeBaseUrl ?? null }
            : null,
        };
        await pool.query(
          `INSERT INTO "${schema}".codehop_evals (run_id, spec) VALUES ($1, $2)
           ON CONFLICT (run_id) DO UPDATE SET spec = EXCLUDED.spec`,
          [spec.runId, JSON.stringify(spec)],
        );
        const pending = new Map(tasks.map((t) => [`${t.system.name}\u0000${t.example.id}`, t]));
        const collect = async () => {
          const { rows } = await pool.query<{
            system: string;
            question_id: string;
            result: string;
          }>(
            `SELECT system, question_id, result FROM "${schema}".codehop_eval_results WHERE run_id = $1`,
            [spec.runId],
          );
          for (const r of rows) {
            const key = `${r.system}\u0000${r.question_id}`;
            if (!pending.has(key)) continue;
            pending.delete(key);
            execution.record(JSON.parse(r.result) as QuestionResult);
          }
        };
        // Results workers stored for an earlier (interrupted) run of this command.
        await collect();
        let queued = 0;
        for (const t of pending.values()) {
          const id = await queue.send(
            EVAL_QUEUE,
            { runId: spec.runId, system: t.system.name, questionId: t.example.id } as EvalJob,
            // One job per pair: a rerun while the first run's jobs are still queued adds none.
            { singletonKey: `${spec.runId}:${t.system.name}:${t.example.id}` },
          );
          if (id) queued++;
        }
        execution.log(
          `queued ${queued} question × system pairs for the workers (${pending.size - queued} already queued); waiting for results`,
        );
        await listener.connect();
        await listener.query(`LISTEN ${RESULTS_CHANNEL}`);
        let wake: (() => void) | undefined;
        listener.on("notification", (n) => {
          if (n.payload === spec.runId) wake?.();
        });
        const abort = () => wake?.();
        execution.signal.addEventListener("abort", abort);
        try {
          while (pending.size && !execution.signal.aborted) {
            await new Promise<void>((resolve) => {
              wake = resolve;
              setTimeout(resolve, 2000);
            });
            await collect();
          }
        } finally {
          execution.signal.removeEventListener("abort", abort);
        }
        if (execution.signal.aborted && pending.size)
          execution.log(
            `stopped waiting: ${pending.size} pairs are still queued or running on the workers; rerun the same command to collect them`,
          );
      } finally {
        await listener.end().catch(() => {});
        await queue?.stop({ graceful: false }).catch(() => {});
        await persistence.close();
      }
    },
  };
}

/** What a worker keeps per evaluation: its spec, systems and judge (built on its first question). */
interface EvalContext {
  spec: EvalSpec;
  examples: Map<string, EvalExample>;
  systems: Map<SystemName, EvalSystem>;
  judge?: ReturnType<typeof createJudge>;
  source?: KnowledgeSource;
}

/**
 * Registers the eval queues on a worker (`codehop worker` does it): each job answers one question
 * with one system and stores the result for the coordinator.
 */
export function evalQueueHandlers(options: {
  concurrency: number;
  log: (line: string) => void;
  /** The worker's environment (API keys, embeddings endpoint, CODEHOP_HOME for the corpus cache). */
  env?: CodehopEnv;
}): (backend: Backend, workerId: string) => Promise<void> {
  return async (backend, workerId) => {
    const { persistence, queue } = backend;
    const { pool, schema } = persistence;
    await ensureTables(pool, schema);
    const env = options.env ?? readEnv();
    const contexts = new Map<string, Promise<EvalContext>>();

    const contextOf = (runId: string) => {
      let ctx = contexts.get(runId);
      if (!ctx) {
        ctx = (async () => {
          const { rows } = await pool.query<{ spec: string }>(
            `SELECT spec FROM "${schema}".codehop_evals WHERE run_id = $1`,
            [runId],
          );
          if (!rows[0])
            throw new CodehopError(
              ErrorCodes.CONFIG_INVALID,
              `No evaluation ${runId} in the database`,
            );
          const spec = JSON.parse(rows[0].spec) as EvalSpec;
          // The coordinator's model settings; this worker's own keys.
          const runEnv: CodehopEnv = {
            ...env,
            model: spec.settings.model,
            openaiBaseUrl: spec.settings.baseURL,
            judgeModel: spec.judge?.model,
            judgeBaseUrl: spec.judge?.baseURL ?? undefined,
          };
          const out = join(env.home, "eval-worker", runId.replace(/[^A-Za-z0-9_.-]/g, "_"));
          ensureDir(out, { code: ErrorCodes.CONFIG_INVALID, what: "eval cache directory" });
          const dataset: LoadedDataset = {
            path: spec.datasetPath,
            format: spec.format,
            examples: spec.examples,
            bad: [],
          };
          const context: EvalContext = {
            spec,
            examples: new Map(spec.examples.map((e) => [e.id, e])),
            systems: new Map(),
            judge: spec.judge ? createJudge(runEnv) : undefined,
          };
          let opened: Promise<KnowledgeSource> | undefined;
          const systems = await createSystems(spec.systems, {
            env: runEnv,
            settings: spec.settings,
            model: createChatModel(spec.settings, env.openaiApiKey),
            dataset,
            out,
            runId,
            k: spec.k,
            log: options.log,
            persistence,
            openSource: async () => {
              opened ??= openEvalSource(dataset, dataset.examples, out, runEnv, options.log).then(
                (r) => r.source,
              );
              return (context.source = await opened);
            },
          });
          for (const s of systems) context.systems.set(s.name, s);
          return context;
        })();
        // A failed setup is tried again by the next job instead of being cached.
        ctx.catch(() => contexts.delete(runId));
        contexts.set(runId, ctx);
      }
      return ctx;
    };

    const store = async (job: EvalJob, result: QuestionResult) => {
      await pool.query(
        `WITH saved AS (
           INSERT INTO "${schema}".codehop_eval_results (run_id, system, question_id, result, worker_id)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (run_id, system, question_id) DO UPDATE SET result = EXCLUDED.result,
             worker_id = EXCLUDED.worker_id, finished_at = now()
           RETURNING run_id)
         SELECT pg_notify($6, run_id) FROM saved`,
        [job.runId, job.system, job.questionId, JSON.stringify(result), workerId, RESULTS_CHANNEL],
      );
    };

    await workEagerly<EvalJob>(
      queue,
      EVAL_QUEUE,
      options.concurrency,
      { pollSeconds: pollSecondsOf(queueOptionsOf(backend.options)) },
      async (job: Job<EvalJob>) => {
        const ctx = await contextOf(job.data.runId);
        const example = ctx.examples.get(job.data.questionId);
        const system = ctx.systems.get(job.data.system);
        if (!example || !system)
          throw new Error(
            `evaluation ${job.data.runId} has no ${job.data.system} / ${job.data.questionId}`,
          );
        const result = await answerOne(example, system, {
          runId: ctx.spec.runId,
          signal: job.signal,
          judge: ctx.judge,
          timeoutMs: ctx.spec.questionTimeoutMs,
          log: options.log,
        });
        // Stopped by this worker's shutdown: the job goes back to the queue.
        if (!result) throw new Error("worker stopped during the question");
        await store(job.data, result);
        options.log(`eval ${job.data.runId}: ${job.data.system} ${job.data.questionId} done`);
      },
    );
    // A question whose workers were lost more often than the retry limit allows: an error result.
    await queue.work<EvalJob>(DEAD_EVAL_QUEUE, { pollingIntervalSeconds: 2 }, async ([job]) => {
      const ctx = await contextOf(job.data.runId).catch(() => undefined);
      const example = ctx?.examples.get(job.data.questionId);
      if (!example) return;
      await store(job.data, lostResult(job.data, example));
    });
  };
}

/** The stored result of a question no worker could finish. */
function lostResult(job: EvalJob, example: EvalExample): QuestionResult {
  return {
    system: job.system,
    questionId: example.id,
    index: example.position.index,
    question: example.question,
    answers: example.answers,
    prediction: "",
    ...scoreAnswer("", example.answers),
    modelCalls: 0,
    inputTokens: 0,
    outputTokens: 0,
    cachedTokens: 0,
    usage: {},
    steps: 0,
    wallMs: 0,
    error: "the workers answering this question were lost more often than the retry limit allows",
    threadId: `${job.runId}:${job.system}:${example.id}`,
    sources: [],
    transcripts: [],
    finishedAt: new Date().toISOString(),
  };
}
