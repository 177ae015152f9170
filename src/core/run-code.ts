import { isGraphInterrupt, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { CodehopError, ErrorCodes, isFatalInTool } from "../errors.ts";
import type { ActionResult, HostToolFn, VariablesSnapshot } from "../sandbox/contract.ts";
import { type ApprovalResume, actionApprovals, callLines, needsApproval } from "./approval.ts";
import {
  type CodeTool,
  type ToolReport,
  parseToolArgs,
  validateToolArgs,
} from "../tools/define-tool.ts";
import { AGENT_ACTION_TIMEOUT_MS } from "./settings.ts";
import type { CallKey, CallOutcome } from "./journal.ts";
import { readRunContext, reportUsage, withRunContext } from "./run-context.ts";
import { traceToolRun } from "./tool-run.ts";
import type { AgentRuntime } from "./runtime.ts";
import type { Source, ToolCallRecord } from "./state.ts";
import { type UsageByAgent, mergeUsage } from "./usage.ts";

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

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * The sandbox session of an agent run: the thread, the agent's own checkpoint namespace (the
 * running node's namespace without its last segment, the node's task, so every step of one run
 * shares it and each sub-agent call has its own: it holds the calling task's id), the task epochs
 * and the agent's name. Actions of one session may share a sandbox process; different runs never
 * do. A top-level agent run without a thread cannot be told from another one: each of its actions
 * is a session of its own (undefined).
 */
export function sandboxSession(
  threadId: string,
  checkpointNs: string,
  taskEpochs: readonly number[],
  agent: string,
): string | undefined {
  const cut = checkpointNs.lastIndexOf("|");
  const ownNs = cut < 0 ? "" : checkpointNs.slice(0, cut);
  if (!threadId && !ownNs) return undefined;
  return JSON.stringify([threadId, ownNs, taskEpochs, agent]);
}

/** The sandbox session of the agent run a node of `rt` runs in (see {@link sandboxSession}). */
function runSession(
  rt: AgentRuntime,
  config: LangGraphRunnableConfig,
  taskEpoch: number | undefined,
): string | undefined {
  const configurable = (config.configurable ?? {}) as Record<string, unknown>;
  return sandboxSession(
    String(configurable.thread_id ?? ""),
    String(configurable.checkpoint_ns ?? ""),
    [...(readRunContext(config).taskEpochs ?? []), taskEpoch ?? 0],
    rt.name,
  );
}

/**
 * Tells the agent's sandbox that this run's next action is coming (the action writer calls it as
 * its model call starts), so a backend can get its process ready while the model thinks
 * (`CodeSandbox.prepare`). Never waits, never throws.
 */
export function prepareSandbox(
  rt: AgentRuntime,
  config: LangGraphRunnableConfig,
  taskEpoch: number | undefined,
): void {
  tellSandbox(rt, config, taskEpoch, (sandbox, session) => sandbox.prepare?.(session));
}

/**
 * Tells the agent's sandbox that this run is over (it answered or stopped): what the backend
 * kept for it may go (`CodeSandbox.endSession`). Never waits, never throws.
 */
export function endSandboxSession(
  rt: AgentRuntime,
  config: LangGraphRunnableConfig,
  taskEpoch: number | undefined,
): void {
  tellSandbox(rt, config, taskEpoch, (sandbox, session) => sandbox.endSession?.(session));
}

/** Hands the run's sandbox session to `tell` in the background (hints: failures are ignored). */
function tellSandbox(
  rt: AgentRuntime,
  config: LangGraphRunnableConfig,
  taskEpoch: number | undefined,
  tell: (sandbox: Awaited<ReturnType<AgentRuntime["sandbox"]>>, session: string) => unknown,
): void {
  const session = runSession(rt, config, taskEpoch);
  if (session === undefined) return;
  void rt
    .sandbox(config)
    .then((sandbox) => tell(sandbox, session))
    .catch(() => {});
}

/**
 * The line of a tool's `nth` call (0-based, in call order) for an approval request: its call site
 * when the code has one, else the nth call site (straight-line code), else the last.
 */
function codeLine(
  code: string,
  toolName: string,
  nth: number,
): { line: number | null; lineText: string | null } {
  const lines = callLines(code, toolName);
  if (!lines.length) return { line: null, lineText: null };
  const line = lines[Math.min(nth, lines.length - 1)];
  return { line, lineText: code.split("\n")[line - 1]?.trim() ?? null };
}

/** What running one piece of model code produced. */
export interface CodeRun {
  /** The sandbox's result (logs, final answer, error, snapshot). */
  result: ActionResult;
  /** Tool calls in call order. */
  toolCalls: ToolCallRecord[];
  /** Usage the tools reported (sub-agents), merged in call order. */
  usage: UsageByAgent;
  /** Sources the tools reported, in call order. */
  sources: Source[];
}

/**
 * Runs model code in the agent's sandbox with the agent's tools and the saved variables — the act
 * node's code path, shared with the final-answer node. Each tool call is validated against the
 * tool's schema, served from the call journal (the run context's `journal`) when it was already made
 * (same thread, namespace, task epochs, step, call index, tool and arguments — so a resumed run
 * never repeats a finished sub-agent call, and a new task on a finished thread never gets the
 * previous task's results) and recorded otherwise. Tools report usage and sources through
 * `ctx.report`; usage also goes straight to the run's usage sink, so it survives a failing action.
 * Throws the first framework error (a code that is `fatalInTool`, src/errors.ts; a journal failure)
 * raised inside a tool.
 */
export async function runCodeWithTools(
  rt: AgentRuntime,
  tools: readonly CodeTool<any>[],
  config: LangGraphRunnableConfig,
  request: {
    code: string;
    step: number;
    variables: VariablesSnapshot | null | undefined;
    /** The agent's `taskEpoch` state channel (default 0: the thread's first task). */
    taskEpoch?: number;
  },
): Promise<CodeRun> {
  const { step } = request;
  const context = readRunContext(config);
  const journal = rt.journal(config);
  const configurable = (config.configurable ?? {}) as Record<string, unknown>;
  const threadId = String(configurable.thread_id ?? "");
  const checkpointNs = String(configurable.checkpoint_ns ?? "");
  const taskEpochs = [...(context.taskEpochs ?? []), request.taskEpoch ?? 0];
  const agentPath = [...(context.agentPath ?? []), rt.name];
  // Tools get the epochs in their run context: a sub-agent invoked with it keys its calls under them.
  // ... and the journal, so agents it calls use this one (also when it is this agent's fallback).
  const toolConfig = withRunContext(config, {
    taskEpochs,
    agentPath,
    ...(journal ? { journal } : {}),
  });
  const toolCalls: ToolCallRecord[] = [];
  let fatal: CodehopError | undefined;
  // An approval this action (or a sub-agent it called) asked for: the action stops at once and
  // the act node rethrows it, which pauses the run. On resume the action runs again from its
  // start, with its variables from before it, and finished calls are served from the journal.
  let paused: unknown;
  const stop = new AbortController();
  const approvals = actionApprovals(config, threadId, journal);
  // Calls of each tool so far, to tell which of its call sites made a call (approval requests).
  const callsByTool = new Map<string, number>();
  // Calls of each tool with valid arguments so far (`ctx.toolCallIndex`). Counted before anything
  // is awaited: hosts are entered in call order, so the count is the same on every run.
  const validCallsByTool = new Map<string, number>();
  const pause = (err: unknown, signal: AbortSignal): Promise<never> => {
    paused ??= err;
    stop.abort(err);
    // The guest never sees this call settle: its action is being stopped.
    return new Promise((_resolve, reject) => {
      const cut = () => reject(new Error("The action was stopped for an approval."));
      if (signal.aborted) cut();
      else signal.addEventListener("abort", cut, { once: true });
    });
  };
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
      const nth = callsByTool.get(tool.name) ?? 0;
      callsByTool.set(tool.name, nth + 1);
      // Once the action is pausing, nothing else it calls runs.
      if (paused !== undefined) return pause(paused, signal);
      let approval: ToolCallRecord["approval"];
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
          ...(approval ? { approval } : {}),
        });
      let args: Record<string, unknown>;
      try {
        args = parseToolArgs(tool, rawArgs);
      } catch (err) {
        record(rawArgs, false, errorMessage(err), false);
        throw err;
      }
      const toolCallIndex = validCallsByTool.get(tool.name) ?? 0;
      validCallsByTool.set(tool.name, toolCallIndex + 1);
      const key: CallKey = {
        threadId,
        checkpointNs,
        taskEpochs,
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
        approval = recorded.approval;
        keepReports(callIndex, recorded.reports ?? []);
        record(args, recorded.ok, recorded.ok ? undefined : recorded.error, true);
        if (recorded.ok) return recorded.value;
        throw new Error(recorded.error);
      }
      let runArgs = args;
      if (needsApproval(tool, args)) {
        let decision: ApprovalResume;
        try {
          decision = await approvals.decide(
            {
              agent: rt.name,
              agentPath,
              tool: tool.name,
              args,
              step,
              callIndex,
              ...codeLine(request.code, tool.name, nth),
              code: request.code,
            },
            key,
            tool,
          );
        } catch (err) {
          if (isGraphInterrupt(err)) return pause(err, signal);
          if (CodehopError.isInstance(err)) fatal ??= err;
          throw err;
        }
        // A rejection is the call's outcome: journaled like a failed call, so a resume serves it.
        const refuse = async (message: string): Promise<never> => {
          record(args, false, message, false);
          if (journal)
            await journalOp(() => journal.put(key, { ok: false, error: message, approval }));
          throw new Error(message);
        };
        if (decision.decision === "reject") {
          approval = {
            decision: "reject",
            ...(decision.reason ? { reason: decision.reason } : {}),
          };
          return refuse(
            `The user rejected this call to ${tool.name}()${decision.reason ? `: ${decision.reason}` : "."}`,
          );
        }
        if (decision.decision === "edit") {
          approval = { decision: "edit", args: decision.args };
          try {
            runArgs = validateToolArgs(tool, decision.args);
          } catch (err) {
            return refuse(
              `The user edited the arguments of this call to ${tool.name}(), but they are invalid: ${errorMessage(err)}`,
            );
          }
        } else approval = { decision: "approve" };
      }
      const reports: ToolReport[] = [];
      let json: unknown;
      try {
        const value = await traceToolRun(tool.name, runArgs, toolConfig, (config) =>
          tool.invoke(runArgs, {
            callIndex,
            toolCallIndex,
            signal,
            config,
            report: (r) => reports.push(r),
          }),
        );
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
        // A sub-agent paused for an approval: this action pauses too (the call is not journaled:
        // on resume it runs again, and the sub-agent continues from its checkpoint).
        if (isGraphInterrupt(err)) return pause(err, signal);
        if (isFatalInTool(err)) {
          fatal ??= err;
          throw err;
        }
        const message = errorMessage(err);
        record(runArgs, false, message, false);
        // A call cut short did not finish: don't journal it, or a resume would be served the cut as
        // the call's outcome. Cut by the action ending (timeout: `signal`), or by the run being
        // aborted (Ctrl-C, the calling parent's action ending: `config.signal`) — a sub-agent
        // listens on the run's signal and rejects before the action's own signal fires.
        if (journal && !signal.aborted && !config.signal?.aborted)
          await journalOp(() =>
            journal.put(key, {
              ok: false,
              error: message,
              reports,
              ...(approval ? { approval } : {}),
            }),
          );
        throw err;
      }
      keepReports(callIndex, reports);
      record(runArgs, true, undefined, false);
      if (journal)
        await journalOp(() =>
          journal.put(key, {
            ok: true,
            value: json,
            reports,
            ...(approval ? { approval } : {}),
          } satisfies CallOutcome),
        );
      return json;
    };

  const sandbox = await rt.sandbox(config);
  // Actions that call sub-agents wait for whole agent runs: give them a longer deadline.
  const timeoutMs =
    rt.settings.actionTimeoutMs ??
    (tools.some((t) => t.isAgent) ? AGENT_ACTION_TIMEOUT_MS : undefined);
  let result: ActionResult;
  try {
    result = await sandbox.run({
      code: request.code,
      tools: Object.fromEntries(tools.map((t) => [t.name, host(t)])),
      snapshot: request.variables ?? undefined,
      ...(timeoutMs === undefined ? {} : { limits: { timeoutMs } }),
      // The run was aborted (Ctrl-C, or the parent action that called this sub-agent ended), or
      // the action pauses for an approval: stop the action, or drop it from the sandbox's queue
      // if it is still waiting for a process.
      signal: config.signal ? AbortSignal.any([config.signal, stop.signal]) : stop.signal,
      session: sandboxSession(threadId, checkpointNs, taskEpochs, rt.name),
    });
  } finally {
    approvals.release();
  }
  if (paused !== undefined) {
    // The root agent's pause is what the run shows: its approvals are the ones a decision that
    // names none (agent-chat-ui's) may answer on resume.
    if (!context.agentPath?.length) await approvals.surfaced(paused);
    throw paused;
  }
  if (fatal) throw fatal;
  toolCalls.sort((a, b) => a.callIndex - b.callIndex);
  let usage: UsageByAgent = {};
  const sources: Source[] = [];
  for (const index of [...reportsByCall.keys()].sort((a, b) => a - b)) {
    for (const r of reportsByCall.get(index)!) {
      if (r.usage) usage = mergeUsage(usage, r.usage);
      if (r.sources) sources.push(...(r.sources as Source[]));
    }
  }
  return { result, toolCalls, usage, sources };
}
