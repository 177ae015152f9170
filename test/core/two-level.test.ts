import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createCodeAgent } from "../../src/framework/code-agent.ts";
import { createSandbox } from "../../src/sandbox/index.ts";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
} from "../../src/testing/scripted-openai-server.ts";
import { defineTool } from "../../src/tools/define-tool.ts";

// The real ChatOpenAI over HTTP against a local OpenAI-compatible server, the real sandbox and
// SQLite checkpoints: a manager calls a page agent twice in one Promise.all and computes the answer
// in code; each page agent runs out of steps and returns its last observation.
const PAGES: Record<string, string> = {
  "Tower A": "Tower A is a lattice tower. It is 324 m tall.",
  "Tower B": "Tower B is a radio mast. It is 301 m tall.",
};

const action = (code: string) =>
  `Thought: next step\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>\nObservation: (hallucinated, must be cut)`;

let server: ScriptedOpenAIServer;
const sandbox = createSandbox();

beforeAll(async () => {
  const pageRule = (title: string) => ({
    name: `page:${title}`,
    task: `height of ${title}`,
    steps: [
      action(`const text = await read_page(${JSON.stringify(title)});\nconsole.log(text.length);`),
      action(`console.log(text.split(". ").find((s) => s.includes(" m tall")));`),
    ],
  });
  server = await ScriptedOpenAIServer.start({
    responder: trajectoryResponder([
      pageRule("Tower A"),
      pageRule("Tower B"),
      {
        name: "manager",
        task: "How much taller is Tower A than Tower B?",
        steps: [
          action(
            'const [a, b] = await Promise.all([page_agent("height of Tower A"), page_agent("height of Tower B")]);\nconsole.log(a);\nconsole.log(b);',
          ),
          action(
            "const metres = (s) => Number(/(\\d+) m/.exec(s)[1]);\nfinal_answer(`${metres(a) - metres(b)} m`);",
          ),
        ],
      },
    ]),
  });
});
afterAll(async () => {
  await server?.close();
  await sandbox.close();
});

function build(streamModel: boolean) {
  const readPage = defineTool({
    name: "read_page",
    description: "Returns the text of a page.",
    parameters: z.object({ title: z.string() }),
    returns: "string",
    invoke: async ({ title }, ctx) => {
      ctx.report?.({ sources: [{ title }] });
      return PAGES[title] ?? "";
    },
  });
  const page = createCodeAgent({
    name: "page_search",
    description: "reads a page",
    tools: [readPage],
    maxSteps: 2,
    sandbox,
    streamModel,
  });
  const manager = createCodeAgent({
    name: "manager",
    description: "answers multi-hop questions",
    maxSteps: 4,
    sandbox,
    streamModel,
    tools: [
      page.asTool({
        name: "page_agent",
        description: "Answers a question from one page.",
        parameters: z.object({ task: z.string().describe("the question") }),
        toInput: ({ task }) => ({ task }),
      }),
    ],
  });
  return { page, manager };
}

describe.each([false, true])("two-level agent over HTTP (streamModel=%s)", (streaming) => {
  it("computes the answer in code from two concurrent sub-agent calls", async () => {
    const { manager } = build(streaming);
    const saver = SqliteSaver.fromConnString(":memory:");
    const graph = manager.builder.compile({ checkpointer: saver });
    const before = server.requests.length;
    const config = {
      recursionLimit: manager.recursionLimit,
      configurable: {
        thread_id: `two-level-${streaming}`,
        model: "scripted",
        modelSettings: { baseURL: server.baseURL, apiKey: "test", maxRetries: 0 },
      },
    };
    const out = await graph.invoke({ task: "How much taller is Tower A than Tower B?" }, config);

    expect(out.status).toBe("final_answer");
    expect(out.answer).toBe("23 m");
    // The children ran out of steps and returned their last observation, which the parent printed.
    expect(out.steps[0].observation).toBe("Execution logs:\nIt is 324 m tall.\nIt is 301 m tall.");
    expect(out.steps[0].toolCalls.map((c) => [c.tool, c.args])).toEqual([
      ["page_agent", { task: "height of Tower A" }],
      ["page_agent", { task: "height of Tower B" }],
    ]);
    // Usage rolls up: 2 manager calls, 2 x 2 page agent calls.
    expect(out.usage.manager.calls).toBe(2);
    expect(out.usage.page_search.calls).toBe(4);
    expect(out.usage.page_search.inputTokens).toBeGreaterThan(0);
    // The server reports the prompt prefix shared with an earlier request as cached; it is recorded.
    expect(out.usage.manager.cachedInputTokens).toBeGreaterThan(0);
    expect(out.sources).toEqual([{ title: "Tower A" }, { title: "Tower B" }]);

    const requests = server.requests.slice(before);
    expect(requests).toHaveLength(6);
    for (const r of requests) {
      expect(r.request.stop).toEqual(["<end_action>", "Observation:"]);
      expect(r.request.stream).toBe(streaming);
      expect(r.request.messages[0].role).toBe("system");
      // Observations and the last-action note go as user messages; only system/user/assistant
      // roles, and the user speaks last.
      for (const m of r.request.messages) expect(["system", "user", "assistant"]).toContain(m.role);
      expect(r.request.messages.at(-1)!.role).toBe("user");
    }
    // The managed-agent wrapper reached the child.
    expect(requests.find((r) => r.rule === "page:Tower A")!.request.messages[1].content).toMatch(
      /Your manager gave you this task/,
    );

    // Checkpoints nest: one namespace per concurrent child call under the manager's act task.
    const namespaces = new Set<string>();
    for await (const c of saver.list({
      configurable: { thread_id: config.configurable.thread_id },
    })) {
      namespaces.add(String(c.config.configurable?.checkpoint_ns ?? ""));
    }
    const children = [...namespaces].filter((ns) => ns.startsWith("act:"));
    expect(children).toHaveLength(2);
    expect(children.some((ns) => ns.endsWith("|1"))).toBe(true);
  });
});
