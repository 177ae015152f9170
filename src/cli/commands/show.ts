import { Command, Option } from "commander";
import { wholeNumberOption } from "../option-values.ts";
import {
  configFromFlags,
  verificationLines,
  withSnakeCaseKeys,
  type RunFlags,
} from "../cli-support.ts";
import { colorsFor } from "../../config/colors.ts";

/** `codehop show <thread>`: the whole run as a tree (manager steps with nested sub-agent runs). */
export default function showCommand(): Command {
  return new Command("show")
    .description(
      "print a thread's run as a tree: manager steps with every sub-agent call nested, from its checkpoints",
    )
    .argument("<thread>", "thread id (see `codehop threads`)")
    .option("--home <dir>", "data directory (default CODEHOP_HOME or .codehop)")
    .addOption(
      new Option("--width <n>", "line width")
        .argParser(wholeNumberOption("--width", 40, 1000))
        .default(undefined, "the terminal's width, else 110"),
    )
    .option("--json", "print the tree as JSON")
    .action(async (threadId: string, flags: RunFlags & { width?: number }) => {
      const { traceOfThread: trace } = await import("../../apps/inspect.ts");
      const { verificationOf } = await import("../../apps/qa/verification-record.ts");
      const config = configFromFlags(flags);
      const progress = await trace(threadId, { config });
      // The answer's verification (ask --verify, resume --verify), recorded with the thread.
      const recorded = await verificationOf(threadId, { config });
      if (flags.json) {
        // The tree's root, plus `citations` and `verification` (as `ask --json --verify` prints
        // them, with when and at which checkpoint) when one is recorded: added keys only.
        const root = progress.root ? withSnakeCaseKeys(progress.root) : null;
        const out =
          root && recorded
            ? {
                ...(root as object),
                citations: recorded.citations,
                verification: {
                  ...recorded.verification,
                  verified_at: recorded.verified_at,
                  checkpoint_id: recorded.checkpoint_id,
                },
              }
            : root;
        process.stdout.write(`${JSON.stringify(out)}\n`);
        return;
      }
      const width =
        flags.width ?? (process.stdout.columns ? Math.max(60, process.stdout.columns - 2) : 110);
      const colors = colorsFor(process.stdout);
      process.stdout.write(`${progress.render("…", width, { expand: true, colors }).join("\n")}\n`);
      if (recorded) {
        const when = recorded.verified_at.replace("T", " ").slice(0, 16);
        process.stdout.write(
          `${[`Verified ${when} UTC:`, ...verificationLines(recorded)].join("\n")}\n`,
        );
      }
    });
}
