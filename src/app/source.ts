import type { RunnableConfig } from "@langchain/core/runnables";
import { openKnowledgeSource } from "../store/index.ts";
import type { KnowledgeSource } from "../store/types.ts";
import { loadAppConfig, wikipediaCachePath, type AppConfig } from "./config.ts";

/**
 * Opens the knowledge source the configuration asks for: the local corpus DB when `corpus` is set
 * (CODEHOP_CORPUS / --corpus), online Wikipedia otherwise (pages cached under CODEHOP_HOME).
 */
export async function openSourceFor(config: AppConfig): Promise<KnowledgeSource> {
  return openKnowledgeSource({
    corpus: config.corpus,
    wikipediaApi: config.wikipediaApi,
    cacheDb: config.corpus ? undefined : wikipediaCachePath(config),
  });
}

/**
 * A KnowledgeSource that opens the real one on first use. Graph modules are imported by
 * `langgraph dev` before any run, so they must not open files or sockets at import time.
 */
export function lazySource(
  open: () => Promise<KnowledgeSource>,
  kind: KnowledgeSource["kind"],
): KnowledgeSource {
  let opening: Promise<KnowledgeSource> | undefined;
  const get = () => (opening ??= open());
  return {
    kind,
    search: async (q, o) => (await get()).search(q, o),
    getPage: async (t) => (await get()).getPage(t),
    retrievePassages: async (t, q, o) => (await get()).retrievePassages(t, q, o),
    searchPassages: async (q, o) => {
      const s = await get();
      if (!s.searchPassages)
        throw new Error(`the ${s.kind} source cannot search passages across pages`);
      return s.searchPassages(q, o);
    },
    close: async () => {
      if (opening) await (await opening).close();
      opening = undefined;
    },
  };
}

let processDefault: KnowledgeSource | undefined;
const byCorpusPath = new Map<string, KnowledgeSource>();

/**
 * The knowledge source of a run: `configurable.knowledgeSource` when the caller provides one (the
 * app does), else `configurable.corpus` (a corpus DB path, e.g. set per run in Studio), else the
 * agent's own `fallback`, else a process-wide source from the environment (Studio / `langgraph dev`).
 */
export function sourceFromConfig(
  config: RunnableConfig | undefined,
  fallback?: KnowledgeSource,
): KnowledgeSource {
  const configurable = config?.configurable as Record<string, unknown> | undefined;
  const given = configurable?.knowledgeSource;
  if (
    given &&
    typeof given === "object" &&
    typeof (given as KnowledgeSource).search === "function"
  ) {
    return given as KnowledgeSource;
  }
  if (fallback) return fallback;
  if (typeof configurable?.corpus === "string" && configurable.corpus) {
    const appConfig = loadAppConfig({ corpus: configurable.corpus });
    let source = byCorpusPath.get(appConfig.corpus!);
    if (!source) {
      source = lazySource(() => openSourceFor(appConfig), "corpus");
      byCorpusPath.set(appConfig.corpus!, source);
    }
    return source;
  }
  if (!processDefault) {
    const appConfig = loadAppConfig();
    processDefault = lazySource(
      () => openSourceFor(appConfig),
      appConfig.corpus ? "corpus" : "wikipedia",
    );
  }
  return processDefault;
}
