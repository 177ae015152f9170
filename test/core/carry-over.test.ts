import { afterAll, expect, it } from "vitest";
import { ScriptedChatModel } from "../../src/testing/scripted-chat-model.ts";
import { createCodeAgent } from "../../src/framework/code-agent.ts";
import { createSandbox } from "../../src/sandbox/index.ts";

// A whole agent on the real sandbox: what the model is told about variables that cannot persist.
const sandbox = createSandbox({ limits: { timeoutMs: 5_000 } });
afterAll(() => sandbox.close());

const action = (code: string, thought = "next") =>
  `Thought: ${thought}\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;

it("tells the model which new variables cannot be carried over, and why, when it uses one", async () => {
  const agent = createCodeAgent({
    name: "notes",
    description: "d",
    sandbox,
    model: new ScriptedChatModel([
      action("const m = new Map([[1, 2]]);\nconst obj = { d: new Date(0) };\nconsole.log(m.size);"),
      action("console.log(obj.d);"),
      action("console.log(m.get(1));"),
      action("final_answer('ok')"),
    ]),
  });
  const out = await agent.invoke({ task: "maps" });
  const obs = out.steps.map((s) => s.observation);
  expect(obs[0]).toContain(
    "Note: not carried over to the next step: m (Map is not JSON-serializable)",
  );
  expect(obs[1]).toContain("1970-01-01T00:00:00.000Z");
  expect(obs[1]).not.toContain("Note:"); // said once, when the action created it
  expect(obs[2]).toContain(
    "ReferenceError: m is not defined (its value could not be carried over: Map is not JSON-serializable)",
  );
});
