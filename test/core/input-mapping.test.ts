import { MemorySaver, type StateSnapshot } from "@langchain/langgraph";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { ScriptedChatModel } from "../../src/testing/scripted-chat-model.ts";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import { createCodeAgent, type CodeAgentOptions } from "../../src/framework/code-agent.ts";
import { createSandbox, RESERVED_GLOBALS } from "../../src/sandbox/index.ts";
import { defineTool } from "../../src/tools/define-tool.ts";

// The `input` option of createCodeAgent: a custom graph input mapped to the task by a `start` node
// in the agent's own graph, so the agent's steps stay root checkpoints of the thread.
const sandbox = createSandbox({ poolSize: 1 });
afterAll(() => sandbox.close());

const action = (code: string) => `Thought: go\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;

const Input = z.object({
  question: z.string().min(1).describe("the user's question"),
  audience: z.enum(["child", "expert"]).default("expert"),
});

function questionAgent(model: ScriptedChatModel, extra: Partial<CodeAgentOptions> = {}) {
  return createCodeAgent({
    name: "front",
    description: "answers questions",
    model,
    sandbox,
    ...extra,
    input: {
      schema: Input,
      toTask: ({ question, audience }) => ({
        task: `${question} (explain for: ${audience})`,
        context: { audience },
      }),
    },
  });
}

/** getStateHistory, oldest first. */
async function historyOf(
  graph: { getStateHistory: (c: any) => AsyncIterable<StateSnapshot> },
  threadId: string,
) {
  const out: StateSnapshot[] = [];
  for await (const s of graph.getStateHistory({ configurable: { thread_id: threadId } }))
    out.push(s);
  return out.reverse();
}

const codeOf = (err: unknown) => (CodehopError.isInstance(err) ? err.code : String(err));

describe("createCodeAgent input option", () => {
  it("maps the custom input to the task in a start node; every step is a root checkpoint", async () => {
    const model = new ScriptedChatModel([
      action("const n = 6 * 7;\nconsole.log(n);"),
      action("final_answer(n)"),
    ]);
    const agent = questionAgent(model);
    const graph = agent.builder.compile({ checkpointer: new MemorySaver() });
    const config = { configurable: { thread_id: "q1" }, recursionLimit: agent.recursionLimit };
    const out = await graph.invoke({ question: "What is six times seven?" }, config);

    expect(out.answer).toBe(42);
    // The model got the mapped task; the input and the mapped task/context stay in the state.
    expect(model.calls[0].messages.map((m) => String(m.content)).join("\n")).toContain(
      "What is six times seven? (explain for: expert)",
    );
    expect(out).toMatchObject({
      question: "What is six times seven?",
      audience: "expert", // zod default, applied by LangGraph's input validation
      task: "What is six times seven? (explain for: expert)",
      context: { audience: "expert" },
    });

    const history = await historyOf(graph, "q1");
    // All checkpoints are the root graph's (no namespace), one per super-step, in order.
    expect(history.every((s) => (s.config.configurable?.checkpoint_ns ?? "") === "")).toBe(true);
    expect(history.map((s) => s.next.join(","))).toEqual([
      "__start__",
      "start",
      "plan",
      "act",
      "observe",
      "plan",
      "act",
      "observe",
      "",
    ]);
    // The checkpoint after start already holds the task: a fork can start from any step.
    expect(history[2].values).toMatchObject({ task: out.task, steps: [] });
  });

  it("replays from the checkpoint before an agent step (fork on the same thread)", async () => {
    const model = new ScriptedChatModel([action("final_answer(1)"), action("final_answer(2)")]);
    const agent = questionAgent(model);
    const graph = agent.builder.compile({ checkpointer: new MemorySaver() });
    const thread = { configurable: { thread_id: "q2" } };
    expect((await graph.invoke({ question: "first?" }, thread)).answer).toBe(1);
    const beforePlan = (await historyOf(graph, "q2")).find((s) => s.next.join() === "plan")!;
    const replayed = await graph.invoke(null, {
      configurable: {
        thread_id: "q2",
        checkpoint_id: beforePlan.config.configurable?.checkpoint_id,
      },
    });
    expect(replayed).toMatchObject({
      answer: 2,
      question: "first?",
      task: expect.stringContaining("first?"),
    });
    expect(model.calls).toHaveLength(2);
  });

  it("a later run on the thread that omits an optional input key does not see the previous run's value", async () => {
    const seen: unknown[] = [];
    const agent = createCodeAgent({
      name: "hints",
      description: "d",
      model: new ScriptedChatModel([action("final_answer(1)")]),
      sandbox,
      input: {
        schema: z.object({ q: z.string(), hint: z.string().optional() }),
        toTask: ({ q, hint }) => {
          seen.push(hint);
          return { task: hint ? `${q} (hint: ${hint})` : q };
        },
      },
    });
    const graph = agent.builder.compile({ checkpointer: new MemorySaver() });
    const thread = { configurable: { thread_id: "hints" } };
    await graph.invoke({ q: "a", hint: "h" }, thread);
    const second = await graph.invoke({ q: "b" }, thread);
    expect(seen).toEqual(["h", undefined]);
    expect(second).toMatchObject({ q: "b", hint: undefined, task: "b" });
  });

  it("rejects the raw { task } input: graph.invoke with LangGraph's validation error and no checkpoint, agent.invoke with INPUT_INVALID", async () => {
    const model = new ScriptedChatModel([action("final_answer(1)")]);
    const agent = questionAgent(model);
    const graph = agent.builder.compile({ checkpointer: new MemorySaver() });
    const err = await graph
      .invoke({ task: "raw task" } as any, { configurable: { thread_id: "raw" } })
      .catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/question/);
    expect(await historyOf(graph, "raw")).toEqual([]);

    const coded = await agent.invoke({ task: "raw task" } as any).catch((e: unknown) => e);
    expect(codeOf(coded)).toBe(ErrorCodes.INPUT_INVALID);
    expect((coded as Error).message).toMatch(
      /question: .*expected the keys of its input schema: question, audience/,
    );
    expect(model.calls).toHaveLength(0);
    // agent.invoke with the custom input runs the agent.
    expect((await agent.invoke({ question: "one?" })).answer).toBe(1);
  });

  it("fails the start node with CONFIG_INVALID when toTask returns no task", async () => {
    const agent = createCodeAgent({
      name: "broken",
      description: "d",
      model: new ScriptedChatModel([action("final_answer(1)")]),
      sandbox,
      input: { schema: z.object({ q: z.string() }), toTask: () => ({}) as any },
    });
    const err = await agent.invoke({ q: "x" }).catch((e: unknown) => e);
    expect(codeOf(err)).toBe(ErrorCodes.CONFIG_INVALID);
    expect((err as Error).message).toMatch(/toTask must return \{ task: string/);
  });

  it("draws start before the agent's nodes; without the option the graph is unchanged", async () => {
    const model = new ScriptedChatModel([action("final_answer(1)")]);
    const ids = async (g: { getGraphAsync: () => Promise<{ nodes: Record<string, unknown> }> }) =>
      Object.keys((await g.getGraphAsync()).nodes).sort();
    const agentNodes = [
      "__end__",
      "__start__",
      "act",
      "final_answer",
      "new_task",
      "observe",
      "plan",
      "planning",
    ];
    expect(await ids(questionAgent(model).graph)).toEqual([...agentNodes, "start"].sort());
    expect(await ids(createCodeAgent({ name: "plain", description: "d", model }).graph)).toEqual(
      agentNodes,
    );
    const plain = createCodeAgent({ name: "plain", description: "d", model, sandbox });
    expect((await plain.invoke({ task: "t" })).answer).toBe(1);
  });

  it.each([
    [{ schema: z.object({ task: z.string() }), toTask: (i: any) => i }, /"task" clash/],
    [
      { schema: z.object({ q: z.string(), answer: z.string() }), toTask: () => ({ task: "" }) },
      /"answer" clash/,
    ],
    [{ schema: z.object({ start: z.string() }), toTask: () => ({ task: "" }) }, /"start" clash/],
    [{ schema: { question: "string" }, toTask: () => ({ task: "" }) }, /zod object/],
    [{ schema: z.object({}), toTask: () => ({ task: "" }) }, /no keys/],
    [
      {
        schema: z.object({ q: z.string() }).refine((i) => i.q !== "x"),
        toTask: () => ({ task: "" }),
      },
      /object-level refinements/,
    ],
    [{ schema: z.object({ q: z.string() }) }, /toTask/],
  ])("rejects a bad input mapping with CONFIG_INVALID (%#)", (input, message) => {
    const build = () => createCodeAgent({ name: "a", description: "d", input: input as any });
    expect(build).toThrow(message);
    try {
      build();
    } catch (err) {
      expect(codeOf(err)).toBe(ErrorCodes.CONFIG_INVALID);
    }
  });

  it("an agent with a custom input cannot be another agent's tool", () => {
    const agent = questionAgent(new ScriptedChatModel(["x"]));
    const err = (() => {
      try {
        agent.asTool({
          name: "front_agent",
          description: "d",
          parameters: z.object({ task: z.string() }),
          toInput: (a) => a,
        });
      } catch (e) {
        return e;
      }
    })();
    expect(codeOf(err)).toBe(ErrorCodes.CONFIG_INVALID);
    expect((err as Error).message).toMatch(/custom input/);
  });

  it("accepts options typed as plain CodeAgentOptions (built elsewhere, input maybe set)", async () => {
    // Type-level as much as runtime: this must compile (npm run typecheck covers test/).
    const options: CodeAgentOptions = {
      name: "from_options",
      description: "d",
      sandbox,
      model: new ScriptedChatModel(["Thought: done\nCode:\n```js\nfinal_answer(7)\n```"]),
    };
    const agent = createCodeAgent(options);
    expect((await agent.invoke({ task: "seven" })).answer).toBe(7);
  });
});

describe("createCodeAgent tool names", () => {
  const tool = (name: string) =>
    defineTool({
      name,
      description: "d",
      parameters: z.object({ q: z.string() }),
      returns: "string",
      invoke: async () => "",
    });

  it("rejects at build time every name the sandbox reserves (its RESERVED_GLOBALS) and non-binding names", () => {
    const names = [...RESERVED_GLOBALS, "let", "yield", "await", "arguments"];
    expect(names).toEqual(expect.arrayContaining(["Date", "Intl", "eval", "final_answer"]));
    for (const name of names) {
      let err: unknown;
      try {
        createCodeAgent({ name: "a", description: "d", tools: [tool(name)] });
      } catch (e) {
        err = e;
      }
      expect(codeOf(err), name).toBe(ErrorCodes.CONFIG_INVALID);
      expect((err as Error).message, name).toContain(`tool name "${name}" is reserved`);
    }
    expect(() =>
      createCodeAgent({ name: "a", description: "d", tools: [tool("Dates")] }),
    ).not.toThrow();
  });

  it("rejects a reserved name from a tools factory when the run builds its tools, before any action", async () => {
    const model = new ScriptedChatModel([action("final_answer(1)")]);
    const agent = createCodeAgent({
      name: "a",
      description: "d",
      model,
      sandbox,
      tools: () => [tool("Date")],
    });
    const err = await agent.invoke({ task: "t" }).catch((e: unknown) => e);
    expect(codeOf(err)).toBe(ErrorCodes.CONFIG_INVALID);
    expect((err as Error).message).toContain('tool name "Date" is reserved');
  });
});

describe("an agent without an input mapping", () => {
  it("refuses an input without a task (Studio's `{}`) with CODEHOP_INPUT_INVALID before any model call; a task runs", async () => {
    const model = new ScriptedChatModel([action("final_answer('done')")]);
    const agent = createCodeAgent({ name: "plain", description: "does things", model, sandbox });
    for (const [input, problem] of [
      [{}, "task: expected the task as a string"],
      [{ task: "  " }, "task: the task is empty: say what to do"],
      [{ task: "go", context: "x" }, "context: expected an object"],
    ] as const) {
      const err = await agent.graph.invoke(input as never).catch((e: unknown) => e);
      expect(codeOf(err)).toBe(ErrorCodes.INPUT_INVALID);
      expect((err as Error).message).toBe(
        `Invalid input for the "plain" graph: ${problem} (expected { task: string, context?: object }). [CODEHOP_INPUT_INVALID]`,
      );
    }
    expect(model.calls).toHaveLength(0);
    expect((await agent.graph.invoke({ task: "go" })).answer).toBe("done");
  });
  it("a sub-agent called from code with an empty task: an observation for the caller, the sub-agent never runs", async () => {
    const childModel = new ScriptedChatModel([action("final_answer('child ran')")]);
    const child = createCodeAgent({
      name: "child",
      description: "does a part",
      model: childModel,
      sandbox,
    });
    const parentModel = new ScriptedChatModel([
      action('console.log(await child_agent("  "));'),
      action('final_answer(await child_agent("do the part"));'),
    ]);
    const parent = createCodeAgent({
      name: "parent",
      description: "delegates",
      model: parentModel,
      sandbox,
      tools: [
        child.asTool({
          name: "child_agent",
          description: "does a part",
          parameters: z.object({ task: z.string() }),
          toInput: ({ task }) => ({ task }),
        }),
      ],
    });
    const out = await parent.graph.invoke({ task: "delegate" });
    expect(out.answer).toBe("child ran");
    // The second model call saw the first action's error, naming the tool and its usage.
    const seen = parentModel.calls[1].messages.map((m) => String(m.content)).join("\n");
    expect(seen).toMatch(/child_agent\(\) needs a task: say what the agent should do\. Usage: /);
    expect(childModel.calls).toHaveLength(1);
  });
});
