import { describe, expect, it } from "vitest";

describe("the assistant's graphs (langgraph.json)", () => {
  it("draws the assistant with the web agent nested in its act node (xray)", async () => {
    const { assistant, GRAPH_ENTRIES } = await import("../../src/graphs/entries.ts");
    expect(GRAPH_ENTRIES.assistant.agent).toBe("assistant");
    expect(GRAPH_ENTRIES.web_search.agent).toBe("web_search");
    const drawing = await assistant.getGraphAsync({ xray: true });
    const ids = Object.keys(drawing.nodes);
    for (const node of ["start", "planning", "plan", "observe", "final_answer"])
      expect(ids).toContain(node);
    // The web agent's own nodes, inside the assistant's act node.
    for (const node of ["act:planning", "act:plan", "act:act", "act:observe", "act:final_answer"])
      expect(ids).toContain(node);
  });

  it("lists the contract's tool names in the agents' prompts", async () => {
    const { createAssistantAgent, createWebSearchAgent } =
      await import("../../src/apps/assistant/team.ts");
    const web = createWebSearchAgent();
    const manager = createAssistantAgent();
    expect(web.settings.planningInterval).toBe(5);
    expect(manager.settings.planningInterval).toBe(2);
    const { renderToolDoc } = await import("../../src/tools/define-tool.ts");
    const { createWebTools } = await import("../../src/apps/assistant/tools/web.ts");
    const { resolveWebSettings } = await import("../../src/web/settings.ts");
    const tools = createWebTools({
      config: {},
      steps: [],
      settings: resolveWebSettings({}),
      agent: "web_search",
      files: {},
    });
    expect(tools.map(renderToolDoc).map((d) => d.split("\n").at(-1))).toEqual([
      "async function web_search(query: string): Promise<string>",
      "async function visit_page(url: string): Promise<string>",
      "async function page_down(): Promise<string>",
      "async function page_up(): Promise<string>",
      "async function find_in_page(text: string): Promise<string>",
      "async function find_next(): Promise<string>",
      "async function archive_search(url: string, date: string): Promise<string>",
      "async function download_file(url: string): Promise<string>",
    ]);
    const { createInspectFileTool } =
      await import("../../src/apps/assistant/tools/inspect-file.ts");
    const { createVisualizerTool } = await import("../../src/apps/assistant/tools/visualizer.ts");
    expect(renderToolDoc(createInspectFileTool({})).split("\n").at(-1)).toBe(
      "async function inspect_file(path: string, question?: string): Promise<string>",
    );
    expect(renderToolDoc(createVisualizerTool({})).split("\n").at(-1)).toBe(
      "async function visualizer(image: string, question: string): Promise<string>",
    );
  });
});
