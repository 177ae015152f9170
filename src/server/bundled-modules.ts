/**
 * codehop's own modules compiled into the bundled CLI (dist/bundle, bin/bundle.mjs), by their path
 * under dist/ (`graphs/entries.js`). A bundled `codehop serve` or `worker` takes the built-in graphs
 * of langgraph.json from here: importing dist/graphs/entries.js would load a second copy of codehop
 * and of LangGraph beside the bundle's own. No imports: every bundled command loads this module.
 */

/** Loaders of the bundled modules, by path under dist/. */
export type BundledModules = Readonly<Record<string, () => Promise<Record<string, unknown>>>>;

let bundled: BundledModules | undefined;

/** Called once by the bundle's entry (bin/bundle.mjs) before any command runs. */
export function setBundledModules(modules: BundledModules): void {
  bundled = modules;
}

/** The bundle's own modules, or undefined when codehop runs unbundled (dist/cli, the sources). */
export function bundledModules(): BundledModules | undefined {
  return bundled;
}

/**
 * Marks the error a bundled `serve` or `worker` throws when its langgraph.json names modules
 * that are not codehop's own (the operator's graphs or auth file): those import LangGraph and
 * codehop from node_modules, so bin/codehop.mjs runs the command again from dist/cli/main.js,
 * whose modules they share.
 */
export const RUN_UNBUNDLED = Symbol.for("codehop.runUnbundled");
