import { existsSync, readFileSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { v5 as uuidv5 } from "@langchain/core/utils/uuid";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { bundledModules } from "./bundled-modules.ts";

/**
 * The graphs a server and its workers serve, read from a `langgraph.json` (codehop's own by
 * default: manager, wikipedia_search, page_search, code_agent), the same file Studio and
 * `langgraphjs dev` read. Each graph is an assistant whose id is derived from the graph name as
 * the LangGraph server derives it, so clients may use either.
 */

/** A compiled graph as the server drives it. */
export type ServedGraph = {
  checkpointer?: BaseCheckpointSaver | boolean;
  getGraphAsync(options: { xray?: boolean | number }): Promise<{ toJSON(): unknown }>;
  getState(config: unknown, options?: unknown): Promise<any>;
  getStateHistory(config: unknown, options?: unknown): AsyncIterableIterator<any>;
  updateState(config: unknown, values: unknown, asNode?: string): Promise<any>;
  stream(input: unknown, options: unknown): Promise<AsyncIterable<unknown>>;
};

/** LangGraph's namespace for assistant ids derived from graph names. */
const NAMESPACE_GRAPH = "6ba7b821-9dad-11d1-80b4-00c04fd430c8";

/** The assistant id of a graph (the one `langgraph dev` would give it). */
export function assistantIdOf(graphId: string): string {
  return uuidv5(graphId, NAMESPACE_GRAPH);
}

/** codehop's own langgraph.json (next to package.json). */
export const DEFAULT_GRAPHS_FILE = resolve(
  dirname(fileURLToPath(import.meta.url)),
  "../../langgraph.json",
);

/** The graphs of a langgraph.json, loaded. */
export interface GraphRegistry {
  /** The file they came from. */
  readonly file: string;
  readonly ids: readonly string[];
  /** The graph of a graph id or assistant id, with the server's checkpointer attached. */
  resolve(assistantOrGraphId: string): { graphId: string; graph: ServedGraph } | undefined;
}

/** codehop's own package root, and whether this module runs from its build (dist/) or its sources. */
const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const RUNNING_BUILT = /[\\/]dist[\\/]server[\\/]graphs\.js$/.test(fileURLToPath(import.meta.url));

/**
 * The module to import for a graph file: the file itself, or, for one of codehop's own `src/*.ts`
 * files, the `dist/*.js` it was compiled to when codehop runs from its build — an installed
 * codehop ships only dist/, and a clone runs dist/ while it is current (bin/codehop.mjs). Loading
 * the sources there would need a TypeScript loader and would give the graphs a second copy of
 * codehop's modules beside the running one.
 */
function builtModule(file: string): string {
  if (!file.endsWith(".ts")) return file;
  // Any package that ships only its build (src/x.ts named, dist/x.js installed).
  if (!existsSync(file)) {
    const built = file
      .replace(/([\\/])src([\\/])(?!.*[\\/]src[\\/])/, "$1dist$2")
      .replace(/\.ts$/, ".js");
    if (built !== file && existsSync(built)) return built;
  }
  const ownSource = file.startsWith(join(PACKAGE_ROOT, "src") + sep);
  if (!ownSource || (existsSync(file) && !RUNNING_BUILT)) return file;
  const built = join(PACKAGE_ROOT, "dist", relative(join(PACKAGE_ROOT, "src"), file)).replace(
    /\.ts$/,
    ".js",
  );
  return existsSync(built) ? built : file;
}

/** A TypeScript graph file of the operator's own, run by a codehop that runs from its build: tsx's loader, once. */
let typeScriptLoader: Promise<void> | undefined;
async function loadTypeScript(target: string): Promise<void> {
  typeScriptLoader ??= import("tsx/esm/api").then(
    ({ register }) => void register(),
    (err: unknown) => {
      typeScriptLoader = undefined;
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `Graph ${target} is a TypeScript file and no TypeScript loader is installed: ` +
          "install tsx beside codehop (npm install tsx) or point langgraph.json at the compiled .js file.",
        { cause: err },
      );
    },
  );
  return typeScriptLoader;
}

/** The bundled CLI's copy of `full` (a dist/ file of codehop's own), when the bundle runs. */
function bundledCopy(full: string): (() => Promise<Record<string, unknown>>) | undefined {
  const modules = bundledModules();
  if (!modules) return undefined;
  const rel = relative(join(PACKAGE_ROOT, "dist"), full);
  if (rel.startsWith("..") || isAbsolute(rel)) return undefined;
  return modules[rel.split(sep).join("/")];
}

/**
 * Imports a module `builtModule` resolved: in the bundled CLI its bundled copy (a bundled `serve`
 * hands any other module over to dist/cli first: {@link modulesOutsideBundle}), else the file.
 */
async function importResolved(full: string): Promise<Record<string, unknown>> {
  const copy = bundledCopy(full);
  if (copy) return copy();
  if (bundledModules())
    throw new Error(
      `the bundled CLI cannot load ${full} (not one of its modules): the command should have run from dist/cli`,
    );
  if (full.endsWith(".ts") && RUNNING_BUILT) await loadTypeScript(full);
  return import(pathToFileURL(full).href);
}

/**
 * Imports a module of the operator's langgraph.json (a graph, an auth file): codehop's own
 * sources from its build when it runs from there, an operator's `.ts` file through tsx's loader.
 */
export async function importModule(file: string): Promise<Record<string, unknown>> {
  return importResolved(builtModule(file));
}

/**
 * The modules a langgraph.json names (its graphs and `auth.path`) that the bundled CLI does not
 * hold: the operator's code, which imports LangGraph (and maybe codehop) from node_modules and so
 * must run beside dist/cli's copies, not the bundle's. Empty when the file cannot be read (loading
 * it reports why); an entry that is not a string counts as outside.
 */
export function modulesOutsideBundle(graphsFile: string): string[] {
  const path = resolve(graphsFile);
  let spec: { graphs?: Record<string, unknown>; auth?: { path?: unknown } };
  try {
    spec = JSON.parse(readFileSync(path, "utf8"));
  } catch {
    return [];
  }
  const targets = [...Object.values(spec?.graphs ?? {})];
  if (spec?.auth?.path !== undefined) targets.push(spec.auth.path);
  return targets
    .map((target) => (typeof target === "string" ? targetModule(path, target) : String(target)))
    .filter((full) => !bundledCopy(full));
}

/**
 * The module a langgraph.json target names (`"./path.ts:export"`, relative to that file at
 * `graphsPath`), as {@link builtModule} resolves it.
 */
function targetModule(graphsPath: string, target: string): string {
  const file = target.split(":")[0];
  return builtModule(isAbsolute(file) ? file : join(dirname(graphsPath), file));
}

/**
 * Loads every graph of a langgraph.json (`"name": "./path.ts:export"`) and attaches
 * `checkpointer` to each (the graphs of langgraph.json carry none; the server brings its own).
 */
export async function loadGraphs(
  file: string,
  checkpointer: BaseCheckpointSaver,
): Promise<GraphRegistry> {
  const path = resolve(file);
  let spec: { graphs?: Record<string, string> };
  try {
    spec = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Cannot read the graphs file ${path}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  const entries = Object.entries(spec.graphs ?? {});
  if (!entries.length)
    throw new CodehopError(ErrorCodes.CONFIG_INVALID, `${path} lists no "graphs".`);
  const graphs = new Map<string, ServedGraph>();
  for (const [graphId, target] of entries) {
    const exportName = target.split(":")[1] ?? "default";
    const full = targetModule(path, target);
    let graph: unknown;
    try {
      const mod = await importResolved(full);
      graph = mod[exportName];
      // A factory (as langgraph.json also allows) is called once.
      if (typeof graph === "function") graph = await (graph as () => unknown)();
    } catch (err) {
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `Cannot load graph "${graphId}" from ${target}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    if (!graph || typeof (graph as ServedGraph).stream !== "function") {
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `Graph "${graphId}" (${target}) is not a compiled LangGraph graph.`,
      );
    }
    (graph as ServedGraph).checkpointer = checkpointer;
    graphs.set(graphId, graph as ServedGraph);
  }
  const byAssistant = new Map([...graphs.keys()].map((id) => [assistantIdOf(id), id]));
  return {
    file: path,
    ids: [...graphs.keys()],
    resolve(id) {
      const graphId = graphs.has(id) ? id : byAssistant.get(id);
      return graphId ? { graphId, graph: graphs.get(graphId)! } : undefined;
    },
  };
}
