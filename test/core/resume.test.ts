import type { BaseMessage } from "@langchain/core/messages";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { historyEntries } from "../../src/core/history.ts";
import type { CallJournal, CallKey, CallOutcome } from "../../src/core/journal.ts";
import { ScriptedChatModel } from "../../src/testing/scripted-chat-model.ts";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import { createCodeAgent } from "../../src/framework/code-agent.ts";
import { createSandbox } from "../../src/sandbox/index.ts";
import { defineTool } from "../../src/tools/define-tool.ts";
import { foldVariables } from "../../src/core/variables.ts";

// Crash and resume: a model endpoint that fails mid-run leaves a resumable thread; resuming (with a
// fresh sandbox, as after a restart) restores the variables from the checkpoint; the call journal
// keeps a finished sub-agent call from running twice.
const sandboxes = [createSandbox(), createSandbox()];
afterAll(() => Promise.all(sandboxes.map((s) => s.close())));

const action = (code: string) => `Thought: go\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;
const text = (m: BaseMessage) => String(m.content);

/** In-memory CallJournal (the SQLite one lives in src/persistence). */
class MapJournal implements CallJournal {
  readonly entries = new Map<string, CallOutcome>();
  /** Resolves when a successful outcome is recorded for the given tool. */
  recorded = (tool: string) =>
    new Promise<void>((resolve) => {
      this.listeners.push([tool, resolve]);
    });
  private listeners: [string, () => void][] = [];
  get(key: CallKey) {
    return this.entries.get(JSON.stringify(key));
  }
  put(key: CallKey, outcome: CallOutcome) {
    this.entries.set(JSON.stringify(key), outcome);
    if (outcome.ok) for (const [tool, resolve] of this.listeners) if (tool === key.tool) resolve();
  }
}

/** A model whose endpoint is "down" while `down()` returns true. */
function flakyModel(
  replies: ((m: BaseMessage[]) => string)[],
  down: (m: BaseMessage[]) => boolean | Promise<boolean>,
) {
  return new ScriptedChatModel([
    async (m) => {
      if (await down(m)) throw new Error("connect ECONNREFUSED 127.0.0.1:8000");
      const observations = m.filter((x) => x.getType() === "human").length - 1;
      return replies[Math.min(observations, replies.length - 1)](m);
    },
  ]);
}

describe("resume after a model endpoint failure", () => {
  it("fails with MODEL_ENDPOINT_FAILED at plan, then resumes with the variables restored", async () => {
    const saver = SqliteSaver.fromConnString(":memory:");
    let endpointDown = true;
    const make = (sandbox: (typeof sandboxes)[number]) =>
      createCodeAgent({
        name: "worker",
        description: "d",
        sandbox,
        model: flakyModel(
          [
            () =>
              action("const base = 20;\nfunction twice(x) { return 2 * x; }\nconsole.log(base);"),
            () => action("final_answer(twice(base) + 2)"),
          ],
          (m) => endpointDown && m.length > 2,
        ),
      });
    const first = make(sandboxes[0]);
    const config = {
      recursionLimit: first.recursionLimit,
      configurable: { thread_id: "resume-1" },
    };
    const err = await first.builder
      .compile({ checkpointer: saver })
      .invoke({ task: "compute" }, config)
      .catch((e) => e);
    expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.MODEL_ENDPOINT_FAILED);
    expect(err.message).toMatch(/agent "worker".*ECONNREFUSED/);

    const graph = make(sandboxes[1]).builder.compile({ checkpointer: saver });
    const paused = await graph.getState(config);
    expect(paused.next).toEqual(["plan"]);
    expect(foldVariables(paused.values.variables)!.values.base).toBe(20);

    endpointDown = false;
    const out = await graph.invoke(null, config);
    expect(out).toMatchObject({ status: "final_answer", answer: 42, stepCount: 2 });
  });
});

describe("call journal", () => {
  it("serves a finished sub-agent call on resume instead of running it again", async () => {
    const saver = SqliteSaver.fromConnString(":memory:");
    const journal = new MapJournal();
    let lookups = 0;
    let bDown = true;
    const aJournaled = journal.recorded("child_agent");
    const lookup = defineTool({
      name: "lookup",
      description: "d",
      parameters: z.object({ key: z.string() }),
      returns: "string",
      invoke: async ({ key }) => {
        lookups++;
        return `value-${key}`;
      },
    });
    const child = createCodeAgent({
      name: "child",
      description: "d",
      sandbox: sandboxes[0],
      tools: [lookup],
      model: flakyModel(
        [
          (m) =>
            action(
              `final_answer(await lookup(${JSON.stringify(text(m[1]).includes("about A") ? "A" : "B")}))`,
            ),
        ],
        // B's endpoint goes down only after A's call has finished and been journaled.
        async (m) => bDown && text(m[1]).includes("about B") && (await aJournaled, true),
      ),
    });
    const parent = createCodeAgent({
      name: "parent",
      description: "d",
      sandbox: sandboxes[0],
      tools: [
        child.asTool({
          name: "child_agent",
          description: "d",
          parameters: z.object({ task: z.string() }),
          toInput: (a) => a,
        }),
      ],
      model: flakyModel(
        [
          () =>
            action(
              'const [a, b] = await Promise.all([child_agent("about A"), child_agent("about B")]);\nconsole.log(a, b);',
            ),
          () => action("final_answer(a + '+' + b)"),
        ],
        () => false,
      ),
    });
    const graph = parent.builder.compile({ checkpointer: saver });
    const config = {
      recursionLimit: parent.recursionLimit,
      configurable: { thread_id: "journal-1", journal },
    };

    // Child B's endpoint is down: the framework error fails the parent's act node (no observation).
    const err = await graph.invoke({ task: "combine" }, config).catch((e) => e);
    expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.MODEL_ENDPOINT_FAILED);
    expect(lookups).toBe(1);
    const recorded = [...journal.entries.entries()].map(([k, v]) => [JSON.parse(k).tool, v.ok]);
    expect(recorded).toContainEqual(["child_agent", true]);

    bDown = false;
    const out = await graph.invoke(null, config);
    expect(out.answer).toBe("value-A+value-B");
    // A's sub-agent (and its lookup) did not run again; B ran once.
    expect(lookups).toBe(2);
    const calls = out.steps[0].toolCalls.map((c) => [c.tool, c.fromJournal]);
    expect(calls).toEqual([
      ["child_agent", true],
      ["child_agent", false],
    ]);
    // A's usage still counts: it was replayed from the journal's reports.
    expect(out.usage.child.calls).toBe(2);
  });
});

it("stops the run with DB_INVALID when the call journal fails (not an observation)", async () => {
  const broken: CallJournal = {
    get: () => undefined,
    put: () => {
      throw new Error("SQLITE_FULL: database or disk is full");
    },
  };
  const echo = defineTool({
    name: "echo",
    description: "d",
    parameters: z.object({ s: z.string() }),
    returns: "string",
    invoke: async ({ s }) => s,
  });
  const agent = createCodeAgent({
    name: "journaled",
    description: "d",
    sandbox: sandboxes[0],
    tools: [echo],
    model: new ScriptedChatModel([action('final_answer(await echo("x"))')]),
  });
  const err = await agent
    .invoke({ task: "echo" }, { configurable: { journal: broken } })
    .catch((e) => e);
  expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.DB_INVALID);
  expect(err.message).toMatch(/Call journal failed for echo\(\).*SQLITE_FULL/);
});

it("starts a new task on a finished thread from a clean history, keeping the variables", async () => {
  const saver = SqliteSaver.fromConnString(":memory:");
  const model = new ScriptedChatModel([
    (m) =>
      text(m[1]).includes("first")
        ? action("const base = 40;\nfinal_answer(base)")
        : action("final_answer(base + 2)"),
  ]);
  const agent = createCodeAgent({ name: "chat", description: "d", sandbox: sandboxes[0], model });
  const graph = agent.builder.compile({ checkpointer: saver });
  const config = { recursionLimit: agent.recursionLimit, configurable: { thread_id: "two-tasks" } };
  const first = await graph.invoke({ task: "first task" }, config);
  expect(first).toMatchObject({ answer: 40, stepCount: 1, status: "final_answer" });

  const second = await graph.invoke({ task: "second task" }, config);
  expect(second).toMatchObject({
    answer: 42,
    stepCount: 1,
    status: "final_answer",
    task: "second task",
  });
  // The second task's prompt has no trace of the first; its trajectory and usage are its own.
  expect(model.calls[1].messages).toHaveLength(2);
  expect(second.steps).toHaveLength(1);
  expect(second.usage.chat.calls).toBe(1);
  expect(
    historyEntries(second.steps)
      .map((e) => e.content)
      .join("\n"),
  ).not.toContain("first");
});

it("does not journal a sub-agent call cut short by an abort: the resumed run calls it again", async () => {
  const saver = SqliteSaver.fromConnString(":memory:");
  const journal = new MapJournal();
  let slow = true;
  let childRuns = 0;
  const child = createCodeAgent({
    name: "slow_child",
    description: "d",
    sandbox: sandboxes[1],
    maxSteps: 2,
    model: new ScriptedChatModel([
      async () => {
        childRuns++;
        if (slow) await new Promise((r) => setTimeout(r, 3000));
        return action("final_answer('child ok')");
      },
    ]),
  });
  const parent = createCodeAgent({
    name: "parent",
    description: "d",
    sandbox: sandboxes[1],
    maxSteps: 2,
    tools: [
      child.asTool({
        name: "slow_agent",
        description: "d",
        parameters: z.object({ task: z.string() }),
        toInput: (a) => a,
      }),
    ],
    model: new ScriptedChatModel([
      action(
        'let r;\ntry { r = await slow_agent("work"); } catch (e) { r = "FAILED: " + e.message; }\nfinal_answer(r);',
      ),
    ]),
  });
  const graph = parent.builder.compile({ checkpointer: saver });
  const config = {
    recursionLimit: parent.recursionLimit,
    configurable: { thread_id: "abort-1", journal },
  };
  const controller = new AbortController();
  // Abort (Ctrl-C) while the sub-agent's model call is in flight.
  const started = new Promise<void>((resolve) => {
    const poll = setInterval(() => childRuns > 0 && (clearInterval(poll), resolve()), 5);
  });
  const first = graph.invoke({ task: "t" }, { ...config, signal: controller.signal });
  await started;
  controller.abort();
  await expect(first).rejects.toThrow();
  expect(journal.entries.size).toBe(0);

  slow = false;
  const out = await graph.invoke(null, config);
  expect(out.answer).toBe("child ok");
  expect(out.steps.at(-1)?.toolCalls.map((c) => [c.tool, c.ok, c.fromJournal])).toEqual([
    ["slow_agent", true, false],
  ]);
  expect(childRuns).toBe(2);
  saver.db.close();
});
