/**
 * What an agent run tells its sandbox besides running actions: `prepare(session)` as each step's
 * model call starts (so the process of the run's first action starts while the model thinks) and
 * `endSession(session)` once the run is over — always with the session its actions run in.
 */
import { MemorySaver } from "@langchain/langgraph";
import { afterAll, expect, it } from "vitest";
import { createCodeAgent } from "../../src/framework/code-agent.ts";
import { createSandbox } from "../../src/sandbox/index.ts";
import type { CodeSandbox } from "../../src/sandbox/contract.ts";
import { ScriptedChatModel } from "../../src/testing/scripted-chat-model.ts";

const real = createSandbox({ poolSize: 0, limits: { timeoutMs: 5_000 } });
afterAll(() => real.close());

const action = (code: string) => `Thought: next\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;

/** The real sandbox, recording the calls it gets, in order. */
function recording(): { sandbox: CodeSandbox; calls: string[] } {
  const calls: string[] = [];
  const sandbox: CodeSandbox = {
    run: (request) => {
      calls.push(`run ${request.session}`);
      return real.run(request);
    },
    close: async () => {},
    prepare: (session) => {
      calls.push(`prepare ${session}`);
      real.prepare(session);
    },
    endSession: (session) => {
      calls.push(`endSession ${session}`);
      real.endSession(session);
    },
  };
  return { sandbox, calls };
}

it("prepares before each step's model call and ends the session when the run answers", async () => {
  const { sandbox, calls } = recording();
  const agent = createCodeAgent({
    name: "counter",
    description: "d",
    sandbox,
    model: new ScriptedChatModel([action("var n = 1;"), action("final_answer(n + 1)")]),
  });
  const graph = agent.builder.compile({ checkpointer: new MemorySaver() });
  const out = await graph.invoke(
    { task: "count" },
    { recursionLimit: agent.recursionLimit, configurable: { thread_id: "hints-1" } },
  );
  expect(out.answer).toBe(2);
  await new Promise((r) => setTimeout(r, 0)); // the hints are sent without waiting
  const session = calls[1].slice("run ".length);
  expect(session).toContain("hints-1");
  expect(calls).toEqual([
    `prepare ${session}`,
    `run ${session}`,
    `prepare ${session}`,
    `run ${session}`,
    `endSession ${session}`,
  ]);
});

it("ends the session when the run stops at its step limit, and gives no hints without a thread", async () => {
  const { sandbox, calls } = recording();
  const agent = createCodeAgent({
    name: "looper",
    description: "d",
    sandbox,
    maxSteps: 2,
    maxStepsPolicy: "last_observation",
    model: new ScriptedChatModel([action("console.log(1)")]),
  });
  const graph = agent.builder.compile({ checkpointer: new MemorySaver() });
  const out = await graph.invoke(
    { task: "loop" },
    { recursionLimit: agent.recursionLimit, configurable: { thread_id: "hints-2" } },
  );
  expect(out.status).toBe("max_steps");
  await new Promise((r) => setTimeout(r, 0));
  expect(calls.at(-1)).toMatch(/^endSession .*hints-2/);
  expect(calls.filter((c) => c.startsWith("endSession"))).toHaveLength(1);

  // A top-level run without a thread has no session: each action is its own (nothing to prepare).
  const bare = recording();
  const once = createCodeAgent({
    name: "once",
    description: "d",
    sandbox: bare.sandbox,
    model: new ScriptedChatModel([action("final_answer(1)")]),
  });
  await once.invoke({ task: "once" });
  await new Promise((r) => setTimeout(r, 0));
  expect(bare.calls).toEqual(["run undefined"]);
});
