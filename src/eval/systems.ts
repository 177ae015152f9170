import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { CodehopEnv } from "../config/env.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { EvalModelSettings } from "./model.ts";
import type { LoadedDataset, SystemName } from "./types.ts";
import type { Persistence } from "../persistence/port.ts";
import type { RunApp } from "../runs/app.ts";
import type { KnowledgeSource } from "../store/types.ts";
import { createDirectSystem, createRagSystem } from "./system-baselines.ts";
import { assistantApp } from "../apps/assistant/app.ts";
import { AssistantFiles } from "../apps/assistant/base/files.ts";
import { webSettingsFromEnv } from "../web/settings.ts";
import { createAgenticSystem } from "./system-agentic.ts";
import type { EvalSystem } from "./system.ts";

/** What the system factory gets from the runner. */
export interface SystemFactoryContext {
  env: CodehopEnv;
  settings: EvalModelSettings;
  /** The model under test, shared by the baselines. */
  model: BaseChatModel;
  dataset: LoadedDataset;
  /** Output directory of the run (corpus DB and checkpoints go here). */
  out: string;
  runId: string;
  /** Passages for the rag baseline. */
  k: number;
  log: (line: string) => void;
  /**
   * The knowledge source for rag / agentic, opened on first call: the dataset's own paragraphs
   * ingested into `<out>/corpus.db`, or the configured source.
   */
  openSource: () => Promise<KnowledgeSource>;
  /** Set once the source is open: which knowledge source rag / agentic used, for the report. */
  source?: Record<string, unknown>;
  /** The app the agentic system runs (default: the QA app). */
  app?: RunApp;
  /** Where agentic threads are checkpointed (default: `<out>/checkpoints.db`). */
  persistence?: Persistence;
}

/** Builds the requested systems, all on the same model. */
export async function createSystems(
  names: SystemName[],
  ctx: SystemFactoryContext,
): Promise<EvalSystem[]> {
  const out: EvalSystem[] = [];
  for (const name of names) {
    if (name === "direct") out.push(createDirectSystem(ctx.model));
    else if (name === "rag") {
      const source = await ctx.openSource();
      if (!source.searchPassages) {
        throw new CodehopError(
          ErrorCodes.CONFIG_INVALID,
          `The rag baseline needs passage search, which the ${source.kind} source lacks`,
        );
      }
      out.push(createRagSystem(ctx.model, source, { k: ctx.k }));
    } else if (name === "assistant") {
      out.push(createAssistantSystem(ctx));
    } else {
      out.push(
        createAgenticSystem({
          model: ctx.model,
          source: await ctx.openSource(),
          home: ctx.out,
          persistence: ctx.persistence,
          app: ctx.app,
        }),
      );
    }
  }
  return out;
}

/**
 * `assistant`: the general assistant (assistant → web_search) through the run lifecycle, each
 * question a thread; its files (GAIA's attachments) are copied into the thread's folder first,
 * and its web settings are the evaluation's environment's.
 */
function createAssistantSystem(ctx: SystemFactoryContext): EvalSystem {
  const files = new AssistantFiles(ctx.out);
  // The evaluation runs on the user's machine (private addresses allowed, as for `assist`) unless
  // its environment says otherwise.
  const { allowPrivateAddresses, ...web } = webSettingsFromEnv(ctx.env);
  const context = {
    web: ctx.env.webAllowPrivateUrls === undefined ? web : { ...web, allowPrivateAddresses },
  };
  return createAgenticSystem({
    model: ctx.model,
    home: ctx.out,
    persistence: ctx.persistence,
    app: assistantApp,
    name: "assistant",
    context,
    async startInput(example, threadId) {
      if (!example.files?.length) return undefined;
      const names: string[] = [];
      for (const file of example.files) names.push(await files.attach(threadId, file));
      return { files: names };
    },
  });
}
