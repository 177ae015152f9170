import { Command } from "commander";
import { CodehopError, ErrorCodes } from "../../errors.ts";

/** What a drawing needs of a compiled graph. */
interface Drawable {
  name?: string;
  getGraphAsync(o: { xray: boolean }): Promise<{ drawMermaid(): string }>;
  getSubgraphsAsync?(): AsyncIterable<[string, unknown]>;
}

/**
 * The agent LangGraph draws inside each node at each depth, read from the graphs themselves: every
 * code agent's compiled graph carries its agent's name. A node holding several agents (an agent with
 * several team members) is drawn with one of them — the last, as LangGraph keeps one subgraph per
 * node name — so the label names that one and how many the node calls.
 */
async function drawnAgents(
  graph: Drawable,
): Promise<Array<{ name: string; of: number; inner: unknown }>> {
  const byNode = new Map<string, Drawable[]>();
  for await (const [node, sub] of graph.getSubgraphsAsync?.() ?? []) {
    const list = byNode.get(node) ?? [];
    list.push(sub as Drawable);
    byNode.set(node, list);
  }
  const out: Array<{ name: string; of: number; inner: unknown }> = [];
  for (const subs of byNode.values()) {
    const drawn = subs.at(-1)!;
    out.push({ name: drawn.name ?? "agent", of: subs.length, inner: drawn });
  }
  return out;
}

/**
 * LangGraph names every expanded subgraph after the node that holds it, so a nested drawing has a
 * `subgraph act` inside another `subgraph act` — the same id twice, which Mermaid reads as a cycle.
 * Give each a unique id (its path) and a label naming the agent drawn there.
 */
export async function labelSubgraphs(mermaid: string, graph: Drawable): Promise<string> {
  // One agent per depth along the drawn path (each agent node holds one drawn child).
  const labels: string[] = [];
  let cursor: Drawable | undefined = graph;
  while (cursor) {
    const [child] = await drawnAgents(cursor);
    if (!child) break;
    labels.push(
      child.of > 1
        ? `${child.name} agent (1 of ${child.of} in act)`
        : `${child.name} agent (in act)`,
    );
    cursor = child.inner as Drawable;
  }
  const stack: string[] = [];
  return mermaid
    .split("\n")
    .map((line) => {
      const open = /^(\s*)subgraph (\S+)$/.exec(line);
      if (open) {
        stack.push(open[2]);
        const label = labels[stack.length - 1]?.replace("(in act)", `(in ${open[2]})`) ?? open[2];
        return `${open[1]}subgraph ${stack.join("_")}["${label}"]`;
      }
      if (/^\s*end$/.test(line)) stack.pop();
      return line;
    })
    .join("\n");
}

/** Mermaid source of one of the langgraph.json graphs, drawn by LangGraph from the real graph. */
export async function graphMermaid(name: string, xray = true): Promise<string> {
  const { GRAPH_ENTRIES } = await import("../../graphs/entries.ts");
  const entry = GRAPH_ENTRIES[name];
  if (!entry) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Unknown graph "${name}". Choose from: ${Object.keys(GRAPH_ENTRIES).join(", ")}.`,
    );
  }
  const graph = entry.graph as Drawable;
  return labelSubgraphs((await graph.getGraphAsync({ xray })).drawMermaid(), graph);
}

/** `codehop graph [name]`: prints a graph as Mermaid (nested agents expanded with --xray, the default). */
export default function graphCommand(): Command {
  return new Command("graph")
    .description(
      "print a graph from langgraph.json (manager, wikipedia_search, page_search, code_agent ...) as Mermaid, drawn from the real graph",
    )
    .argument("[name]", "graph name from langgraph.json", "manager")
    .option("--no-xray", "do not expand nested agents")
    .action(async (name: string, flags: { xray: boolean }) => {
      process.stdout.write(`${await graphMermaid(name, flags.xray)}\n`);
    });
}
