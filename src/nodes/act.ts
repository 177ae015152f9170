import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { AGENT_ACTION_TIMEOUT_MS } from "../agent/config.ts";
import type { CallJournal, CallKey, CallOutcome } from "../agent/journal.ts";
import type { AgentRuntime } from "../agent/runtime.ts";
import type { AgentState, AgentUpdate, Source, ToolCallRecord } from "../agent/state.ts";
import { type UsageByAgent, mergeUsage, reportUsage } from "../agent/usage.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { HostToolFn } from "../sandbox/types.ts";
import { type CodeTool, type ToolReport, parseToolArgs } from "../tools/define-tool.ts";

/** JSON with object keys sorted, so equal arguments always give the same journal key. */
export function stableJson(value: unknown): string {
  return (
    JSON.stringify(value, (_k, v) =>
      v && typeof v === "object" && !Array.isArray(v)
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, v[k]]),
          )
        : v,
    ) ?? "null"
  );
}

/**
 * Errors that are not the model's fault: raised from a tool (e.g. a sub-agent whose model endpoint
 * is down), they fail the act node after the action instead of becoming an observation, so the run
 * stops and can be resumed (finished calls are journaled). SOURCE_UNAVAILABLE stays an observation:
 * the knowledge source uses it for rejected queries too, which the model can fix.
 */
const FATAL_CODES: ReadonlySet<string> = new Set([
  ErrorCodes.MODEL_ENDPOINT_FAILED,
  ErrorCodes.MODEL_NOT_CONFIGURED,
  ErrorCodes.GRAPH_INVARIANT,
  ErrorCodes.SANDBOX_INTERNAL,
  ErrorCodes.CONFIG_INVALID,
  ErrorCodes.PROMPT_TEMPLATE,
  ErrorCodes.DB_INVALID,
]);

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * act: runs the pending code in the sandbox with the agent's tools. Each tool call is validated
 * against the tool's schema, served from the call journal when it was already made (same thread,
 * namespace, step, call index, tool and arguments — so a resumed run never repeats a finished
 * sub-agent call) and recorded otherwise. Tools report usage and sources through `ctx.report`;
 * they are merged into this node's update. A reply without code skips the sandbox.
 */
export function makeActNode(rt: AgentRuntime) {
  return async function act(
    state: AgentState,
    config: LangGraphRunnableConfig,
  ): Promise<AgentUpdate> {
    const pending = state.pending;
    const step = state.stepCount + 1;
    if (!pending || pending.step !== step) {
      throw new CodehopError(
        ErrorCodes.GRAPH_INVARIANT,
        `Agent "${rt.name}": act reached without a pending action for step ${step} (pending step: ${pending?.step ?? "none"})`,
      );
    }
    if (pending.code === null) {
      return {
        outcome: {
          step,
          ok: false,
          logs: "",
          isFinalAnswer: false,
          finalAnswer: null,
          error: {
            name: "FormatError",
            message: pending.parseError ?? "No code found.",
            line: null,
          },
          toolCalls: [],
          durationMs: 0,
        },
      };
    }

    const tools = rt.tools(state.context ?? {}, config);
    const configurable = (config.configurable ?? {}) as Record<string, unknown>;
    const journal = configurable.journal as CallJournal | undefined;
    const threadId = String(configurable.thread_id ?? "");
    const checkpointNs = String(configurable.checkpoint_ns ?? "");
    const toolCalls: ToolCallRecord[] = [];
    let fatal: CodehopError | undefined;
    // Reports are applied in call order after the action, so concurrent calls give a stable order.
    const reportsByCall = new Map<number, readonly ToolReport[]>();
    const keepReports = (callIndex: number, reports: readonly ToolReport[]) => {
      reportsByCall.set(callIndex, reports);
      // Also straight to the usage sink, so usage survives this action failing (sub-agent case).
      for (const r of reports) reportUsage(config, r.usage);
    };

    const host =
      (tool: CodeTool<any>): HostToolFn =>
      async (rawArgs, { callIndex, signal }) => {
        const started = performance.now();
        const record = (
          args: unknown,
          ok: boolean,
          error: string | undefined,
          fromJournal: boolean,
        ) =>
          toolCalls.push({
            callIndex,
            tool: tool.name,
            args,
            ok,
            ...(error === undefined ? {} : { error }),
            durationMs: Math.round(performance.now() - started),
            fromJournal,
          });
        let args: Record<string, unknown>;
        try {
          args = parseToolArgs(tool, rawArgs);
        } catch (err) {
          record(rawArgs, false, errorMessage(err), false);
          throw err;
        }
        const key: CallKey = {
          threadId,
          checkpointNs,
          step,
          callIndex,
          tool: tool.name,
          argsJson: stableJson(args),
        };
        // The journal is framework storage: if it fails, the run must stop (resumable), not let the
        // model see a storage error as if the tool had failed.
        const journalOp = async <T>(op: () => T | Promise<T>): Promise<T> => {
          try {
            return await op();
          } catch (err) {
            fatal ??= new CodehopError(
              ErrorCodes.DB_INVALID,
              `Call journal failed for ${tool.name}() in agent "${rt.name}": ${errorMessage(err)}`,
              { cause: err },
            );
            throw fatal;
          }
        };
        const recorded = journal ? await journalOp(() => journal.get(key)) : undefined;
        if (recorded) {
          keepReports(callIndex, recorded.reports ?? []);
          record(args, recorded.ok, recorded.ok ? undefined : recorded.error, true);
          if (recorded.ok) return recorded.value;
          throw new Error(recorded.error);
        }
        const reports: ToolReport[] = [];
        let json: unknown;
        try {
          const value = await tool.invoke(args, {
            callIndex,
            signal,
            config,
            report: (r) => reports.push(r),
          });
          // Round-trip through JSON: what the guest gets must equal what a resumed run is served.
          try {
            json = value === undefined ? null : JSON.parse(JSON.stringify(value));
          } catch (err) {
            throw new Error(
              `${tool.name}() returned a value that is not JSON-serializable (${errorMessage(err)})`,
            );
          }
        } catch (err) {
          keepReports(callIndex, reports);
          if (CodehopError.isInstance(err) && FATAL_CODES.has(err.code)) {
            fatal ??= err;
            throw err;
          }
          const message = errorMessage(err);
          record(args, false, message, false);
          // A call cut short by the action ending (timeout) did not finish: don't journal it.
          if (journal && !signal.aborted)
            await journalOp(() => journal.put(key, { ok: false, error: message, reports }));
          throw err;
        }
        keepReports(callIndex, reports);
        record(args, true, undefined, false);
        if (journal)
          await journalOp(() =>
            journal.put(key, { ok: true, value: json, reports } satisfies CallOutcome),
          );
        return json;
      };

    const sandbox = await rt.sandbox();
    // Actions that call sub-agents wait for whole agent runs: give them a longer deadline.
    const timeoutMs =
      rt.settings.actionTimeoutMs ??
      (tools.some((t) => t.isAgent) ? AGENT_ACTION_TIMEOUT_MS : undefined);
    const result = await sandbox.run({
      code: pending.code,
      tools: Object.fromEntries(tools.map((t) => [t.name, host(t)])),
      snapshot: state.variables ?? undefined,
      ...(timeoutMs === undefined ? {} : { limits: { timeoutMs } }),
    });
    if (fatal) throw fatal;
    toolCalls.sort((a, b) => a.callIndex - b.callIndex);
    const update: AgentUpdate = {
      outcome: {
        step,
        ok: result.ok,
        logs: result.logs,
        isFinalAnswer: result.isFinalAnswer,
        finalAnswer: result.finalAnswer,
        error: result.error,
        toolCalls,
        durationMs: result.durationMs,
      },
      // A crashed or killed action reports no snapshot worth keeping; keep the previous one.
      variables: result.snapshot ?? state.variables,
    };
    let usage: UsageByAgent = {};
    const sources: Source[] = [];
    for (const index of [...reportsByCall.keys()].sort((a, b) => a - b)) {
      for (const r of reportsByCall.get(index)!) {
        if (r.usage) usage = mergeUsage(usage, r.usage);
        if (r.sources) sources.push(...(r.sources as Source[]));
      }
    }
    if (Object.keys(usage).length) update.usage = usage;
    if (sources.length) update.sources = sources;
    return update;
  };
}
