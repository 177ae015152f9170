import { Command } from "commander";
import { addContinueFlags, configFromFlags, runInTerminal, type RunFlags } from "../cli-support.ts";

/** `codehop resume <thread>`: continues a crashed / interrupted / failed run from its last checkpoint. */
export default function resumeCommand(): Command {
  return addContinueFlags(
    new Command("resume")
      .description(
        "continue a thread from its last checkpoint (finished sub-agent calls are not repeated)",
      )
      .argument("<thread>", "thread id (see `codehop threads`)"),
  ).action(async (threadId: string, flags: RunFlags) => {
    const { resumeThread: resume } = await import("../../apps/index.ts");
    await runInTerminal(
      flags,
      "codehop resume",
      (options) => resume(threadId, { config: configFromFlags(flags), ...options }),
      { threadId },
    );
  });
}
