/**
 * Real code agents (LangGraph subgraphs, scripted in-process models) nesting through agentAsTool on
 * a capped sandbox: the action scope reaches sub-agents' actions through LangGraph, so wide fan-out
 * at a small cap completes instead of deadlocking, and many concurrent sub-agent calls emit no
 * MaxListenersExceededWarning.
 */
import { MemorySaver } from "@langchain/langgraph";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { ScriptedChatModel } from "../../src/testing/scripted-chat-model.ts";
import { createCodeAgent, type CodeAgent } from "../../src/framework/code-agent.ts";
import { createSandbox } from "../../src/sandbox/index.ts";
import { defineTool } from "../../src/tools/define-tool.ts";

const action = (code: string) => `Thought: next\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;

// Cap 2: far fewer processes than actions in flight at once.
const sandbox = createSandbox({ poolSize: 1, maxProcesses: 2, limits: { timeoutMs: 20_000 } });
afterAll(() => sandbox.close());

const warnings: Error[] = [];
const onWarning = (w: Error) => warnings.push(w);
beforeEach(() => {
  warnings.length = 0;
  process.on("warning", onWarning);
});
afterEach(() => {
  process.off("warning", onWarning);
});

const asTool = (agent: CodeAgent, name: string) =>
  agent.asTool({
    name,
    description: "does a part of the task",
    parameters: z.object({ task: z.string() }),
    toInput: ({ task }) => ({ task }),
  });

/** A parent whose one action calls `tool` `n` times in one Promise.all and answers the count. */
function fanOut(name: string, tool: string, n: number, child: CodeAgent, answer = "r.length") {
  const calls = Array.from({ length: n }, (_, i) => `${tool}("part ${i}")`).join(", ");
  return createCodeAgent({
    name,
    description: "splits the task",
    sandbox,
    maxSteps: 1,
    model: new ScriptedChatModel([
      action(`const r = await Promise.all([${calls}]);\nfinal_answer(${answer})`),
    ]),
    tools: [asTool(child, tool)],
  });
}

/** Two steps: between them the leaf holds no process, and a queued parent could take it. */
const leaf = () =>
  createCodeAgent({
    name: "leaf",
    description: "answers a part",
    sandbox,
    maxSteps: 2,
    // Replies by step (the model is shared by concurrent runs): 2 messages = system + task.
    // A 30 ms model: while every leaf is waiting for it, nothing deeper is queued.
    model: new ScriptedChatModel(
      [
        (messages) =>
          messages.length <= 2 ? action("const part = 'ok';") : action("final_answer(part)"),
      ],
      30,
    ),
  });

const maxListenerWarnings = () =>
  warnings.filter((w) => w.name === "MaxListenersExceededWarning").map((w) => w.message);

// Dozens of sandbox actions and process starts per test: slow on a loaded machine.
describe("nested agents on a capped sandbox", { timeout: 180_000 }, () => {
  it("a manager calling a sub-agent 15 times in one Promise.all completes, with no MaxListenersExceededWarning", async () => {
    const manager = fanOut("manager", "part_agent", 15, leaf());
    const graph = manager.builder.compile({ checkpointer: new MemorySaver() });
    const controller = new AbortController(); // as the CLI passes one (Ctrl-C)
    const out = await graph.invoke(
      { task: "fan out" },
      {
        recursionLimit: manager.recursionLimit,
        signal: controller.signal,
        configurable: { thread_id: "fan-out-15" },
      },
    );
    expect(out.answer).toBe(15);
    expect(out.steps[0].toolCalls).toHaveLength(15);
    await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
    expect(maxListenerWarnings()).toEqual([]);
  });

  it("three levels (4 x 4 two-step leaves) at a cap of 2 finish without deadlock, with one extra process per nesting level at most", async () => {
    const peakBefore = sandbox.peakProcessCount;
    const mid = fanOut("mid", "leaf_agent", 4, leaf(), "r.join(',')");
    const top = fanOut("top", "mid_agent", 4, mid, "r");
    const out = await top.invoke({ task: "two levels of fan-out" });
    // Every leaf answered: an action stuck behind a parent holding the last process would have
    // hit its deadline, and its leaf's error would have failed the Promise.all above it. (Not a
    // wall-time bound: under a loaded CI machine the honest run takes 3-16 s.)
    expect(out.answer).toEqual(Array(4).fill("ok,ok,ok,ok"));
    // 37 actions, most of them wanting a process at the same time: the extras follow the nesting
    // depth (2), not the fan-out.
    expect(Math.max(peakBefore, sandbox.peakProcessCount)).toBeLessThanOrEqual(2 + 2);
    await new Promise((r) => setImmediate(r));
    expect(maxListenerWarnings()).toEqual([]);
  });

  it("a sub-agent stops when the action that called it times out", async () => {
    let childModelCalls = 0;
    const slowChild = createCodeAgent({
      name: "slow",
      description: "takes its time",
      sandbox,
      maxSteps: 8,
      model: new ScriptedChatModel([
        async () => {
          childModelCalls++;
          await new Promise((r) => setTimeout(r, 200));
          return action("console.log('still working')");
        },
      ]),
    });
    const parent = createCodeAgent({
      name: "impatient",
      description: "waits briefly",
      sandbox,
      maxSteps: 1,
      actionTimeoutMs: 500,
      model: new ScriptedChatModel([action('final_answer(await slow_agent("work"))')]),
      tools: [asTool(slowChild, "slow_agent")],
    });
    const out = await parent.invoke({ task: "delegate" });
    expect(out.steps[0].observation).toMatch(/TimeoutError/);
    const callsAtTimeout = childModelCalls;
    await new Promise((r) => setTimeout(r, 1_000));
    // At most the model call in flight when the action was stopped finishes; no new steps start.
    expect(childModelCalls).toBeLessThanOrEqual(callsAtTimeout + 1);
    expect(childModelCalls).toBeLessThan(8);
  });

  it("a sub-agent's action still waiting for a process leaves the queue when the calling action times out", async () => {
    // Its own sandbox: one unrelated action holds one of the two processes for the whole test.
    const small = createSandbox({ poolSize: 0, maxProcesses: 2 });
    try {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const busy = small.run({
        code: "await hold()",
        tools: {
          hold: async () => {
            await gate;
            return null;
          },
        },
      });
      while (small.processCount < 1) await new Promise((r) => setTimeout(r, 5));
      let ran = 0;
      const mark = defineTool({
        name: "mark",
        description: "counts actions that ran",
        parameters: z.object({}),
        returns: "null",
        invoke: async () => {
          ran++;
          return null;
        },
      });
      const child = createCodeAgent({
        name: "queued",
        description: "never gets a process in time",
        sandbox: small,
        maxSteps: 1,
        tools: [mark],
        model: new ScriptedChatModel([action("await mark();\nfinal_answer('late')")]),
      });
      const parent = createCodeAgent({
        name: "impatient2",
        description: "waits briefly",
        sandbox: small,
        maxSteps: 1,
        actionTimeoutMs: 500,
        model: new ScriptedChatModel([action('final_answer(await queued_agent("work"))')]),
        tools: [asTool(child, "queued_agent")],
      });
      const out = await parent.invoke({ task: "delegate" });
      expect(out.steps[0].observation).toMatch(/TimeoutError/);
      // The parent's action was killed: the sub-agent's queued action is dropped, not run for
      // nothing on the process the parent's death freed.
      await new Promise((r) => setTimeout(r, 500));
      expect(small.queuedActions).toBe(0);
      expect(ran).toBe(0);
      release();
      await busy;
    } finally {
      await small.close();
    }
  });
});
