import type { RunnableConfig } from "@langchain/core/runnables";
import { cliCommand, type CommandContext } from "../config/cli-command.ts";
import { stateValueProblem, stateValueSchemas } from "../core/state-values.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { AppGraph } from "./app.ts";

/** Writes `update` as a new checkpoint forked off `checkpointId`; returns the fork's id. */
export async function forkWithUpdate(
  graph: AppGraph,
  threadId: string,
  checkpointId: string,
  update: Record<string, unknown>,
  asNode: string | undefined,
  context: CommandContext,
): Promise<string> {
  // LangGraph drops unknown keys silently: name them instead.
  const known = Object.keys(
    (graph as unknown as { channels: Record<string, unknown> }).channels,
  ).filter((k) => !k.startsWith("__") && !k.includes(":"));
  const unknown = Object.keys(update).filter((k) => !known.includes(k));
  if (unknown.length) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Unknown state key(s) ${unknown.join(", ")}. The state has: ${known.sort().join(", ")}.`,
    );
  }
  // A value of the wrong type would only fail inside the forked run, and every resume of the fork
  // the same way: check it against its channel first, so nothing is written.
  const schemas = stateValueSchemas(graph);
  const problems = Object.entries(update).flatMap(([key, value]) => {
    const schema = schemas?.[key];
    const problem = schema && stateValueProblem(schema, value);
    return problem
      ? [`"${key}" = ${short(JSON.stringify(value) ?? String(value), 80)}: ${problem}`]
      : [];
  });
  if (problems.length) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Cannot edit the state at checkpoint ${checkpointId}: ${problems.join("; ")}. ` +
        `Nothing was written. Values are JSON: a string in quotes ('"text"'), numbers and true/false without. ` +
        `See the current values with \`${cliCommand(["history", threadId, "--checkpoint", checkpointId], context)}\`.`,
    );
  }
  let forked: RunnableConfig;
  try {
    forked = await graph.updateState(
      { configurable: { thread_id: threadId, checkpoint_id: checkpointId } },
      update,
      asNode,
    );
  } catch (err) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Cannot edit the state at checkpoint ${checkpointId}: ${(err as Error).message}` +
        (asNode
          ? ` (nodes: ${Object.keys((graph as any).nodes)
              .filter((n) => !n.startsWith("__"))
              .join(", ")})`
          : ""),
      { cause: err },
    );
  }
  return forked.configurable?.checkpoint_id as string;
}

function short(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
