import { existsSync } from "node:fs";
import { join } from "node:path";
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { RunnableLambda } from "@langchain/core/runnables";
import { qaApp } from "../apps/qa/app.ts";
import { buildTeamAgent, teamAgentNames, teamPromptFolders } from "../framework/team.ts";
import { openPersistence, type Persistence } from "../persistence/open.ts";
import type { RunApp, RunOptions } from "../runs/app.ts";
import { reflectOnScore, resumeRun, startRun } from "../runs/lifecycle.ts";
import type { AskResult } from "../runs/result.ts";
import { listPromptFiles, loadPrompt, PROMPTS_DIR } from "../prompts/render.ts";
import type { KnowledgeSource } from "../store/types.ts";
import type { AgentUsage, EvalExample, SystemName } from "./types.ts";
import { promptHash } from "./system-baselines.ts";
import type { EvalSystem, SystemAnswer, SystemContext } from "./system.ts";

/** Options of {@link createAgenticSystem}. */
export interface AgenticSystemOptions {
  /** The model under test, used by every agent (the same instance the baselines use). */
  model: BaseChatModel;
  /** Where the agents search (the per-dataset corpus or the configured source); none for apps that do not search one. */
  source?: KnowledgeSource;
  /** Data directory for the threads' checkpoints and call journal (the eval output directory). */
  home: string;
  /**
   * Where the threads are checkpointed instead of `<home>/checkpoints.db` (the workers of a
   * distributed eval share Postgres, so a question taken over from a lost worker resumes).
   * Left open by `close()`.
   */
  persistence?: Persistence;
  /** The app under test (default: the QA app); its team registry names the agents and prompts. */
  app?: RunApp;
  /** The system's name in the report (default "agentic"; the general assistant's is "assistant"). */
  name?: SystemName;
  /** More run context for every run (e.g. the assistant's web settings). */
  context?: RunOptions["context"];
  /**
   * Graph input a question's new thread starts with besides its text (the assistant: the names of
   * the question's files, attached to the thread first).
   */
  startInput?: (
    example: EvalExample,
    threadId: string,
  ) => Promise<Record<string, unknown> | undefined>;
}

/**
 * `agentic`: an app (the QA app by default: manager → wikipedia_search → page_search) through the
 * run lifecycle, as `ask()` runs it. Each
 * question is its own thread, checkpointed to `<home>/checkpoints.db`; a thread that exists from
 * an interrupted or failed earlier run is continued with `resume()` (finished sub-agent calls are
 * served from the call journal) instead of being started again. Usage per agent comes from the
 * app's own accounting, which covers the whole thread even across such resumptions.
 */
export function createAgenticSystem(options: AgenticSystemOptions): EvalSystem {
  const app = options.app ?? qaApp;
  const persistence: Persistence = options.persistence ?? openPersistence(options.home);
  const promptDirs = teamPromptFolders(app.team);
  const runOptions = {
    persistence,
    ...(options.source ? { source: options.source } : {}),
    ...(options.context ? { context: options.context } : {}),
    model: options.model,
    config: { home: options.home },
  };
  const agents = teamAgentNames(app.team);
  return {
    name: options.name ?? "agentic",
    agents,
    config: {
      agents,
      // The root agent's step limit (the report's configuration; named for the QA app's manager).
      managerMaxSteps: buildTeamAgent(app.team, {}).settings.maxSteps,
      prompts: promptDirs.map((d) => `prompts/${d}`),
      promptHash: promptHash(
        promptDirs
          .filter((d) => existsSync(join(PROMPTS_DIR, d)))
          .flatMap((d) => listPromptFiles(join(PROMPTS_DIR, d)).map((f) => loadPrompt(`${d}/${f}`)))
          .join("\n"),
      ),
      ...(options.source ? { source: options.source.kind } : {}),
      checkpoints: persistence.location,
    },
    async answer(example: EvalExample, ctx: SystemContext): Promise<SystemAnswer> {
      const existing = await persistence.threads.get(ctx.threadId);
      // Run inside a runnable whose callbacks are the recorder: LangChain hands them down (through
      // AsyncLocalStorage) to every graph, sub-agent and model call under ask()/resume().
      const input = existing ? undefined : await options.startInput?.(example, ctx.threadId);
      const run = RunnableLambda.from(async (): Promise<AskResult> =>
        existing
          ? resumeRun(app, ctx.threadId, { ...runOptions, signal: ctx.signal })
          : startRun(app, example.question, {
              ...runOptions,
              threadId: ctx.threadId,
              signal: ctx.signal,
              ...(input ? { input } : {}),
            }),
      );
      const result = await run.invoke(null, {
        callbacks: [ctx.recorder],
        runName: "codehop_eval_agentic",
      });
      const usage: Record<string, AgentUsage> = {};
      for (const [agent, u] of Object.entries(result.usage.by_agent)) {
        usage[agent] = {
          calls: u.calls,
          inputTokens: u.input_tokens,
          outputTokens: u.output_tokens,
          cachedTokens: u.cached_input_tokens,
        };
      }
      return {
        answer: result.answer,
        sources: [...new Set(result.sources.map((s) => s.title))],
        steps: result.steps,
        usage,
        status: result.status,
      };
    },
    async scored(example: EvalExample, ctx: SystemContext, score: number): Promise<void> {
      // The harness's score of the thread's answer: a low one leaves a lesson (CODEHOP_REFLECTION=1).
      await reflectOnScore(
        app,
        ctx.threadId,
        { value: score, by: `the eval's ${example.scoring === "gaia" ? "GAIA" : "F1"} score` },
        runOptions,
      );
    },
    async close() {
      if (!options.persistence) await persistence.close();
    },
  };
}
