/**
 * Human approval of tool calls made from code actions. A tool with an `approval` policy
 * (src/tools/define-tool.ts) that applies to a call pauses the run with LangGraph's `interrupt()`
 * before the tool runs; the payload ({@link ApprovalRequest}) says which agent, tool, arguments and
 * code line; the run resumes with `Command({ resume: ApprovalResume })`.
 *
 * How a decision reaches its call, robustly: the act node that asked is re-run from the start on
 * resume (finished calls are served from the call journal), so the host of the same call asks
 * `interrupt()` again and LangGraph hands it the resume values of that node task in order. Resume
 * values name the approval they answer (`approvalId`), because LangGraph's matching is by position:
 * a plain resume value is also handed to every sub-agent started in the resumed node, and an older
 * value of the task comes first again after a second pause. So every value a host receives is
 * recorded for the approval it names (first decision wins), in memory for the run and in the call
 * journal, and a host takes the decision recorded for its own approval id — whichever host, in
 * whichever order, received it.
 */
import * as acorn from "acorn";
import type { RunnableConfig } from "@langchain/core/runnables";
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";
import { interrupt, isGraphInterrupt } from "@langchain/langgraph";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { createHash } from "node:crypto";
import { z } from "zod";
import { type CodeTool, toolParametersJsonSchema } from "../tools/define-tool.ts";
import {
  approvalIdField,
  ApprovalResumeSchema,
  type ApprovalJournal,
  type ApprovalResume,
} from "./approval-decision.ts";
import type { CallJournal, CallKey } from "./journal.ts";
import { takesNewResumeValue } from "./pregel-internals.ts";

export { ApprovalResumeSchema, type ApprovalJournal, type ApprovalResume };

/** The `type` of every codehop approval interrupt (tells it from other interrupts in a UI). */
export const APPROVAL_INTERRUPT_TYPE = "codehop.approval";

/**
 * The interrupt payload of an approval: what `getState(...).tasks[].interrupts[].value` holds,
 * what the `__interrupt__` stream event carries and what `codehop resume` shows. Stable shape.
 */
export const ApprovalRequestSchema = z.object({
  type: z.literal(APPROVAL_INTERRUPT_TYPE),
  /** Names this call; the resume value repeats it. Stable across resumes of the same call. */
  approvalId: z.string(),
  /** The agent whose code made the call. */
  agent: z.string(),
  /** Agents from the root down to `agent` (a sub-agent's call: `["manager", "page_search"]`). */
  agentPath: z.array(z.string()),
  /** The tool called. */
  tool: z.string(),
  /** The arguments, validated by the tool's schema. */
  args: z.record(z.string(), z.unknown()),
  /** The agent-local step of the code action and the call's index within it. */
  step: z.number().int(),
  callIndex: z.number().int(),
  /** 1-based line of the call in the action's code (null when it cannot be told). */
  line: z.number().int().nullable(),
  /** That line's text (trimmed), or null. */
  lineText: z.string().nullable(),
  /** The whole code action. */
  code: z.string(),
  /** JSON Schema of the tool's parameters (what an edit must satisfy). */
  parameters: z.record(z.string(), z.unknown()),
  /**
   * The same request in LangChain's human-in-the-loop format (HITLRequest), which agent-chat-ui
   * renders as an approve / edit / reject form: the call, with a description naming the agent
   * and the code line. Absent from requests made before it was added.
   */
  action_requests: z
    .array(
      z.object({
        name: z.string(),
        args: z.record(z.string(), z.unknown()),
        description: z.string().optional(),
      }),
    )
    .optional(),
  /** HITLRequest's review configuration: the decisions allowed and the arguments' JSON Schema. */
  review_configs: z
    .array(
      z.object({
        action_name: z.string(),
        allowed_decisions: z.array(z.enum(["approve", "edit", "reject"])),
        args_schema: z.record(z.string(), z.unknown()).optional(),
      }),
    )
    .optional(),
});

/** The interrupt payload of an approval (see {@link ApprovalRequestSchema}). */
export type ApprovalRequest = z.infer<typeof ApprovalRequestSchema>;

/**
 * A resume value in LangChain's human-in-the-loop format, as agent-chat-ui sends it:
 * `{ decisions: [{ type: "approve" } | { type: "reject", message? } | { type: "edit",
 * edited_action: { name, args } }] }`. It names no approval: see {@link actionApprovals} for
 * which call it answers.
 */
export const HitlResumeSchema = z.object({
  decisions: z
    .array(
      z.discriminatedUnion("type", [
        z.object({ type: z.literal("approve") }),
        z.object({ type: z.literal("reject"), message: z.string().optional() }),
        z.object({
          type: z.literal("edit"),
          edited_action: z.object({ name: z.string(), args: z.record(z.string(), z.unknown()) }),
        }),
      ]),
    )
    .length(1),
});

/** A human-in-the-loop resume value (see {@link HitlResumeSchema}). */
export type HitlResume = z.infer<typeof HitlResumeSchema>;

/** The decision of a human-in-the-loop resume value for `approvalId`. */
export function fromHitlResume(value: HitlResume, approvalId: string): ApprovalResume {
  const [d] = value.decisions;
  if (d.type === "approve") return { approvalId, decision: "approve" };
  if (d.type === "reject")
    return { approvalId, decision: "reject", ...(d.message ? { reason: d.message } : {}) };
  return { approvalId, decision: "edit", args: d.edited_action.args };
}

/** A decision as the API takes it: `approvalId` may be left out to answer the pending approval. */
export const ApprovalDecisionSchema = z.discriminatedUnion("decision", [
  z.object({ approvalId: approvalIdField.optional(), decision: z.literal("approve") }),
  z.object({
    approvalId: approvalIdField.optional(),
    decision: z.literal("reject"),
    reason: z.string().optional(),
  }),
  z.object({
    approvalId: approvalIdField.optional(),
    decision: z.literal("edit"),
    args: z.record(z.string(), z.unknown()),
  }),
]);

/** A decision for {@link ApprovalDecisionSchema} (`resumeThread(id, { approval })`). */
export type ApprovalDecision = z.infer<typeof ApprovalDecisionSchema>;

/** True when `value` is a codehop approval request (an interrupt's value). */
export function isApprovalRequest(value: unknown): value is ApprovalRequest {
  return ApprovalRequestSchema.safeParse(value).success;
}

/**
 * The approval id of a call: a hash of its journal key (thread-local namespace, task epochs, step,
 * call index, tool, arguments), so the same call asks under the same id on every resume and an
 * answer can never apply to another call.
 */
export function approvalIdOf(key: CallKey): string {
  const hash = createHash("sha256")
    .update(
      JSON.stringify([
        key.checkpointNs,
        (key.taskEpochs ?? []).join("."),
        key.step,
        key.callIndex,
        key.tool,
        key.argsJson,
      ]),
    )
    .digest("hex");
  return `ap_${hash.slice(0, 20)}`;
}

/**
 * Whether a call needs approval under its tool's policy. A predicate that throws counts as "yes":
 * when in doubt, ask.
 */
export function needsApproval(tool: CodeTool<any>, args: Record<string, unknown>): boolean {
  const policy = tool.approval;
  if (policy === undefined || policy === "never") return false;
  if (policy === "always") return true;
  try {
    return Boolean(policy(args as any));
  } catch {
    return true;
  }
}

/**
 * Lines of the calls of `name` in `code` (1-based, in source order): call expressions whose callee
 * is the identifier `name`, found with acorn; a plain text search when the code does not parse.
 */
export function callLines(code: string, name: string): number[] {
  const lines: number[] = [];
  try {
    const ast = acorn.parse(code, {
      ecmaVersion: "latest",
      sourceType: "script",
      allowAwaitOutsideFunction: true,
      allowReturnOutsideFunction: true,
      locations: true,
    });
    const visit = (node: unknown): void => {
      if (!node || typeof node !== "object") return;
      if (Array.isArray(node)) return node.forEach(visit);
      const n = node as { type?: string; callee?: { type: string; name?: string }; loc?: any };
      if (n.type === "CallExpression" && n.callee?.type === "Identifier" && n.callee.name === name)
        lines.push(n.loc.start.line);
      for (const [k, v] of Object.entries(n)) if (k !== "loc" && typeof v === "object") visit(v);
    };
    visit(ast);
  } catch {
    const call = new RegExp(`(^|[^\\w$.])${name.replace(/\$/g, "\\$")}\\s*\\(`);
    code.split("\n").forEach((text, i) => {
      if (call.test(text)) lines.push(i + 1);
    });
  }
  return [...new Set(lines)].sort((a, b) => a - b);
}

function approvalJournal(journal: CallJournal | undefined): ApprovalJournal | undefined {
  const j = journal as Partial<ApprovalJournal> | undefined;
  return j && typeof j.getDecision === "function" && typeof j.putDecision === "function"
    ? (j as ApprovalJournal)
    : undefined;
}

/**
 * Decisions seen during the runs of a thread in this process, by approval id, so a decision one
 * node task received (a plain resume value reaches several) is found by the call it names while
 * the journal write is still under way. Dropped when no action of the thread is running.
 */
const liveDecisions = new Map<string, { decisions: Map<string, ApprovalResume>; users: number }>();

/** The description of a call in a HITL request: agent, tool, and the line of code that calls it. */
function describeCall(
  fields: Pick<ApprovalRequest, "agent" | "line" | "lineText">,
  tool: string,
): string {
  const where = fields.line !== null ? ` (line ${fields.line}: ${fields.lineText ?? ""})` : "";
  return `${fields.agent} calls ${tool}()${where}; approve, edit its arguments or reject it.`;
}

/** The approval side of one code action: asks, records and hands out decisions. */
export interface ActionApprovals {
  /**
   * The decision for a call that needs approval: recorded (memory, journal) or given by the resume
   * values of this node task; otherwise throws LangGraph's GraphInterrupt with the request.
   */
  decide(
    request: Omit<ApprovalRequest, "type" | "approvalId" | "parameters">,
    key: CallKey,
    tool: CodeTool<any>,
  ): Promise<ApprovalResume>;
  /** Ends the action's use of the thread's live decisions. */
  release(): void;
  /**
   * Records the approvals the run pauses with (the GraphInterrupt the root agent's action ends
   * with: what the thread's state shows), in the journal: the calls a HITL decision may answer.
   */
  surfaced(pause: unknown): Promise<void>;
}

/**
 * The approvals of one code action run by `config`'s node task (thread `threadId`, journal if any).
 */
export function actionApprovals(
  config: RunnableConfig,
  threadId: string,
  journal: CallJournal | undefined,
): ActionApprovals {
  let live = liveDecisions.get(threadId);
  if (!live) liveDecisions.set(threadId, (live = { decisions: new Map(), users: 0 }));
  live.users++;
  const shared = live;
  const store = approvalJournal(journal);
  let released = false;
  const record = (decision: ApprovalResume) => {
    if (!shared.decisions.has(decision.approvalId))
      shared.decisions.set(decision.approvalId, decision);
  };
  return {
    async decide(fields, key, tool) {
      const approvalId = approvalIdOf(key);
      const own = () => shared.decisions.get(approvalId);
      if (!own() && store) {
        const stored = await store.getDecision(threadId, approvalId);
        if (stored) record(stored);
      }
      const parameters = toolParametersJsonSchema(tool);
      const request: ApprovalRequest = {
        type: APPROVAL_INTERRUPT_TYPE,
        approvalId,
        ...fields,
        parameters,
        action_requests: [
          { name: tool.name, args: fields.args, description: describeCall(fields, tool.name) },
        ],
        review_configs: [
          {
            action_name: tool.name,
            allowed_decisions: ["approve", "edit", "reject"],
            args_schema: parameters,
          },
        ],
      };
      // A HITL value (agent-chat-ui's) names no approval: it answers this call only when this
      // call is the one the run paused for (shown in the thread's state: see `surfaced`,
      // undecided) and the value is the one the resume command brought (not an older value of
      // the task, not a copy LangGraph hands another sub-agent started in the resumed node).
      const mayTakeHitl =
        !own() && store?.wasAsked ? await store.wasAsked(threadId, approvalId) : false;
      // Synchronous from here to the end of the loop: no other host takes resume values of this
      // task in between (LangGraph counts interrupt() calls per task).
      const seen: ApprovalResume[] = [];
      let asked: unknown;
      try {
        while (!own()) {
          const fresh = mayTakeHitl && takesNewResumeValue(config);
          // interrupt() reads the node task's config from async-local storage; a host function
          // runs in the sandbox's message handler, so the act node's config is installed here.
          const value = AsyncLocalStorageProviderSingleton.runWithConfig(config, () =>
            interrupt(request),
          );
          const parsed = ApprovalResumeSchema.safeParse(value);
          if (parsed.success) {
            record(parsed.data);
            seen.push(parsed.data);
            continue;
          }
          const hitl = HitlResumeSchema.safeParse(value);
          if (hitl.success) {
            const named = (value as { approvalId?: unknown }).approvalId;
            if (typeof named === "string" || fresh) {
              const decision = fromHitlResume(
                hitl.data,
                typeof named === "string" ? named : approvalId,
              );
              // Named from now on: a re-run of this task reads it as this call's answer.
              if (typeof named !== "string") Object.assign(value as object, { approvalId });
              record(decision);
              seen.push(decision);
              continue;
            }
          }
          // Otherwise the value names no approval and cannot be told apart from an older one:
          // it is skipped, and the call asks again.
        }
      } catch (err) {
        asked = err;
      }
      // Values this task received for other calls are kept for them too (first decision wins).
      if (store) for (const d of seen) await store.putDecision(threadId, d);
      if (asked === undefined) return own()!;
      if (isGraphInterrupt(asked)) throw asked;
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `${tool.name}() needs approval, which pauses the run: run the graph with a checkpointer (${asked instanceof Error ? asked.message : String(asked)})`,
        { cause: asked },
      );
    },
    async surfaced(pause) {
      if (!store?.markAsked || !isGraphInterrupt(pause)) return;
      for (const i of pause.interrupts ?? [])
        if (isApprovalRequest(i.value)) await store.markAsked(threadId, i.value.approvalId);
    },
    release() {
      if (released) return;
      released = true;
      if (--shared.users === 0) liveDecisions.delete(threadId);
    },
  };
}

/**
 * The approvals a thread waits for, from its state snapshot (`graph.getState(config)`): the values
 * of its tasks' interrupts that are codehop approval requests (a sub-agent's request shows on the
 * root task whose action called it). Codehop asks one at a time, so there is at most one.
 */
export function pendingApprovals(snapshot: {
  tasks?: ReadonlyArray<{ interrupts?: ReadonlyArray<{ value?: unknown }> }>;
}): ApprovalRequest[] {
  const found = new Map<string, ApprovalRequest>();
  for (const task of snapshot.tasks ?? [])
    for (const i of task.interrupts ?? [])
      if (isApprovalRequest(i.value)) found.set(i.value.approvalId, i.value);
  return [...found.values()];
}

/**
 * The resume value answering `decision` (validated; its `approvalId` defaults to the pending
 * approval's when exactly one is pending) for a thread waiting for `pending`.
 * CODEHOP_CONFIG_INVALID when nothing is pending, the decision is malformed, names another
 * approval, or names none while several are pending (the message lists them).
 */
export function approvalResume(
  decision: unknown,
  pending: readonly ApprovalRequest[],
  threadId: string,
): ApprovalResume {
  const parsed = ApprovalDecisionSchema.safeParse(decision);
  if (!parsed.success) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Invalid approval decision: ${parsed.error.issues.map((i) => `${i.path.join(".") || "decision"}: ${i.message}`).join("; ")} ` +
        `(expected { decision: "approve" }, { decision: "reject", reason } or { decision: "edit", args: { ... } })`,
    );
  }
  if (!pending.length) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Thread "${threadId}" is not waiting for an approval.`,
    );
  }
  // Without an id, the decision answers the one pending approval; with several, guessing could
  // approve the wrong call.
  if (parsed.data.approvalId === undefined && pending.length > 1) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Thread "${threadId}" waits for ${pending.length} approvals: ${pending.map((p) => `${p.approvalId} (${describeApproval(p)})`).join(", ")}. ` +
        `Name the one you answer: --approval-id <id> (API: the decision's approvalId).`,
    );
  }
  const approvalId = parsed.data.approvalId ?? pending[0].approvalId;
  if (!pending.some((p) => p.approvalId === approvalId)) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Thread "${threadId}" is not waiting for approval "${approvalId}" (it waits for ${pending.map((p) => p.approvalId).join(", ")}).`,
    );
  }
  return ApprovalResumeSchema.parse({ ...parsed.data, approvalId });
}

/** One line naming a pending approval, for messages: `worker: delete_note({"id":"a"})`. */
export function describeApproval(request: ApprovalRequest): string {
  return `${request.agent}: ${request.tool}(${JSON.stringify(request.args)})`;
}
