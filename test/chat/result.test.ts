import { AIMessage, HumanMessage } from "@langchain/core/messages";
import type { StateSnapshot } from "@langchain/langgraph";
import { describe, expect, it } from "vitest";
import { chatResultFields } from "../../src/apps/chat/app.ts";

/** A state snapshot as LangGraph returns it, with the parts chatResultFields reads. */
function snapshot(values: Record<string, unknown>, next: string[] = [], tasks: unknown[] = []) {
  return {
    values,
    next,
    tasks,
    config: {},
    metadata: {},
    createdAt: "",
    parentConfig: undefined,
  } as unknown as StateSnapshot;
}

describe("a round's result", () => {
  const cited = new AIMessage({
    content: "503 m [r.pdf, p. 1].",
    additional_kwargs: {
      citations: [{ file: "r.pdf", section: "p. 1", page: 1, cite: "r.pdf, p. 1" }],
    },
  });

  it("is the last reply, its citations and the rounds answered", () => {
    const out = chatResultFields(
      snapshot({
        messages: [new HumanMessage("a"), new AIMessage("b"), new HumanMessage("c"), cited],
        attachments: [],
      }),
    );
    expect(out).toMatchObject({
      answer: "503 m [r.pdf, p. 1].",
      reply: "503 m [r.pdf, p. 1].",
      status: "done",
      round: 2,
      steps: 2,
      citations: [{ cite: "r.pdf, p. 1" }],
      sources: [{ title: "r.pdf", cite: "r.pdf, p. 1" }],
      interrupts: [],
    });
  });

  it("a stopped round is interrupted; a round paused for a decision is waiting, with the interrupt", () => {
    const stopped = chatResultFields(snapshot({ messages: [new HumanMessage("a")] }, ["respond"]));
    expect(stopped).toMatchObject({ status: "interrupted", reply: "", round: 0 });
    const waiting = chatResultFields(
      snapshot(
        { messages: [new HumanMessage("a")] },
        ["respond"],
        [
          {
            id: "t",
            name: "respond",
            interrupts: [{ id: "i1", value: { tool: "send_mail", args: { to: "bob" } } }],
          },
        ],
      ),
    );
    expect(waiting.status).toBe("waiting");
    expect(waiting.interrupts).toEqual([
      { id: "i1", value: { tool: "send_mail", args: { to: "bob" } } },
    ]);
  });
});
