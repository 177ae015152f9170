import { AIMessage, HumanMessage, SystemMessage, type BaseMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import { EvalRecorder } from "../../src/eval/recorder.ts";

// Drives the callback handler the way LangChain does (start → end per model call).
let n = 0;
async function call(
  rec: EvalRecorder,
  messages: BaseMessage[],
  reply: string,
  meta: Record<string, unknown>,
  parent?: string,
) {
  const id = `run-${n++}`;
  await rec.handleChatModelStart({} as any, [messages], id, parent, undefined, undefined, meta);
  const message = new AIMessage({
    content: reply,
    usage_metadata: {
      input_tokens: 10,
      output_tokens: 2,
      total_tokens: 12,
      input_token_details: { cache_read: 4 },
    },
  });
  await rec.handleLLMEnd({ generations: [[{ text: reply, message } as any]] }, id);
}

describe("EvalRecorder", () => {
  it("rebuilds a condensed code-agent conversation with every turn verbatim, leaving out planning calls", async () => {
    const rec = new EvalRecorder("fallback");
    const meta = { codehop_agent: "manager" };
    const S = new SystemMessage("You are the manager agent");
    const T = new HumanMessage("Task: Q");
    await call(rec, [S, T], "step 1", meta);
    await call(rec, [new SystemMessage("Make a plan"), T], "a plan", meta);
    await call(
      rec,
      [S, T, new AIMessage("step 1"), new HumanMessage("Observation: o1")],
      "step 2",
      meta,
    );
    // the agent condensed step 1 away, kept its observation
    await call(
      rec,
      [
        S,
        T,
        new HumanMessage("Observation: o1"),
        new AIMessage("step 2"),
        new HumanMessage("Observation: o2"),
      ],
      "final",
      meta,
    );
    const [t] = rec.transcripts();
    expect(t.agent).toBe("manager");
    expect(t.messages).toEqual([
      { role: "system", content: "You are the manager agent" },
      { role: "user", content: "Task: Q" },
      { role: "assistant", content: "step 1" },
      { role: "user", content: "Observation: o1" },
      { role: "assistant", content: "step 2" },
      { role: "user", content: "Observation: o2" },
      { role: "assistant", content: "final" },
    ]);
    expect(rec.usage).toEqual({
      manager: { calls: 4, inputTokens: 40, outputTokens: 8, cachedTokens: 16 },
    });
  });

  it("attributes calls to the nearest enclosing agent run and tells invocations apart", async () => {
    const rec = new EvalRecorder("fallback", ["manager", "wiki"]);
    await rec.handleChainStart({} as any, {}, "g-manager", undefined, [], {}, undefined, "manager");
    await rec.handleChainStart({} as any, {}, "n-act", "g-manager", [], {}, undefined, "act");
    await rec.handleChainStart({} as any, {}, "g-wiki-1", "n-act", [], {}, undefined, "wiki");
    await rec.handleChainStart({} as any, {}, "g-wiki-2", "n-act", [], {}, undefined, "wiki");
    await rec.handleChainStart({} as any, {}, "n-plan-1", "g-wiki-1", [], {}, undefined, "plan");
    await call(rec, [new SystemMessage("W"), new HumanMessage("t1")], "a1", {}, "n-plan-1");
    await call(rec, [new SystemMessage("W"), new HumanMessage("t2")], "a2", {}, "g-wiki-2");
    await call(rec, [new SystemMessage("M"), new HumanMessage("q")], "m", {}, "g-manager");
    await call(rec, [new HumanMessage("orphan")], "x", {}, "unknown-run");
    expect(rec.transcripts().map((t) => [t.agent, t.messages[1].content])).toEqual([
      ["wiki", "t1"],
      ["wiki", "t2"],
      ["manager", "q"],
      ["fallback", "x"],
    ]);
    expect(Object.fromEntries(Object.entries(rec.usage).map(([a, u]) => [a, u.calls]))).toEqual({
      wiki: 2,
      manager: 1,
      fallback: 1,
    });
  });

  it("counts a failed call without a transcript", async () => {
    const rec = new EvalRecorder("direct");
    await rec.handleChatModelStart(
      {} as any,
      [[new HumanMessage("q")]],
      "f1",
      undefined,
      undefined,
      undefined,
      {},
    );
    await rec.handleLLMError(new Error("500"), "f1");
    expect(rec.usage).toEqual({
      direct: { calls: 1, inputTokens: 0, outputTokens: 0, cachedTokens: 0 },
    });
    expect(rec.transcripts()).toEqual([]);
  });
});
