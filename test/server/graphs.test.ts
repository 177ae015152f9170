import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemorySaver } from "@langchain/langgraph";
import { describe, expect, it } from "vitest";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import { assistantIdOf, loadGraphs } from "../../src/server/graphs.ts";

// The graphs `codehop serve` and `codehop worker` serve come from a langgraph.json.

const graphsFile = (graphs: Record<string, string>, files: Record<string, string>) => {
  const dir = mkdtempSync(join(tmpdir(), "codehop-graphs-"));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, ".."), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  writeFileSync(join(dir, "langgraph.json"), JSON.stringify({ graphs }));
  return join(dir, "langgraph.json");
};

const fakeGraph = "export const g = { stream: async () => [], marker: 'built' };\n";

describe("graphs of a langgraph.json", () => {
  it("derives assistant ids as the LangGraph server does (agent-chat-ui's default for 'agent')", () => {
    expect(assistantIdOf("agent")).toBe("fe096781-5601-53d2-b2f6-0d3403f7e9ca");
  });

  it("resolves a graph by name or assistant id and attaches the server's checkpointer", async () => {
    const saver = new MemorySaver();
    const file = graphsFile({ mine: "./graphs/g.js:g" }, { "graphs/g.js": fakeGraph });
    const registry = await loadGraphs(file, saver);
    expect(registry.ids).toEqual(["mine"]);
    const byId = registry.resolve(assistantIdOf("mine"));
    expect(byId?.graphId).toBe("mine");
    expect(byId?.graph.checkpointer).toBe(saver);
    expect(registry.resolve("other")).toBeUndefined();
  });

  it("imports dist/*.js for a src/*.ts graph when only the build is installed", async () => {
    const file = graphsFile({ mine: "./src/graphs/g.ts:g" }, { "dist/graphs/g.js": fakeGraph });
    const registry = await loadGraphs(file, new MemorySaver());
    expect((registry.resolve("mine")?.graph as unknown as { marker: string }).marker).toBe("built");
  });

  it("names the graph and the file when a graph cannot be loaded or is not a graph", async () => {
    for (const [target, files, says] of [
      ["./missing.ts:g", {}, 'Cannot load graph "mine"'],
      ["./g.js:nothing", { "g.js": fakeGraph }, 'Graph "mine" (./g.js:nothing) is not a compiled'],
    ] as const) {
      const err = await loadGraphs(graphsFile({ mine: target }, files), new MemorySaver()).catch(
        (e: unknown) => e,
      );
      expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.CONFIG_INVALID);
      expect((err as Error).message).toContain(says);
    }
  });
});
