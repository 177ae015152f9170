import { Command } from "commander";
import { addContinueFlags, configFromFlags, runInTerminal, type RunFlags } from "../cli-support.ts";
import { CodehopError, ErrorCodes } from "../../errors.ts";

function parseSet(pairs: string[]): Record<string, unknown> | undefined {
  if (!pairs.length) return undefined;
  const update: Record<string, unknown> = {};
  for (const pair of pairs) {
    const i = pair.indexOf("=");
    if (i <= 0)
      throw new CodehopError(ErrorCodes.CONFIG_INVALID, `--set expects key=value, got "${pair}"`);
    const raw = pair.slice(i + 1);
    let value: unknown = raw;
    try {
      value = JSON.parse(raw);
    } catch {
      // not JSON: keep the string as given
    }
    update[pair.slice(0, i)] = value;
  }
  return update;
}

/** `codehop replay <thread> --checkpoint <id>`: re-runs (forks) a thread from one of its checkpoints. */
export default function replayCommand(): Command {
  return addContinueFlags(
    new Command("replay")
      .description(
        "re-run a thread from one of its checkpoints; the new run forks a branch and the old history stays",
      )
      .argument("<thread>", "thread id")
      .requiredOption(
        "--checkpoint <id>",
        "checkpoint to start from (see `codehop history <thread>`)",
      )
      .option(
        "--set <key=json...>",
        "edit state values before re-running (e.g. --set 'question=\"...\"'), forking with updateState",
      )
      .option(
        "--as-node <node>",
        "node the edit is attributed to (default: the node that wrote the checkpoint)",
      ),
  ).action(
    async (
      threadId: string,
      flags: RunFlags & { checkpoint: string; set?: string[]; asNode?: string },
    ) => {
      const update = parseSet(flags.set ?? []);
      const { replayThread: replay } = await import("../../apps/run-thread.ts");
      await runInTerminal(
        flags,
        "codehop replay",
        (options) =>
          replay(threadId, flags.checkpoint, {
            config: configFromFlags(flags),
            update,
            asNode: flags.asNode,
            ...options,
          }),
        { threadId, config: configFromFlags(flags) },
      );
    },
  );
}
