import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import { AGENT_NAMES } from "../apps/qa/team.ts";
import type { BaseMessage } from "@langchain/core/messages";
import { LAST_ACTION_NOTE } from "../core/history.ts";
import type { LLMResult } from "@langchain/core/outputs";
import type { AgentTranscript, AgentUsage, TranscriptMessage } from "./types.ts";
import { contentText } from "../core/models.ts";

interface ModelCall {
  order: number;
  parentRunId?: string;
  metadata: Record<string, unknown>;
  messages: TranscriptMessage[];
  reply?: string;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  failed: boolean;
}

/**
 * Callback handler that records every chat-model call made while answering one question: usage
 * per agent (from the provider's reported `usage_metadata`, not estimates) and the conversation
 * of each agent invocation, for the report and the trajectory export.
 *
 * Pass it in `callbacks` of the top-level invoke: LangChain hands it down into nested graphs and
 * model calls, so it sees every agent's calls without the agents knowing about it.
 *
 * A call belongs to, in order: `metadata.codehop_agent` (the baselines set it); else the nearest
 * enclosing run whose name is a known agent (`knownAgents`: a code agent's compiled graph is
 * named after the agent, so the manager's calls sit under the "manager" run and a sub-agent's
 * under its own "wikipedia_search" run, which is also what tells invocations apart); else
 * `fallbackAgent`.
 */
export class EvalRecorder extends BaseCallbackHandler {
  name = "codehop_eval_recorder";
  override awaitHandlers = true;
  /** Agent names to look for among enclosing runs (graph names: the app's team registry). */
  readonly knownAgents: Set<string>;
  private readonly chains = new Map<string, { parentRunId?: string; name?: string }>();
  private readonly calls = new Map<string, ModelCall>();
  private order = 0;

  /**
   * @param fallbackAgent who a call belongs to when nothing else says (the system's name)
   * @param knownAgents the agents of the system's team (`teamAgentNames(app.team)`; default: the
   *   QA app's, from its team registry)
   */
  constructor(
    private readonly fallbackAgent: string,
    knownAgents: Iterable<string> = AGENT_NAMES,
  ) {
    super();
    this.knownAgents = new Set(knownAgents);
  }

  override async handleChainStart(
    _chain: unknown,
    _inputs: unknown,
    runId: string,
    parentRunId?: string,
    _tags?: string[],
    _metadata?: Record<string, unknown>,
    _runType?: string,
    runName?: string,
  ): Promise<void> {
    this.chains.set(runId, { parentRunId, name: runName });
  }

  override async handleChatModelStart(
    _llm: unknown,
    messages: BaseMessage[][],
    runId: string,
    parentRunId?: string,
    _extra?: Record<string, unknown>,
    _tags?: string[],
    metadata?: Record<string, unknown>,
  ): Promise<void> {
    this.calls.set(runId, {
      order: this.order++,
      parentRunId,
      metadata: metadata ?? {},
      messages: (messages[0] ?? []).map(toTranscriptMessage),
      inputTokens: 0,
      outputTokens: 0,
      cachedTokens: 0,
      failed: false,
    });
  }

  override async handleLLMEnd(output: LLMResult, runId: string): Promise<void> {
    const call = this.calls.get(runId);
    if (!call) return;
    const gen = output.generations?.[0]?.[0] as any;
    const msg = gen?.message;
    const meta = msg?.usage_metadata;
    const tokenUsage = (output.llmOutput as any)?.tokenUsage;
    call.inputTokens = meta?.input_tokens ?? tokenUsage?.promptTokens ?? 0;
    call.outputTokens = meta?.output_tokens ?? tokenUsage?.completionTokens ?? 0;
    call.cachedTokens = meta?.input_token_details?.cache_read ?? 0;
    call.reply = contentText(msg?.content ?? gen?.text ?? "");
  }

  override async handleLLMError(_err: unknown, runId: string): Promise<void> {
    const call = this.calls.get(runId);
    if (call) call.failed = true;
  }

  /** Usage per agent. */
  get usage(): Record<string, AgentUsage> {
    const out: Record<string, AgentUsage> = {};
    for (const call of this.calls.values()) {
      const { agent } = this.owner(call);
      const u = (out[agent] ??= { calls: 0, inputTokens: 0, outputTokens: 0, cachedTokens: 0 });
      u.calls++;
      u.inputTokens += call.inputTokens;
      u.outputTokens += call.outputTokens;
      u.cachedTokens += call.cachedTokens;
    }
    return out;
  }

  /**
   * One transcript per agent invocation, in the order the invocations started, with every turn
   * verbatim: the first call's prompt (system + task), then each call's reply followed by the
   * observation the next call received (its user messages the previous call did not have).
   * Rebuilt this way because a code agent condenses old steps in what it sends the model, so no
   * single call holds the whole conversation. Calls with another system prompt than the
   * invocation's first (planning, final-answer requests) are not part of the chain.
   */
  transcripts(): AgentTranscript[] {
    const groups = new Map<string, { agent: string; calls: ModelCall[] }>();
    for (const call of [...this.calls.values()].sort((a, b) => a.order - b.order)) {
      if (call.reply === undefined) continue;
      const { agent, invocation } = this.owner(call);
      const g =
        groups.get(invocation) ?? groups.set(invocation, { agent, calls: [] }).get(invocation)!;
      g.calls.push(call);
    }
    return [...groups.values()].map(({ agent, calls }) => ({ agent, messages: chain(calls) }));
  }

  private owner(call: ModelCall): { agent: string; invocation: string } {
    const explicit = call.metadata.codehop_agent;
    if (typeof explicit === "string" && explicit)
      return { agent: explicit, invocation: `explicit:${explicit}` };
    let id = call.parentRunId;
    for (let guard = 0; id && guard < 1000; guard++) {
      const chain = this.chains.get(id);
      if (!chain) break;
      if (chain.name && this.knownAgents.has(chain.name))
        return { agent: chain.name, invocation: id };
      id = chain.parentRunId;
    }
    return { agent: this.fallbackAgent, invocation: `fallback:${this.fallbackAgent}` };
  }
}

/** The conversation of one invocation's calls (see {@link EvalRecorder.transcripts}). */
function chain(calls: ModelCall[]): TranscriptMessage[] {
  const system = (c: ModelCall) =>
    c.messages[0]?.role === "system" ? c.messages[0].content : undefined;
  const main = calls.filter((c) => system(c) === system(calls[0]));
  const messages: TranscriptMessage[] = [...main[0].messages];
  main.forEach((call, i) => {
    messages.push({ role: "assistant", content: call.reply! });
    const next = main[i + 1];
    if (next) messages.push(...newUserMessages(call.messages, next.messages));
  });
  return messages;
}

/**
 * What the next call of an invocation received that the previous one had not: its new user
 * messages (the observation), whatever the history layout — counted as a multiset, so an
 * observation that repeats an earlier one word for word still counts once more. The condensed
 * view's note recalling the last action is left out: the transcript has the action itself.
 */
function newUserMessages(
  before: readonly TranscriptMessage[],
  after: readonly TranscriptMessage[],
): TranscriptMessage[] {
  const seen = new Map<string, number>();
  for (const m of before)
    if (m.role === "user") seen.set(m.content, (seen.get(m.content) ?? 0) + 1);
  const out: TranscriptMessage[] = [];
  for (const m of after) {
    if (m.role !== "user" || LAST_ACTION_NOTE.test(m.content)) continue;
    const left = seen.get(m.content) ?? 0;
    if (left > 0) seen.set(m.content, left - 1);
    else out.push(m);
  }
  return out;
}

function toTranscriptMessage(m: BaseMessage): TranscriptMessage {
  const type = m.getType();
  const role = type === "system" ? "system" : type === "ai" ? "assistant" : "user";
  return { role, content: contentText(m.content) };
}
