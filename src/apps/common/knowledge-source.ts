import { statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { RunnableConfig } from "@langchain/core/runnables";
import { z } from "zod";
import {
  findConfigFile,
  type KnowledgeSourceConfig,
  readConfigFile,
} from "../../config/config-file.ts";
import { type CodehopEnv, readEnv } from "../../config/env.ts";
import { clientSettable, oneOf } from "../../core/client-settings.ts";
import { readRunContext, RunContextSchema } from "../../core/run-context.ts";
import { CodehopError, ErrorCodes } from "../../errors.ts";
import { openKnowledgeSource } from "../../store/index.ts";
import type { KnowledgeSource, SourceKind } from "../../store/types.ts";
import { MultiSource } from "./multi-source.ts";
import type { RunOptions, RunServices } from "../../runs/app.ts";
import { loadAppConfig, wikipediaCachePath, type AppConfig } from "../../runs/config.ts";
import { configForStoredSource } from "./source-record.ts";

declare module "../../core/run-context.ts" {
  interface RunContext {
    /** The knowledge source the apps' agents search (online Wikipedia or a local corpus). */
    knowledgeSource?: KnowledgeSource;
    /** A local corpus DB to search, by path (e.g. chosen per run in Studio); opened once per path. */
    corpus?: string;
  }
}

/**
 * The run-context schema of apps whose agents search a knowledge source. A client of a served
 * graph chooses a source by name (`source`, from the operator's registry: `knowledgeSources` in
 * codehop.config.json); `corpus` (a path) and `knowledgeSource` (an object) are code's and the
 * operator's (src/core/client-settings.ts).
 */
export const KnowledgeRunContextSchema = RunContextSchema.extend({
  knowledgeSource: z.custom<KnowledgeSource>(isKnowledgeSource, "a KnowledgeSource").optional(),
  corpus: z
    .string()
    .min(1)
    .optional()
    .describe("local corpus DB made by `codehop ingest` (unset: the environment's source)"),
  source: clientSettable(
    z
      .string()
      .min(1)
      .optional()
      .describe(
        "a knowledge source the operator names in codehop.config.json (knowledgeSources); unset: the server's default",
      ),
    oneOf(
      () => Object.keys(knowledgeSourceRegistry().sources),
      "the operator's knowledge sources (knowledgeSources in codehop.config.json)",
    ),
  ),
});

/** The operator's named knowledge sources and the file they come from. */
export interface KnowledgeSourceRegistry {
  /** codehop.config.json, when there is one. */
  file?: string;
  sources: Readonly<Record<string, KnowledgeSourceConfig>>;
}

let registryCache: { key: string; registry: KnowledgeSourceRegistry } | undefined;

/**
 * The knowledge sources the operator names in the configuration file (`knowledgeSources`; see
 * src/config/config-file.ts), read again when the file changes. Empty without a file.
 */
export function knowledgeSourceRegistry(env: CodehopEnv = readEnv()): KnowledgeSourceRegistry {
  const file = findConfigFile({ explicit: env.configFile, home: resolve(env.home) });
  if (!file) return { sources: {} };
  let key = file;
  try {
    const st = statSync(file);
    key = `${file}:${st.mtimeMs}:${st.size}`;
  } catch {
    // read below, which names the problem
  }
  if (registryCache?.key !== key) {
    registryCache = {
      key,
      registry: { file, sources: readConfigFile(file).knowledgeSources ?? {} },
    };
  }
  return registryCache.registry;
}

declare module "../../core/run-context.ts" {
  interface RunContext {
    /** A knowledge source the operator names in codehop.config.json (`knowledgeSources`), by name. */
    source?: string;
  }
}

const byName = new Map<string, KnowledgeSource>();

/** The registry's source named `name`, opened on first use (one per name and definition). */
function namedSource(name: string): KnowledgeSource {
  const { file, sources } = knowledgeSourceRegistry();
  const def = Object.hasOwn(sources, name) ? sources[name] : undefined;
  if (!def) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `No knowledge source named "${name}" (${Object.keys(sources).length ? `the operator's sources: ${Object.keys(sources).join(", ")}` : "the operator names none"}; knowledgeSources in ${file ?? "codehop.config.json"}).`,
    );
  }
  if ("sources" in def) {
    // A list (the web, a mix): opened like `--source`, with the operator's web settings.
    const corpus = def.corpus ? resolve(dirname(file ?? "."), def.corpus) : undefined;
    const key = `${name}:${JSON.stringify(def)}:${corpus ?? ""}`;
    let listed = byName.get(key);
    if (!listed) {
      const config = { ...loadAppConfig(), sources: def.sources, corpus };
      listed = lazySource(
        () => openSourceFor(config),
        def.sources.length === 1 ? def.sources[0] : "mixed",
      );
      byName.set(key, listed);
    }
    return listed;
  }
  // The operator's embeddings endpoint (environment) ranks a named corpus hybrid too.
  const { embeddings } = loadAppConfig();
  const options =
    "corpus" in def
      ? { corpus: resolve(dirname(file ?? "."), def.corpus), embeddings }
      : {
          wikipediaApi: def.wikipedia === true ? undefined : def.wikipedia,
          cacheDb: wikipediaCachePath(loadAppConfig()),
          embeddings,
        };
  const key = `${name}:${JSON.stringify(options)}`;
  let source = byName.get(key);
  if (!source) {
    source = lazySource(
      async () => openKnowledgeSource(options),
      "corpus" in def ? "corpus" : "wikipedia",
    );
    byName.set(key, source);
  }
  return source;
}

/** Where an app's agents find their knowledge source (the apps' agent options). */
export interface KnowledgeSourceDeps {
  /** A source for every run of these agents (wins over a run's `corpus`, not over its `knowledgeSource`). */
  source?: KnowledgeSource;
  /**
   * The source of a run that names none — the environment's (CODEHOP_CORPUS, else online
   * Wikipedia), given by the langgraph.json entries (src/graphs/entries.ts), which own that fallback.
   */
  fallbackSource?: () => KnowledgeSource;
}

/**
 * Opens the knowledge source the configuration asks for: the local corpus DB when `corpus` is set
 * (CODEHOP_CORPUS / --corpus), online Wikipedia otherwise (pages cached under CODEHOP_HOME);
 * hybrid (BM25 + vectors) when the embeddings endpoint is configured. `onNotice` hears that a
 * corpus with vectors is ranked with BM25 only for want of an endpoint (default: a process
 * warning, once per corpus).
 */
export async function openSourceFor(
  config: AppConfig,
  onNotice?: (message: string) => void,
): Promise<KnowledgeSource> {
  const kinds = config.sources ?? [config.corpus ? "corpus" : "wikipedia"];
  if (kinds.includes("corpus") && !config.corpus) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      "The corpus source needs a corpus DB: pass --corpus <db> (or set CODEHOP_CORPUS), made by `codehop ingest`.",
    );
  }
  // The web source (HTTP client, page readers: ~2 MB of modules) is loaded only when asked for:
  // every CLI command that loads an app (history, resume, ask on a corpus) would pay for it.
  const web = kinds.includes("web") ? await import("./web-source.ts") : undefined;
  const open = (kind: SourceKind): KnowledgeSource =>
    kind === "web"
      ? web!.openWebSource(config.web)
      : openKnowledgeSource({
          corpus: kind === "corpus" ? config.corpus : undefined,
          wikipediaApi: config.wikipediaApi,
          cacheDb: kind === "corpus" ? undefined : wikipediaCachePath(config),
          embeddings: config.embeddings,
          onNotice,
        });
  if (kinds.length === 1) return open(kinds[0]);
  const members: KnowledgeSource[] = [];
  try {
    for (const kind of kinds) members.push(open(kind));
  } catch (err) {
    await Promise.all(members.map((m) => m.close()));
    throw err;
  }
  return new MultiSource(members);
}

/** How a report names a source: "the corpus", "Wikipedia", "the web", or both of a mix. */
export function describeSource(source: KnowledgeSource): string {
  if (source instanceof MultiSource) return source.members.map(describeSource).join(" and ");
  return source.kind === "corpus"
    ? "the corpus"
    : source.kind === "web"
      ? "the web"
      : source.kind === "wikipedia"
        ? "Wikipedia"
        : "the sources";
}

/**
 * The run services of an app whose agents search a knowledge source (`RunApp.openServices`): the
 * caller's source when given, else the thread's own (its recorded corpus, or online Wikipedia)
 * unless the caller names a corpus explicitly; closed when the run ends.
 */
export async function openKnowledgeServices(
  config: AppConfig,
  options: RunOptions,
  stored?: Record<string, unknown>,
): Promise<RunServices> {
  if (options.source)
    return { context: { knowledgeSource: options.source }, close: async () => {} };
  const explicit = Boolean(options.config?.corpus || options.config?.sources);
  const own = configForStoredSource(config, explicit, stored);
  // A run of the CLI or the API is the user's own, on their machine (as chat's attachments are):
  // web pages on private addresses may be read unless the configuration says otherwise. Served
  // graphs open their sources elsewhere, under the operator's CODEHOP_WEB_ALLOW_PRIVATE_URLS.
  const web = { ...own.web, settings: { allowPrivateAddresses: true, ...own.web?.settings } };
  const source = await openSourceFor({ ...own, web }, options.onWarning);
  return { context: { knowledgeSource: source }, close: () => source.close() };
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

function isKnowledgeSource(value: unknown): value is KnowledgeSource {
  return typeof value === "object" && value !== null && typeof (value as any).search === "function";
}

const byCorpusPath = new Map<string, KnowledgeSource>();

/**
 * The knowledge source of a run: the run context's `knowledgeSource` when the caller provides one
 * (the CLI and `ask()` do), else the agents' own (`fallback`, or `deps.source`), else the
 * operator's source the run context names (`source`, see {@link knowledgeSourceRegistry}), else
 * the run context's `corpus` (a corpus DB path, code only), else `deps.fallbackSource` (the
 * environment's, for Studio). Throws CODEHOP_CONFIG_INVALID when none is given.
 */
export function sourceFromConfig(
  config: RunnableConfig | undefined,
  fallback?: KnowledgeSource | KnowledgeSourceDeps,
): KnowledgeSource {
  const deps: KnowledgeSourceDeps = isKnowledgeSource(fallback)
    ? { source: fallback }
    : (fallback ?? {});
  const context = readRunContext(config);
  if (isKnowledgeSource(context.knowledgeSource)) return context.knowledgeSource;
  if (deps.source) return deps.source;
  if (typeof context.source === "string" && context.source) return namedSource(context.source);
  if (typeof context.corpus === "string" && context.corpus) {
    const corpus = resolve(context.corpus);
    let source = byCorpusPath.get(corpus);
    if (!source) {
      // The operator's embeddings endpoint (environment) ranks a run's corpus hybrid too.
      source = lazySource(
        async () => openKnowledgeSource({ corpus, embeddings: loadAppConfig().embeddings }),
        "corpus",
      );
      byCorpusPath.set(corpus, source);
    }
    return source;
  }
  if (deps.fallbackSource) return deps.fallbackSource();
  throw new CodehopError(
    ErrorCodes.CONFIG_INVALID,
    "No knowledge source for this run: give the run context a `knowledgeSource` or a `corpus` path, " +
      "pass `source` to the agents, or use the langgraph.json graphs (src/graphs/entries.ts), which fall back to the environment (CODEHOP_CORPUS, else online Wikipedia).",
  );
}
