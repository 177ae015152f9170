import { Command } from "commander";
import { CodehopError, ErrorCodes } from "../../errors.ts";

const GRAPHS: Record<string, string> = {
  manager: "../../graphs/manager.ts",
  wikipedia_search: "../../graphs/wikipedia-search.ts",
  page_search: "../../graphs/page-search.ts",
  code_agent: "../../graphs/code-agent.ts",
};

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
  return (await mod.graph.getGraphAsync({ xray })).drawMermaid();
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
