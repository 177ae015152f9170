import type { StateSnapshot } from "@langchain/langgraph";
import { pendingApprovals } from "../core/approval.ts";
import type { UsageByAgent } from "../core/usage.ts";
import type { Persistence } from "../persistence/index.ts";
import type { RunApp } from "./app.ts";
import { answerText, shapeSources, shapeUsage, type AskResult } from "./result.ts";

/** An {@link AskResult} from a thread's latest state snapshot (with the app's own fields). */
export function shapeResult(
  app: RunApp,
  persistence: Persistence,
  threadId: string,
  snapshot: StateSnapshot,
  durationMs: number,
): AskResult {
  const values = (snapshot.values ?? {}) as Record<string, unknown>;
  const approval = pendingApprovals(snapshot)[0] ?? null;
  return {
    answer: answerText(values.answer),
    thread_id: threadId,
    status: approval
      ? "awaiting_approval"
      : typeof values.status === "string"
        ? values.status
        : snapshot.next.length
          ? "interrupted"
          : "unknown",
    approval,
    sources: shapeSources(values.sources),
    usage: shapeUsage(values.usage as UsageByAgent | undefined),
    steps: typeof values.stepCount === "number" ? values.stepCount : 0,
    checkpoint_id: (snapshot.config?.configurable?.checkpoint_id as string | undefined) ?? null,
    checkpoint_db: persistence.location,
    duration_ms: durationMs,
    ...app.shapeResult?.(snapshot),
  };
}
