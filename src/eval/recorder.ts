import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import type { BaseMessage } from "@langchain/core/messages";
import type { LLMResult } from "@langchain/core/outputs";
import type { AgentTranscript, AgentUsage, TranscriptMessage } from "./types.ts";

/**
 * Callback handler that records every chat-model call made while answering one question: usage
 * per agent (from the provider's reported `usage_metadata`, not estimates) and the conversation
 * of each agent invocation, for the report and the trajectory export.
 *
 * It is passed in `callbacks` of the top-level invoke, and LangChain propagates it into nested
 * graphs and models, so it sees the calls of every agent without the agents knowing about it.
 * The agent of a call is, in order: `metadata.codehop_agent`, `metadata.agent`, the last
 * LangGraph checkpoint namespace segment (`page_search:<uuid>` → `page_search`), the
 * `langgraph_node`, or `fallbackAgent`.
 */
export class EvalRecorder extends BaseCallbackHandler {
  name = "codehop_eval_recorder";
  override awaitHandlers = true;
  readonly usage: Record<string, AgentUsage> = {};
  private readonly pending = new Map<string, { agent: string; group: string; messages: TranscriptMessage[] }>();
  /** Last (longest) conversation per agent invocation group, with the reply appended. */
  private readonly groups = new Map<string, { agent: string; messages: TranscriptMessage[] }>();
  failedCalls = 0;

  constructor(private readonly fallbackAgent: string) {
    super();
  }

  /** Total model calls recorded. */
  get calls(): number {
    return Object.values(this.usage).reduce((a, u) => a + u.calls, 0);
  }

  override async handleChatModelStart(
    _llm: unknown,
    messages: BaseMessage[][],
    runId: string,
    _parentRunId?: string,
    _extra?: Record<string, unknown>,
    _tags?: string[],
    metadata?: Record<string, unknown>,
  ): Promise<void> {
    const { agent, group } = this.agentOf(metadata);
    this.pending.set(runId, { agent, group, messages: (messages[0] ?? []).map(toTranscriptMessage) });
  }

  override async handleLLMEnd(output: LLMResult, runId: string): Promise<void> {
    const call = this.pending.get(runId);
    if (!call) return;
    this.pending.delete(runId);
    const gen = output.generations?.[0]?.[0] as any;
    const msg = gen?.message;
    const meta = msg?.usage_metadata;
    const tokenUsage = (output.llmOutput as any)?.tokenUsage;
    const u = (this.usage[call.agent] ??= { calls: 0, inputTokens: 0, outputTokens: 0, cachedTokens: 0 });
    u.calls++;
    u.inputTokens += meta?.input_tokens ?? tokenUsage?.promptTokens ?? 0;
    u.outputTokens += meta?.output_tokens ?? tokenUsage?.completionTokens ?? 0;
    u.cachedTokens += meta?.input_token_details?.cache_read ?? 0;
    const reply = typeof msg?.content === "string" ? msg.content : String(gen?.text ?? "");
    const messages = [...call.messages, { role: "assistant" as const, content: reply }];
    const prev = this.groups.get(call.group);
    // A code agent's conversation grows call by call: keep the longest one of each invocation.
    if (!prev || messages.length >= prev.messages.length) this.groups.set(call.group, { agent: call.agent, messages });
  }

  override async handleLLMError(_err: unknown, runId: string): Promise<void> {
    const call = this.pending.get(runId);
    if (!call) return;
    this.pending.delete(runId);
    this.failedCalls++;
    (this.usage[call.agent] ??= { calls: 0, inputTokens: 0, outputTokens: 0, cachedTokens: 0 }).calls++;
  }

  /** One transcript per agent invocation, in the order the invocations first finished a call. */
  transcripts(): AgentTranscript[] {
    return [...this.groups.values()].map((g) => ({ agent: g.agent, messages: g.messages }));
  }

  private agentOf(metadata: Record<string, unknown> | undefined): { agent: string; group: string } {
    const m = metadata ?? {};
    const ns = typeof m.langgraph_checkpoint_ns === "string" ? m.langgraph_checkpoint_ns : "";
    const explicit = [m.codehop_agent, m.agent].find((x): x is string => typeof x === "string" && x.length > 0);
    // Drop the innermost segment when it is the model-calling node itself; invocations are told
    // apart by the namespace of the graph that owns them.
    const segments = ns.split("|").filter(Boolean);
    const owner = segments.length > 1 ? segments.slice(0, -1) : segments;
    const lastGraph = owner.length > 1 ? owner[owner.length - 1].split(":")[0] : undefined;
    const node = typeof m.langgraph_node === "string" ? m.langgraph_node : undefined;
    const agent = explicit ?? lastGraph ?? node ?? this.fallbackAgent;
    const group = `${agent}|${owner.join("|")}`;
    return { agent, group };
  }
}

function toTranscriptMessage(m: BaseMessage): TranscriptMessage {
  const type = m.getType();
  const role = type === "system" ? "system" : type === "ai" ? "assistant" : "user";
  const content =
    typeof m.content === "string"
      ? m.content
      : (m.content as any[]).map((p) => (typeof p === "string" ? p : (p?.text ?? ""))).join("");
  return { role, content };
}
