import type { ApprovalRequest } from "../core/approval.ts";
import type { UsageByAgent, UsageTotals } from "../core/usage.ts";

/** Token usage of one agent (or the total) as reported in results and `--json` output. */
export interface UsageReport {
  calls: number;
  input_tokens: number;
  output_tokens: number;
  cached_input_tokens: number;
}

/** A page the agents used. */
export interface SourceReport {
  title: string;
  url?: string;
  [key: string]: unknown;
}

/**
 * What `ask()` / `resume()` / `replay()` return and what `codehop ask --json` prints (one object):
 * the answer, the thread it ran in, the sources used and token usage per agent.
 */
export interface AskResult {
  answer: string;
  thread_id: string;
  /**
   * "final_answer", "max_steps", "repeated_action" (why the manager stopped), or
   * "awaiting_approval" (paused: `approval` says for what).
   */
  status: string;
  /**
   * The tool call the run is paused on until a human decides (src/core/approval.ts), else null.
   * Continue with `resumeThread(thread_id, { approval: { decision: "approve" } })` or
   * `codehop resume <thread> --approve | --reject "why" | --edit '<json>'`.
   */
  approval: ApprovalRequest | null;
  sources: SourceReport[];
  usage: { total: UsageReport; by_agent: Record<string, UsageReport> };
  /** Manager actions taken. */
  steps: number;
  /** The checkpoint the run ended on (for `codehop replay --checkpoint`). */
  checkpoint_id: string | null;
  /** SQLite file holding the thread's checkpoints. */
  checkpoint_db: string;
  duration_ms: number;
}

function usageReport(u: Partial<UsageTotals> | undefined): UsageReport {
  return {
    calls: u?.calls ?? 0,
    input_tokens: u?.inputTokens ?? 0,
    output_tokens: u?.outputTokens ?? 0,
    cached_input_tokens: u?.cachedInputTokens ?? 0,
  };
}

/** Usage per agent plus the total, in the result's snake_case shape. */
export function shapeUsage(usage: UsageByAgent | undefined): AskResult["usage"] {
  const byAgent: Record<string, UsageReport> = {};
  const total = usageReport(undefined);
  for (const [agent, u] of Object.entries(usage ?? {})) {
    const r = usageReport(u);
    byAgent[agent] = r;
    total.calls += r.calls;
    total.input_tokens += r.input_tokens;
    total.output_tokens += r.output_tokens;
    total.cached_input_tokens += r.cached_input_tokens;
  }
  return { total, by_agent: byAgent };
}

/** Sources reported by tools, deduplicated by title (first occurrence kept, order preserved). */
export function shapeSources(sources: unknown): SourceReport[] {
  const out: SourceReport[] = [];
  const seen = new Set<string>();
  for (const s of Array.isArray(sources) ? sources : []) {
    if (!s || typeof s !== "object") continue;
    const rec = s as Record<string, unknown>;
    const title =
      typeof rec.title === "string"
        ? rec.title
        : typeof rec.page === "string"
          ? rec.page
          : undefined;
    if (!title || seen.has(title)) continue;
    seen.add(title);
    out.push({ ...rec, title });
  }
  return out;
}

/** The answer as text (final answers may be numbers or objects). */
export function answerText(answer: unknown): string {
  if (typeof answer === "string") return answer;
  if (answer === null || answer === undefined) return "";
  try {
    return JSON.stringify(answer);
  } catch {
    return String(answer);
  }
}
