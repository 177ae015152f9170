import { Command } from "commander";
import { configFromFlags, runInTerminal, type RunFlags } from "../cli-support.ts";

/** `codehop resume <thread>`: continues a crashed / interrupted / failed run from its last checkpoint. */
export default function resumeCommand(): Command {
  return new Command("resume")
    .description(
      "continue a thread from its last checkpoint (finished sub-agent calls are not repeated)",
    )
    .argument("<thread>", "thread id (see `codehop threads`)")
    .option("--corpus <db>", "local corpus DB (default: the one the thread was started with)")
    .option("--home <dir>", "data directory (default CODEHOP_HOME or .codehop)")
    .option("--model <name>", "model for every agent (default CODEHOP_MODEL)")
    .option("--json", "print one JSON object when the run ends")
    .option("-q, --quiet", "no live tree")
    .action(async (threadId: string, flags: RunFlags) => {
      const { resume } = await import("../../app/run.ts");
      await runInTerminal(
        flags,
        "codehop resume",
        (options) => resume(threadId, { config: configFromFlags(flags), ...options }),
        { threadId },
      );
    });
}
