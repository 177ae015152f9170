import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ScriptedChatModel } from "../../src/testing/scripted-chat-model.ts";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import { createCodeAgent } from "../../src/framework/code-agent.ts";
import { code_agent as graph } from "../../src/graphs/entries.ts";
import { defineTool } from "../../src/tools/define-tool.ts";

const model = new ScriptedChatModel(["Thought: t\nCode:\n```js\nfinal_answer(1)\n```"]);
const tool = (name: string) =>
  defineTool({
    name,
    description: "d",
    parameters: z.object({ q: z.string() }),
    returns: "string",
    invoke: async () => "",
  });

describe("createCodeAgent", () => {
  it("exports a compiled generic graph for langgraph.json", () => {
    expect(graph.name).toBe("code_agent");
    expect(typeof graph.invoke).toBe("function");
  });

  it("returns builder, compiled graph, defaults and recursion limit", () => {
    const agent = createCodeAgent({ name: "solo", description: "d", model });
    expect(agent.settings).toMatchObject({
      maxSteps: 10,
      maxStepsPolicy: "last_observation",
      historyPolicy: "condensed",
      stopSequences: ["<end_action>", "Observation:"],
    });
    expect(agent.recursionLimit).toBeGreaterThan(agent.settings.maxSteps * 3);
    expect(typeof agent.builder.compile).toBe("function");
    expect(agent.graph.name).toBe("solo");
  });

  it.each([
    [{ name: "bad name!", description: "d" }, /Agent name/],
    [{ name: "a", description: "d", maxSteps: 0 }, /maxSteps/],
    [{ name: "a", description: "d", historyPolicy: "everything" }, /historyPolicy/],
    [{ name: "a", description: "d", tools: [tool("x"), tool("x")] }, /two tools are named "x"/],
    [{ name: "a", description: "d", tools: [tool("final_answer")] }, /reserved/],
  ])("rejects bad options with CONFIG_INVALID (%#)", (options, message) => {
    try {
      createCodeAgent(options as any);
      expect.unreachable();
    } catch (err) {
      expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.CONFIG_INVALID);
      expect((err as Error).message).toMatch(message);
    }
  });

  it("checks prompt templates at build time (PROMPT_TEMPLATE) and accepts valid overrides", () => {
    const err = (() => {
      try {
        createCodeAgent({
          name: "p",
          description: "d",
          model,
          prompts: { system: "You are {{agent_name}}. Tools: {{tool_docz}}" },
        });
      } catch (e) {
        return e;
      }
    })();
    expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.PROMPT_TEMPLATE);
    expect((err as Error).message).toMatch(/tool_docz/);
    const ok = createCodeAgent({
      name: "p",
      description: "d",
      model,
      prompts: { task: "Question: {{task}}" },
    });
    expect(ok.prompts.task).toBe("Question: {{task}}");
    expect(ok.prompts.system).toContain("{{tool_docs}}");
  });

  it("draws a two-level agent with both agents' plan / act / observe nodes (xray)", async () => {
    const child = createCodeAgent({
      name: "child",
      description: "c",
      model,
      tools: [tool("lookup")],
    });
    const parent = createCodeAgent({
      name: "parent",
      description: "p",
      model,
      tools: [
        child.asTool({
          name: "child_agent",
          description: "c",
          parameters: z.object({ task: z.string() }),
          toInput: (a) => a,
        }),
      ],
    });
    const mermaid = (await parent.graph.getGraphAsync({ xray: true })).drawMermaid();
    for (const node of [
      "plan(plan)",
      "observe(observe)",
      "act_plan(plan)",
      "act_act(act)",
      "act_observe(observe)",
    ]) {
      expect(mermaid).toContain(node);
    }
    expect(mermaid).toContain("subgraph act");
  });

  it("takes nested graphs from the subgraphs option when tools is a factory", async () => {
    const child = createCodeAgent({ name: "child", description: "c", model });
    const asTool = child.asTool({
      name: "child_agent",
      description: "c",
      parameters: z.object({ task: z.string() }),
      toInput: (a) => a,
    });
    const parent = createCodeAgent({
      name: "parent",
      description: "p",
      model,
      tools: () => [asTool],
      subgraphs: [child.graph],
    });
    expect((await parent.graph.getGraphAsync({ xray: true })).drawMermaid()).toContain(
      "act_observe(observe)",
    );
  });
});
