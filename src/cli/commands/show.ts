import { Command } from "commander";
import { configFromFlags, withSnakeCaseKeys, type RunFlags } from "../cli-support.ts";
import { colorsFor } from "../../config/colors.ts";

/** `codehop show <thread>`: the whole run as a tree (manager steps with nested sub-agent runs). */
export default function showCommand(): Command {
  return new Command("show")
    .description(
      "print a thread's run as a tree: manager steps with every sub-agent call nested, from its checkpoints",
    )
    .argument("<thread>", "thread id (see `codehop threads`)")
    .option("--home <dir>", "data directory (default CODEHOP_HOME or .codehop)")
    .option("--width <n>", "line width", String(Math.max(60, (process.stdout.columns ?? 120) - 2)))
    .option("--json", "print the tree as JSON")
    .action(async (threadId: string, flags: RunFlags & { width: string }) => {
      const { traceOfThread: trace } = await import("../../apps/index.ts");
      const progress = await trace(threadId, { config: configFromFlags(flags) });
      if (flags.json) {
        process.stdout.write(`${JSON.stringify(withSnakeCaseKeys(progress.root ?? null))}\n`);
        return;
      }
      const width = Math.max(40, Number.parseInt(flags.width, 10) || 110);
      const colors = colorsFor(process.stdout);
      process.stdout.write(`${progress.render("…", width, { expand: true, colors }).join("\n")}\n`);
    });
}
