import type { BaseMessage } from "@langchain/core/messages";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { closeDefaultSandbox } from "../../src/core/default-sandbox.ts";
import { ScriptedChatModel } from "../../src/testing/scripted-chat-model.ts";
import { createCodeAgent } from "../../src/framework/code-agent.ts";
import { createSandbox } from "../../src/sandbox/index.ts";
import { defineTool } from "../../src/tools/define-tool.ts";
import { foldVariables } from "../../src/core/variables.ts";

// Whole agents on the real sandbox (SES in child processes) with an in-process scripted model.
const sandbox = createSandbox({ limits: { timeoutMs: 1500 } });
afterAll(async () => {
  await sandbox.close();
  await closeDefaultSandbox();
});

const text = (m: BaseMessage) => String(m.content);
const system = (msgs: BaseMessage[]) => text(msgs[0]);
const action = (code: string, thought = "next") =>
  `Thought: ${thought}\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;

const lookup = defineTool({
  name: "lookup",
  description: "Returns a fact.",
  parameters: z.object({ key: z.string() }),
  returns: "string",
  invoke: async ({ key }) => {
    if (key === "boom") throw new Error("lookup service unavailable");
    return `fact:${key}`;
  },
});

describe("a single agent on the real sandbox", () => {
  it("keeps variables between steps and finishes with a computed answer", async () => {
    const agent = createCodeAgent({
      name: "calc",
      description: "computes",
      sandbox,
      tools: [lookup],
      model: new ScriptedChatModel([
        action(
          'const facts = await Promise.all([lookup("a"), lookup("b")]);\nfunction size(xs) { return xs.join("").length; }\nconsole.log(facts);',
        ),
        action("final_answer(size(facts) * 2)"),
      ]),
    });
    const out = await agent.invoke({ task: "compute" });
    expect(out.status).toBe("final_answer");
    expect(out.answer).toBe(24);
    expect(foldVariables(out.variables)?.values.facts).toEqual(["fact:a", "fact:b"]);
    expect(out.steps[0].toolCalls.map((c) => [c.tool, c.args, c.ok])).toEqual([
      ["lookup", { key: "a" }, true],
      ["lookup", { key: "b" }, true],
    ]);
    expect(out.usage.calc.calls).toBe(2);
  });

  it("uses the process-wide default sandbox when none is given", async () => {
    const agent = createCodeAgent({
      name: "defaults",
      description: "d",
      model: new ScriptedChatModel([action("const xs = [3, 4];\nfinal_answer(Math.hypot(...xs))")]),
    });
    expect((await agent.invoke({ task: "hypot" })).answer).toBe(5);
  });

  it("turns syntax, runtime, unknown-tool, tool and timeout errors into observations and recovers", async () => {
    const model = new ScriptedChatModel([
      action("const x = ;"),
      action("null.prop"),
      action('await search_web("x")'),
      action('await lookup("boom")'),
      action("while (true) {}"),
      "I think I am done.",
      action("final_answer('recovered')"),
    ]);
    const agent = createCodeAgent({
      name: "errs",
      description: "d",
      sandbox,
      tools: [lookup],
      model,
      maxSteps: 10,
    });
    const out = await agent.invoke({ task: "survive errors" });
    expect(out.answer).toBe("recovered");
    const obs = out.steps.map((s) => s.observation);
    expect(obs[0]).toMatch(/SyntaxError/);
    expect(obs[1]).toMatch(/TypeError/);
    expect(obs[2]).toMatch(/The tools that exist are: lookup, final_answer/);
    expect(obs[3]).toMatch(/lookup service unavailable/);
    expect(obs[4]).toMatch(/TimeoutError[\s\S]*do less per step/);
    expect(obs[5]).toMatch(/No code found/);
    // Resolved errors are dropped from the condensed prompt: the last call saw only the latest one.
    const lastPrompt = model.calls.at(-1)!.messages.map(text).join("\n");
    expect(lastPrompt).toContain("No code found");
    expect(lastPrompt).not.toContain("SyntaxError");
    expect(lastPrompt).not.toContain("TimeoutError");
  });

  it("runs more steps than LangGraph's default recursion limit allows through plain graph.invoke", async () => {
    const agent = createCodeAgent({
      name: "long",
      description: "d",
      sandbox,
      maxSteps: 12,
      model: new ScriptedChatModel([
        (m) =>
          // 11 observations seen (repeats force planning steps in between)
          m.filter((x) => text(x).startsWith("Observation:")).length >= 11
            ? action("final_answer('done')")
            : action("console.log(1)"),
      ]),
    });
    const out = await agent.graph.invoke({ task: "take twelve steps" });
    expect(out).toMatchObject({ answer: "done", stepCount: 12 });
  });

  it("returns the last observation when it hits maxSteps under last_observation", async () => {
    const agent = createCodeAgent({
      name: "reader",
      description: "d",
      sandbox,
      tools: [lookup],
      maxSteps: 2,
      model: new ScriptedChatModel([
        action('console.log(await lookup("x"))'),
        action('console.log(await lookup("y"))'),
      ]),
    });
    const out = await agent.invoke({ task: "read" });
    expect(out).toMatchObject({ status: "max_steps", answer: "fact:y", stepCount: 2 });
  });

  it("asks once for a final answer at maxSteps under final_answer_prompt", async () => {
    const model = new ScriptedChatModel([
      (m) =>
        system(m).includes("no steps left")
          ? "Final answer: fact:x it is"
          : action('console.log(await lookup("x"))'),
    ]);
    const agent = createCodeAgent({
      name: "fa",
      description: "d",
      sandbox,
      tools: [lookup],
      maxSteps: 2,
      maxStepsPolicy: "final_answer_prompt",
      model,
    });
    const out = await agent.invoke({ task: "answer" });
    expect(out).toMatchObject({ status: "max_steps", answer: "fact:x it is" });
    expect(model.calls).toHaveLength(3);
    expect(out.usage.fa.calls).toBe(3);
  });

  describe("a final-answer reply that still holds code runs it with the saved variables and tools", () => {
    const finish = async (reply: string, tools = [lookup]) => {
      const model = new ScriptedChatModel([
        (m) =>
          system(m).includes("no steps left")
            ? reply
            : action('const y = 41; const answer = "Oslo"; console.log("same")'),
      ]);
      const agent = createCodeAgent({
        name: "forced",
        description: "d",
        sandbox,
        tools,
        maxSteps: 1,
        maxStepsPolicy: "final_answer_prompt",
        model,
      });
      return agent.invoke({ task: "answer" });
    };

    it.each([
      [
        "a template literal over a saved variable",
        "```js\nfinal_answer(`${y} years`)\n```",
        "41 years",
      ],
      [
        "a saved variable",
        "Thought: done\nCode:\n```js\nfinal_answer(answer)\n```<end_action>",
        "Oslo",
      ],
      [
        "printed output when final_answer is not called",
        'Thought: look.\nCode:\n```js\nconsole.log("same")\n```<end_action>',
        "same",
      ],
      ["a computed number", "```js\nfinal_answer(y + 1)\n```", 42],
      ["plain text in an unlabeled fence", "```\nRome\n```", "Rome"],
      ["text after Final answer: (no code)", "Thought: I checked.\nFinal answer: Oslo", "Oslo"],
    ])("%s", async (_name, reply, answer) => {
      const out = await finish(reply);
      expect(out).toMatchObject({ status: "max_steps", answer });
      expect(out.steps.at(-1)).toMatchObject({ kind: "final_answer", finalAnswer: answer });
    });

    it("calls the agent's tools and records the calls", async () => {
      const out = await finish('```js\nfinal_answer(await lookup("z") + " / " + y)\n```');
      expect(out.answer).toBe("fact:z / 41");
      expect(out.steps.at(-1)!.toolCalls.map((c) => [c.tool, c.args, c.ok])).toEqual([
        ["lookup", { key: "z" }, true],
      ]);
    });
  });

  it("detects a repeated action: nudges at k, replans at 2k", async () => {
    const model = new ScriptedChatModel([
      (m) =>
        system(m).includes("Facts survey")
          ? "## Facts survey\n...\n## Plan\n1. try something else"
          : action('console.log(await lookup("same"))'),
    ]);
    const agent = createCodeAgent({
      name: "loop",
      description: "d",
      sandbox,
      tools: [lookup],
      model,
      maxSteps: 5,
      repeatThreshold: 2,
    });
    const out = await agent.invoke({ task: "loop forever" });
    expect(out.steps.map((s) => s.kind)).toEqual([
      "action",
      "action",
      "action",
      "action",
      "planning",
      "action",
    ]);
    expect(out.steps[0].observation).not.toMatch(/same result/);
    expect(out.steps[1].observation).toMatch(/same result 2 times/);
    expect(out.status).toBe("max_steps");
  });

  it("stops a repeating agent under repeatPolicy stop", async () => {
    const agent = createCodeAgent({
      name: "stopper",
      description: "d",
      sandbox,
      tools: [lookup],
      model: new ScriptedChatModel([action('console.log(await lookup("same"))')]),
      maxSteps: 10,
      repeatThreshold: 1,
      repeatPolicy: "stop",
    });
    const out = await agent.invoke({ task: "loop" });
    expect(out).toMatchObject({ status: "repeated_action", stepCount: 2, answer: "fact:same" });
  });

  it("fires planning on schedule, without showing the previous plan, and shows the plan to the next action", async () => {
    let plans = 0;
    const model = new ScriptedChatModel([
      (m) => {
        if (system(m).includes("Facts survey"))
          return `## Facts survey\n- none\n## Plan\nPLAN-${++plans}<end_plan>`;
        const observations = m.filter((x) => text(x).startsWith("Observation:")).length;
        return observations >= 4
          ? action("final_answer('done')")
          : action(`console.log(${observations})`);
      },
    ]);
    const agent = createCodeAgent({
      name: "planner",
      description: "d",
      sandbox,
      model,
      planningInterval: 2,
      maxSteps: 8,
      historyPolicy: "full",
    });
    const out = await agent.invoke({ task: "plan it" });
    expect(out.steps.map((s) => s.kind)).toEqual([
      "planning",
      "action",
      "action",
      "planning",
      "action",
      "action",
      "planning",
      "action",
    ]);
    const planningCalls = model.calls.filter((c) => system(c.messages).includes("Facts survey"));
    expect(planningCalls).toHaveLength(3);
    for (const c of planningCalls) expect(c.messages.map(text).join("\n")).not.toMatch(/PLAN-/);
    const actionAfterPlan2 = model.calls[model.calls.indexOf(planningCalls[1]) + 1];
    expect(actionAfterPlan2.messages.map(text).join("\n")).toContain("PLAN-2");
    // The latest plan is the last planning step of the record.
    expect(out.steps.filter((st) => st.kind === "planning").at(-1)?.thought).toContain("PLAN-3");
  });

  it("keeps roles alternating after planning steps: no two assistant turns meet, the user speaks last", async () => {
    const model = new ScriptedChatModel([
      (m) => {
        if (system(m).includes("Facts survey")) return "## Plan\n1. count<end_plan>";
        const observations = m.filter((x) => text(x).startsWith("Observation:")).length;
        return action(`console.log(${observations})`);
      },
    ]);
    const agent = createCodeAgent({
      name: "alternating",
      description: "d",
      sandbox,
      model,
      planningInterval: 2,
      maxSteps: 5,
      maxStepsPolicy: "final_answer_prompt",
    });
    const out = await agent.invoke({ task: "count" });
    expect(out.steps.filter((s) => s.kind === "planning")).toHaveLength(3);
    const actionCalls = model.calls.filter((c) => !system(c.messages).includes("Facts survey"));
    expect(actionCalls.length).toBeGreaterThanOrEqual(6); // 5 actions + the final-answer prompt
    for (const { messages } of actionCalls) {
      const roles = messages.map((m) => m.getType());
      expect(roles.at(-1)).toBe("human");
      expect(roles.join(",")).not.toMatch(/ai,ai/);
    }
    // The action right after the second plan: ..., the last observation, the note recalling the
    // last action's code, the plan, the follow-up.
    const afterPlan = actionCalls[2].messages;
    expect(afterPlan.slice(-4).map((m) => m.getType())).toEqual(["human", "human", "ai", "human"]);
    expect(text(afterPlan.at(-4)!)).toMatch(/^Observation:/);
    expect(text(afterPlan.at(-3)!)).toMatch(
      /^Your last code \(step 2\) gave the observation above/,
    );
    expect(text(afterPlan.at(-2)!)).toContain("1. count");
  });

  it("reports a sub-agent that fails (not a framework error) to the parent as an observation", async () => {
    const child = createCodeAgent({
      name: "fragile",
      description: "d",
      sandbox,
      tools: ({ context }) => {
        if (!context.page) throw new Error("no page given");
        return [];
      },
      model: new ScriptedChatModel([action("final_answer(1)")]),
    });
    const parent = createCodeAgent({
      name: "boss",
      description: "d",
      sandbox,
      tools: [
        child.asTool({
          name: "fragile_agent",
          description: "d",
          parameters: z.object({ task: z.string() }),
          toInput: ({ task }) => ({ task }),
          wrapTask: false,
        }),
      ],
      model: new ScriptedChatModel([
        action('console.log(await fragile_agent("x"))'),
        action("final_answer('gave up')"),
      ]),
    });
    const out = await parent.invoke({ task: "delegate" });
    expect(out.answer).toBe("gave up");
    expect(out.steps[0].observation).toMatch(/fragile_agent failed: no page given/);
    expect(out.steps[0].toolCalls[0]).toMatchObject({ tool: "fragile_agent", ok: false });
  });

  it("reports a tool result that cannot cross the boundary as a tool error", async () => {
    const bad = defineTool({
      name: "bad",
      description: "d",
      parameters: z.object({}),
      returns: "number",
      invoke: async () => 10n,
    });
    const agent = createCodeAgent({
      name: "badtool",
      description: "d",
      sandbox,
      tools: [bad],
      maxSteps: 1,
      model: new ScriptedChatModel([action("console.log(await bad())")]),
    });
    const out = await agent.invoke({ task: "x" });
    expect(out.steps[0].observation).toMatch(
      /bad\(\) returned a value that is not JSON-serializable/,
    );
  });

  it("accepts a custom history policy (here: observations only, the last 1)", async () => {
    const model = new ScriptedChatModel([
      action("console.log('a')"),
      action("console.log('b')"),
      action("final_answer('done')"),
    ]);
    const agent = createCodeAgent({
      name: "custom",
      description: "d",
      sandbox,
      model,
      maxSteps: 5,
      historyPolicy: (entries) => entries.filter((e) => e.kind === "observation").slice(-1),
    });
    const out = await agent.invoke({ task: "t" });
    expect(out.status).toBe("final_answer");
    // The custom view kept one entry: the prompt is system, task and that one observation.
    expect(model.calls.at(-1)!.messages).toHaveLength(3);
    expect(model.calls[1].messages.map((m) => m.getType())).toEqual(["system", "human", "human"]);
  });

  it("gives actions that call sub-agents a longer deadline than the sandbox default", async () => {
    // The test sandbox kills actions after 1500 ms; this sub-agent takes ~1700 ms.
    const slowChild = createCodeAgent({
      name: "slow_child",
      description: "d",
      sandbox,
      model: new ScriptedChatModel([action("final_answer('late but fine')")], 1700),
    });
    const parent = createCodeAgent({
      name: "waiting_parent",
      description: "d",
      sandbox,
      tools: [
        slowChild.asTool({
          name: "slow_agent",
          description: "d",
          parameters: z.object({ task: z.string() }),
          toInput: (a) => a,
        }),
      ],
      model: new ScriptedChatModel([action('final_answer(await slow_agent("x"))')]),
    });
    expect((await parent.invoke({ task: "wait" })).answer).toBe("late but fine");

    const sleepy = defineTool({
      name: "sleepy",
      description: "d",
      parameters: z.object({}),
      returns: "string",
      invoke: () => new Promise((r) => setTimeout(() => r("woke"), 400)),
    });
    const strict = createCodeAgent({
      name: "strict",
      description: "d",
      sandbox,
      tools: [sleepy],
      maxSteps: 1,
      actionTimeoutMs: 150,
      model: new ScriptedChatModel([action("console.log(await sleepy())")]),
    });
    expect((await strict.invoke({ task: "sleep" })).steps[0].observation).toMatch(/TimeoutError/);
  });

  it("still counts the tokens of a sub-agent that fails after spending some", async () => {
    let factoryCalls = 0;
    const child = createCodeAgent({
      name: "spender",
      description: "d",
      sandbox,
      // plan and act of step 1 build the tools (observe only names them for an unknown name);
      // plan of step 2 fails.
      tools: () => {
        if (++factoryCalls > 2) throw new Error("tool backend went away");
        return [];
      },
      model: new ScriptedChatModel([action("console.log(1)")]),
    });
    const parent = createCodeAgent({
      name: "payer",
      description: "d",
      sandbox,
      tools: [
        child.asTool({
          name: "spender_agent",
          description: "d",
          parameters: z.object({ task: z.string() }),
          toInput: (a) => a,
        }),
      ],
      model: new ScriptedChatModel([
        action('console.log(await spender_agent("x"))'),
        action("final_answer('ok')"),
      ]),
    });
    const out = await parent.invoke({ task: "spend" });
    expect(out.steps[0].observation).toMatch(/spender_agent failed: tool backend went away/);
    expect(out.usage.spender.calls).toBe(1);
    expect(out.usage.spender.inputTokens).toBeGreaterThan(0);
    expect(out.usage.payer.calls).toBe(2);
  });

  it("binds tools to the run's context with a tools factory", async () => {
    const agent = createCodeAgent({
      name: "bound",
      description: "d",
      sandbox,
      tools: ({ context }) => [
        defineTool({
          name: "read_page",
          description: "Reads the page this run is about.",
          parameters: z.object({}),
          returns: "string",
          invoke: async (_args, ctx) => {
            ctx.report?.({ sources: [{ title: String(context.page) }] });
            return `text of ${context.page}`;
          },
        }),
      ],
      model: new ScriptedChatModel([action("final_answer(await read_page())")]),
    });
    const out = await agent.invoke({ task: "read it", context: { page: "Rome" } });
    expect(out.answer).toBe("text of Rome");
    expect(out.sources).toEqual([{ title: "Rome" }]);
  });
});
