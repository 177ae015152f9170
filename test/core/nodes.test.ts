import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  resolveSettings,
  DEFAULT_CAPABILITIES,
  type AgentSettingsInput,
} from "../../src/core/settings.ts";
import { historyEntries } from "../../src/core/history.ts";
import { loadPromptSet } from "../../src/core/prompts.ts";
import { makeRuntime } from "../../src/core/runtime.ts";
import { ScriptedChatModel } from "../../src/testing/scripted-chat-model.ts";
import type { AgentState, StepRecord } from "../../src/core/state.ts";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import { makeActNode } from "../../src/nodes/act.ts";
import { cleanFinalAnswer, makeFinalAnswerNode } from "../../src/nodes/final-answer.ts";
import { actionFingerprint, makeObserveNode } from "../../src/nodes/observe.ts";
import { makePlanNode } from "../../src/nodes/plan.ts";
import { makePlanningNode } from "../../src/nodes/planning.ts";
import { defineTool } from "../../src/tools/define-tool.ts";

const lookup = defineTool({
  name: "lookup",
  description: "Looks a fact up.",
  parameters: z.object({ query: z.string().describe("what to look up") }),
  returns: "string",
  invoke: async ({ query }) => `fact about ${query}`,
});

function runtime(model: ScriptedChatModel, settings: AgentSettingsInput = {}) {
  return makeRuntime({
    name: "tester",
    description: "tests nodes",
    settings: resolveSettings("tester", settings),
    prompts: loadPromptSet(),
    capabilities: DEFAULT_CAPABILITIES,
    tools: [lookup],
    model,
    sandbox: {
      run: async () => {
        throw new Error("these node tests run no code");
      },
      close: async () => {},
    },
  });
}

function state(overrides: Partial<AgentState> = {}): AgentState {
  return {
    task: "What is 2+2?",
    context: {},
    agent: "tester",
    steps: [],
    pending: null,
    outcome: null,
    stepCount: 0,
    variables: [],
    answer: null,
    status: "running",
    usage: {},
    sources: [],
    repeat: { fingerprint: "", count: 0 },
    replan: false,
    taskEpoch: 0,
    ...overrides,
  };
}

const text = (m: { content: unknown }) => String(m.content);

/** A recorded action (the trajectory the prompt view is computed from). */
function actionStep(
  step: number,
  modelOutput: string,
  observation: string,
  o: Partial<StepRecord> = {},
): StepRecord {
  return {
    step,
    kind: "action",
    modelOutput,
    thought: "",
    code: "console.log(1)",
    observation,
    error: null,
    toolCalls: [],
    isFinalAnswer: false,
    durationMs: 1,
    ...o,
  };
}

/** A recorded planning step. */
function planningStep(step: number, plan: string): StepRecord {
  return { ...actionStep(step, plan, ""), kind: "planning", thought: plan, code: null };
}

describe("plan node (the action writer)", () => {
  it("sends system + task + the view computed from the record, with the stop sequences, and parses the reply", async () => {
    const model = new ScriptedChatModel([
      "Thought: add\nCode:\n```js\nfinal_answer(2 + 2)\n```<end_action>\nObservation: made up",
    ]);
    const plan = makePlanNode(runtime(model));
    const update = await plan(
      state({
        stepCount: 1,
        // The server cut the reply at the stop sequence: the view closes it with <end_action>.
        steps: [
          actionStep(1, "Thought: look\nCode:\n```js\nconsole.log(1)\n```", "Execution logs:\n1"),
        ],
      }),
      {},
    );
    const call = model.calls[0];
    expect(call.stop).toEqual(["<end_action>", "Observation:"]);
    // Condensed (default): the observation, then a note with the last action's code.
    expect(call.messages.map((m) => m.getType())).toEqual(["system", "human", "human", "human"]);
    expect(text(call.messages[0])).toContain(
      "async function lookup(query: string): Promise<string>",
    );
    expect(text(call.messages[1])).toBe("Task: What is 2+2?\n");
    expect(text(call.messages[2])).toBe("Observation:\nExecution logs:\n1");
    expect(text(call.messages[3])).toBe(
      "Your last code (step 1) gave the observation above:\n```js\nconsole.log(1)\n```",
    );
    // Full history shows the action itself, as the model's turn closed with <end_action>.
    const fullModel = new ScriptedChatModel(["Thought: add\nCode:\n```js\nfinal_answer(4)\n```"]);
    await makePlanNode(runtime(fullModel, { historyPolicy: "full" }))(
      state({
        stepCount: 1,
        steps: [
          actionStep(1, "Thought: look\nCode:\n```js\nconsole.log(1)\n```", "Execution logs:\n1"),
        ],
      }),
      {},
    );
    const full = fullModel.calls[0].messages;
    expect(full.map((m) => m.getType())).toEqual(["system", "human", "ai", "human"]);
    expect(text(full[2])).toBe("Thought: look\nCode:\n```js\nconsole.log(1)\n```<end_action>");
    expect(text(full[3])).toBe("Observation:\nExecution logs:\n1");
    expect(update.pending).toMatchObject({
      step: 2,
      thought: "add",
      code: "final_answer(2 + 2)",
      // Cut at the stop sequence (the scripted model honours it, as servers do).
      modelOutput: "Thought: add\nCode:\n```js\nfinal_answer(2 + 2)\n```",
    });
    expect((update.usage as any).tester.calls).toBe(1);
    expect((update.usage as any).tester.inputTokens).toBeGreaterThan(0);
  });

  it("turns a reply without code into a pending format error, not a crash", async () => {
    const update: any = await makePlanNode(runtime(new ScriptedChatModel(["The answer is 4."])))(
      state(),
      {},
    );
    expect(update.pending?.code).toBeNull();
    expect(update.pending?.parseError).toMatch(/No code found/);
  });
});

describe("planning node", () => {
  it("surveys facts and plans from the observations without showing the previous plan", async () => {
    const model = new ScriptedChatModel([
      "## Facts survey\n...\n## Plan\n1. compute<end_plan>ignored",
    ]);
    const update = await makePlanningNode(runtime(model))(
      state({
        stepCount: 2,
        steps: [
          planningStep(1, "OLD PLAN"),
          actionStep(1, "FIRST ACTION", "first"),
          actionStep(2, "LAST ACTION", "second"),
        ],
      }),
      {},
    );
    const call = model.calls[0];
    expect(call.stop).toEqual(["<end_plan>"]);
    const all = call.messages.map(text).join("\n");
    expect(all).toContain("Facts survey");
    expect(all).not.toContain("OLD PLAN");
    expect(all).toContain("first");
    expect(all).toContain("second");
    expect(all).not.toContain("LAST ACTION");
    expect(update.steps).toMatchObject({
      kind: "planning",
      step: 3,
      thought: "## Facts survey\n...\n## Plan\n1. compute",
    });
    expect(update.replan).toBe(false);
  });
});

describe("observe node", () => {
  const pending = (code: string | null, step = 1) => ({
    step,
    modelOutput: "m",
    thought: "t",
    code,
    usage: { calls: 1, inputTokens: 1, outputTokens: 1, cachedInputTokens: 0 },
  });
  const outcome = (o: Record<string, unknown> = {}, step = 1) => ({
    step,
    ok: true,
    logs: "same",
    isFinalAnswer: false,
    finalAnswer: null,
    error: null,
    toolCalls: [],
    durationMs: 3,
    ...o,
  });
  const observe = (settings: AgentSettingsInput = {}) =>
    makeObserveNode(runtime(new ScriptedChatModel(["x"]), settings));

  it("detects a final answer", async () => {
    const u = await observe()(
      state({
        pending: pending("final_answer(4)"),
        outcome: outcome({ isFinalAnswer: true, finalAnswer: 4, logs: "" }),
      }),
      {},
    );
    expect(u).toMatchObject({ status: "final_answer", answer: 4, stepCount: 1 });
    expect(u.steps).toMatchObject({
      step: 1,
      code: "final_answer(4)",
      isFinalAnswer: true,
      finalAnswer: 4,
    });
  });

  it("returns the last observation at max steps under last_observation", async () => {
    const u = await observe({ maxSteps: 2 })(
      state({
        stepCount: 1,
        pending: pending("console.log(1)", 2),
        outcome: outcome({ logs: "passage text" }, 2),
      }),
      {},
    );
    expect(u).toMatchObject({ status: "max_steps", answer: "passage text" });
  });

  it("leaves the answer to the final-answer prompt under final_answer_prompt", async () => {
    const u = await observe({ maxSteps: 1, maxStepsPolicy: "final_answer_prompt" })(
      state({ pending: pending("console.log(1)"), outcome: outcome() }),
      {},
    );
    expect(u).toMatchObject({ status: "max_steps", answer: null });
  });

  it("nudges after k identical (code, observation) pairs and replans after 2k", async () => {
    const node = observe({ repeatThreshold: 2, maxSteps: 20 });
    let s = state();
    const seen: { nudged: boolean; replan: boolean }[] = [];
    for (let i = 1; i <= 4; i++) {
      // Whitespace and comments don't make the action different.
      const code = i % 2 ? "console.log( x )" : "console.log(x) // again";
      const u: any = await node({ ...s, pending: pending(code, i), outcome: outcome({}, i) }, {});
      seen.push({
        nudged: String(u.steps.observation).includes("same result"),
        replan: Boolean(u.replan),
      });
      s = { ...s, stepCount: u.stepCount, repeat: u.repeat };
    }
    expect(seen).toEqual([
      { nudged: false, replan: false },
      { nudged: true, replan: false },
      { nudged: true, replan: false },
      { nudged: true, replan: true },
    ]);
  });

  it("stops a repeating agent under repeatPolicy stop", async () => {
    const u = await observe({ repeatThreshold: 1, repeatPolicy: "stop" })(
      state({
        repeat: {
          fingerprint: actionFingerprint("console.log(1)", "Execution logs:\nsame"),
          count: 1,
        },
        pending: pending("console.log(1)"),
        outcome: outcome(),
      }),
      {},
    );
    expect(u.status).toBe("repeated_action");
  });

  it("records error observations with their error, so the condensed view drops them once resolved", async () => {
    const u = await observe()(
      state({
        pending: pending("oops("),
        outcome: outcome({
          ok: false,
          logs: "",
          error: { name: "SyntaxError", message: "Unexpected end", line: 1 },
        }),
      }),
      {},
    );
    expect(u.steps).toMatchObject({ kind: "action", error: { name: "SyntaxError" } });
    expect(historyEntries([u.steps as StepRecord]).at(-1)).toMatchObject({
      kind: "observation",
      isError: true,
    });
  });

  it("throws GRAPH_INVARIANT without an outcome", async () => {
    const err = await observe()(state(), {}).catch((e) => e);
    expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.GRAPH_INVARIANT);
  });
});

describe("act node", () => {
  it("skips the sandbox for a reply without code and reports the format problem", async () => {
    const u = await makeActNode(runtime(new ScriptedChatModel(["x"])))(
      state({
        pending: {
          step: 1,
          modelOutput: "hi",
          thought: "hi",
          code: null,
          parseError: "No code found.",
          usage: { calls: 1, inputTokens: 1, outputTokens: 1, cachedInputTokens: 0 },
        },
      }),
      {},
    );
    expect(u.outcome).toMatchObject({
      ok: false,
      error: { name: "FormatError", message: "No code found." },
    });
  });

  it("throws GRAPH_INVARIANT when no action is pending", async () => {
    const err = await makeActNode(runtime(new ScriptedChatModel(["x"])))(state(), {}).catch(
      (e) => e,
    );
    expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.GRAPH_INVARIANT);
  });
});

describe("cleanFinalAnswer", () => {
  it.each([
    ["Final answer: Paris", "Paris"],
    ["**Final Answer:** 41 years", "41 years"],
    ["```\nRome\n```", "Rome"],
    ["Thought: I compared both towns.\nFinal answer: Oslo", "Oslo"],
    ["Thought: the capital is Oslo.", "the capital is Oslo."],
    ["<think>final answer: Bergen?</think>\nfinal answer: Oslo", "Oslo"],
  ])("%j -> %j", (reply, answer) => {
    expect(cleanFinalAnswer(reply)).toBe(answer);
  });
});

describe("final answer node", () => {
  it("asks once, without stop sequences, and keeps the stop status", async () => {
    const model = new ScriptedChatModel(["Final answer: Paris"]);
    const u = await makeFinalAnswerNode(runtime(model, { maxStepsPolicy: "final_answer_prompt" }))(
      state({
        status: "max_steps",
        stepCount: 3,
        steps: [actionStep(3, "Thought: look", "capital is Paris")],
      }),
      {},
    );
    expect(model.calls[0].stop).toBeUndefined();
    expect(text(model.calls[0].messages.at(-1)!)).toContain("no steps left");
    expect(u.answer).toBe("Paris");
    expect(u.status).toBeUndefined();
    expect(u.steps).toMatchObject({ kind: "final_answer", finalAnswer: "Paris" });
  });
});
