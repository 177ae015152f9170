import { threadHistory, traceThread, type CheckpointSummary } from "../runs/inspect.ts";
import type { RunProgress } from "../runs/progress.ts";
import { APP_OUTLINES, appNameOfThread, loadApp } from "./registry.ts";

// Inspecting a thread of any app (`codehop history`, `codehop show`), loading no app but, for a
// history, the thread's own (src/apps/registry.ts). Re-exported by src/apps/index.ts.

/**
 * A thread's checkpoints, newest first, whatever app ran it. Loads that app's graph: LangGraph
 * reads each checkpoint's state and next nodes through the graph's channels and edges.
 */
export async function historyOfThread(
  threadId: string,
  options: Parameters<typeof threadHistory>[2] = {},
): Promise<CheckpointSummary[]> {
  return threadHistory(await loadApp(await appNameOfThread(threadId, options)), threadId, options);
}

/** A thread's whole run as a tree, whatever app ran it (from its checkpoints and app outline). */
export async function traceOfThread(
  threadId: string,
  options: Parameters<typeof traceThread>[2] = {},
): Promise<RunProgress> {
  return traceThread(APP_OUTLINES[await appNameOfThread(threadId, options)], threadId, options);
}
