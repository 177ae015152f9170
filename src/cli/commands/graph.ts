import { Command } from "commander";
import { CodehopError, ErrorCodes } from "../../errors.ts";

const GRAPHS: Record<string, string> = {
  manager: "../../graphs/manager.ts",
  wikipedia_search: "../../graphs/wikipedia-search.ts",
  page_search: "../../graphs/page-search.ts",
  code_agent: "../../graphs/code-agent.ts",
};

/** The agents each graph's act nodes call, by nesting depth. */
const NESTED_AGENTS: Record<string, string[]> = {
  manager: ["wikipedia_search", "page_search"],
  wikipedia_search: ["page_search"],
  page_search: [],
  code_agent: [],
};

/**
 * LangGraph names every expanded subgraph after the node that holds it, so the manager's drawing
 * nests a `subgraph act` inside another `subgraph act` — the same id twice, which Mermaid reads as
 * a cycle. Give each a unique id (its path) and a label naming the agent it is.
 */
export function uniqueSubgraphs(mermaid: string, graph: string): string {
  const stack: string[] = [];
  return mermaid
    .split("\n")
    .map((line) => {
      const open = /^(\s*)subgraph (\S+)$/.exec(line);
      if (open) {
        stack.push(open[2]);
        const agent = NESTED_AGENTS[graph]?.[stack.length - 1];
        const label = agent ? `${agent} agent (in ${open[2]})` : open[2];
        return `${open[1]}subgraph ${stack.join("_")}["${label}"]`;
      }
      if (/^\s*end$/.test(line)) stack.pop();
      return line;
    })
    .join("\n");
}

/** Mermaid source of one of the langgraph.json graphs, drawn by LangGraph from the real graph. */
export async function graphMermaid(name: string, xray = true): Promise<string> {
  const path = GRAPHS[name];
  if (!path) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Unknown graph "${name}". Choose from: ${Object.keys(GRAPHS).join(", ")}.`,
    );
  }
  const mod = (await import(new URL(path, import.meta.url).href)) as {
    graph: { getGraphAsync(o: { xray: boolean }): Promise<{ drawMermaid(): string }> };
  };
  return uniqueSubgraphs((await mod.graph.getGraphAsync({ xray })).drawMermaid(), name);
}

/** `codehop graph [name]`: prints a graph as Mermaid (nested agents expanded with --xray, the default). */
export default function graphCommand(): Command {
  return new Command("graph")
    .description(
      "print a graph (manager, wikipedia_search, page_search, code_agent) as Mermaid, drawn from the real graph",
    )
    .argument("[name]", "graph name from langgraph.json", "manager")
    .option("--no-xray", "do not expand nested agents")
    .action(async (name: string, flags: { xray: boolean }) => {
      process.stdout.write(`${await graphMermaid(name, flags.xray)}\n`);
    });
}
