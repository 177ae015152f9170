import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";

const root = process.cwd();
const langgraph = JSON.parse(readFileSync(join(root, "langgraph.json"), "utf8")) as {
  graphs: Record<string, string>;
};

describe("graphs exported for langgraph.json", () => {
  it("lists every agent of the QA team's registry, the generic code agent, and what `codehop graph` draws", async () => {
    const { qaTeam } = await import("../../src/apps/qa/team.ts");
    const { teamAgentNames } = await import("../../src/framework/team.ts");
    const { GRAPH_ENTRIES } = await import("../../src/graphs/entries.ts");
    const names = Object.keys(langgraph.graphs);
    for (const agent of [...teamAgentNames(qaTeam), "code_agent"]) expect(names).toContain(agent);
    // `codehop graph` draws exactly the graphs langgraph.json serves, from the same module.
    expect(Object.keys(GRAPH_ENTRIES).sort()).toEqual([...names].sort());
    for (const [name, target] of Object.entries(langgraph.graphs)) {
      expect(target).toBe(`./src/graphs/entries.ts:${name}`);
      if (GRAPH_ENTRIES[name].agent) expect(GRAPH_ENTRIES[name].agent).toBe(name);
    }
  });

  for (const [name, target] of Object.entries(langgraph.graphs)) {
    it(`${name}: ${target} is a compiled graph without a checkpointer`, async () => {
      const [file, exportName] = target.split(":");
      const mod = await import(pathToFileURL(join(root, file)).href);
      const graph = mod[exportName];
      expect(typeof graph?.invoke).toBe("function");
      expect(typeof graph?.getGraphAsync).toBe("function");
      // The LangGraph server attaches its own checkpointer.
      expect(graph.checkpointer).toBeFalsy();
    });
  }

  it("draws the manager with the nested agents' plan / act / observe nodes (xray)", async () => {
    const { manager: graph } = await import("../../src/graphs/entries.ts");
    const drawing = await graph.getGraphAsync({ xray: true });
    const ids = Object.keys(drawing.nodes);
    // The manager's act node expands into the agent it calls, and that agent's act node into the
    // page agent: act:<node> is wikipedia_search, act:act:<node> is page_search.
    for (const node of [
      "start",
      "plan",
      "observe",
      "act:plan",
      "act:observe",
      "act:act:plan",
      "act:act:act",
      "act:act:observe",
    ]) {
      expect(ids).toContain(node);
    }
    const mermaid = drawing.drawMermaid();
    expect(mermaid).toContain("observe");
  });
});

describe("docs/app.md and README.md", () => {
  it.each(["docs/app.md", "README.md"])(
    "%s shows the diagram LangGraph draws from the real manager graph",
    async (file) => {
      const { graphMermaid } = await import("../../src/cli/commands/graph.ts");
      const doc = readFileSync(join(root, file), "utf8");
      const blocks = [...doc.matchAll(/```mermaid\n([\s\S]*?)\n```/g)].map((m) => m[1]);
      expect(blocks).toContain((await graphMermaid("manager")).trimEnd());
    },
  );
});

describe("reference agents' prompts", () => {
  it("render strictly with each agent's real tools, in the reference design's code-action format", async () => {
    const { renderAllPrompts } = await import("../../src/core/prompts.ts");
    const { DEFAULT_CAPABILITIES } = await import("../../src/core/settings.ts");
    const { createManagerAgent } = await import("../../src/apps/qa/team.ts");
    const { createWikipediaSearchAgent, createSearchInfoTool } =
      await import("../../src/apps/qa/team.ts");
    const { createPageSearchAgent } = await import("../../src/apps/qa/team.ts");
    const { createSearchWikipediaTool } =
      await import("../../src/apps/qa/tools/search-wikipedia.ts");
    const { createRetrievePassagesTool } =
      await import("../../src/apps/qa/tools/retrieve-passages.ts");
    const { AGENT_MARKERS } = await import("../../src/apps/qa/demo-trajectories.ts");
    const source = { kind: "corpus" } as any;
    const page = createPageSearchAgent({ source });
    const wiki = createWikipediaSearchAgent({ source });
    const manager = createManagerAgent({ source });
    const cases = [
      {
        agent: manager,
        tools: [
          wiki.asTool({
            name: "wikipedia_search_agent",
            description: "d",
            parameters: (await import("zod")).z.object({ query: (await import("zod")).z.string() }),
            toInput: ({ query }) => ({ task: query }),
          }),
        ],
        calls: ["wikipedia_search_agent("],
      },
      {
        agent: wiki,
        tools: [createSearchWikipediaTool(source), createSearchInfoTool(page, source)],
        calls: ["search_wikipedia(", "search_info("],
      },
      {
        agent: page,
        tools: [createRetrievePassagesTool(source, "Eiffel Tower")],
        calls: ["retrieve_passages("],
      },
    ];
    for (const { agent, tools, calls } of cases) {
      const out = renderAllPrompts(
        agent.prompts,
        {
          agentName: agent.name,
          agentDescription: agent.description,
          tools,
          capabilities: DEFAULT_CAPABILITIES,
        },
        "a task",
      );
      expect(out.system.startsWith(AGENT_MARKERS[agent.name as keyof typeof AGENT_MARKERS])).toBe(
        true,
      );
      for (const call of calls) {
        expect(out.system).toContain(`async function ${call}`); // rendered tool doc
        expect(out.system).toMatch(
          new RegExp(`Code:\\n\`\`\`js\\n[^]*${call.replace("(", "\\(")}[^]*\`\`\`<end_action>`),
        ); // few-shot example
      }
      expect(out.system).not.toMatch(/\{\{|\}\}/);
    }
  });
});

describe("codehop graph", () => {
  it("gives nested subgraphs unique ids (Mermaid reads a repeated id as a cycle)", async () => {
    const { graphMermaid } = await import("../../src/cli/commands/graph.ts");
    const ids = [...(await graphMermaid("manager")).matchAll(/subgraph (\S+?)\[/g)].map(
      (m) => m[1],
    );
    expect(ids).toEqual(["act", "act_act"]);
    expect(await graphMermaid("manager")).toContain(
      'subgraph act_act["page_search agent (in act)"]',
    );
  });
});

describe("run context schema", () => {
  it("validates a run's context before it starts (LangGraph checks it against the graph's context schema)", async () => {
    const { manager } = await import("../../src/graphs/entries.ts");
    await expect(
      manager.invoke({ question: "q" }, { context: { corpus: 5 } } as any),
    ).rejects.toThrow(/corpus/);
    await expect(
      manager.invoke({ question: "q" }, { context: { models: { manager: 7 } } } as any),
    ).rejects.toThrow(/models/);
  });
});
