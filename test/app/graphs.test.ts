import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";

const root = process.cwd();
const langgraph = JSON.parse(readFileSync(join(root, "langgraph.json"), "utf8")) as {
  graphs: Record<string, string>;
};

describe("graphs exported for langgraph.json", () => {
  it("lists the three reference agents and the generic code agent", () => {
    expect(Object.keys(langgraph.graphs).sort()).toEqual([
      "code_agent",
      "manager",
      "page_search",
      "wikipedia_search",
    ]);
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
    const { graph } = await import("../../src/graphs/manager.ts");
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

  it("is importable as the package entry", async () => {
    const api = await import("codehop");
    for (const name of [
      "createManagerGraph",
      "ask",
      "resume",
      "replay",
      "history",
      "createCodeAgent",
      "openKnowledgeSource",
      "openPersistence",
    ]) {
      expect(typeof (api as Record<string, unknown>)[name]).toBe("function");
    }
  });
});

describe("docs/app.md", () => {
  it("shows the architecture diagram LangGraph draws from the real manager graph", async () => {
    const { graphMermaid } = await import("../../src/cli/commands/graph.ts");
    const doc = readFileSync(join(root, "docs/app.md"), "utf8");
    const block = /```mermaid\n([\s\S]*?)\n```/.exec(doc)?.[1];
    expect(block).toBe((await graphMermaid("manager")).trimEnd());
  });
});
