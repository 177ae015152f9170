import { Command } from "commander";
import { addContinueFlags, configFromFlags, runInTerminal, type RunFlags } from "../cli-support.ts";
import { decisionFromFlags } from "../approval-prompt.ts";

/** Flags of `codehop resume`: the run flags plus the answer to a pending approval. */
interface ResumeFlags extends RunFlags {
  approve?: boolean;
  reject?: string;
  edit?: string;
  approvalId?: string;
  verify?: boolean;
}

/**
 * `codehop resume <thread>`: continues a crashed / interrupted / failed run from its last
 * checkpoint, or answers the approval it waits for (--approve, --reject "why", --edit '<json>').
 */
export default function resumeCommand(): Command {
  return addContinueFlags(
    new Command("resume")
      .description(
        "continue a thread from its last checkpoint (finished sub-agent calls are not repeated), or answer the approval it waits for",
      )
      .argument("<thread>", "thread id (see `codehop threads`)")
      .option("--approve", "approve the tool call the thread waits for")
      .option("--reject <reason>", "reject it; the agent gets the reason as the call's error")
      .option(
        "--edit <json>",
        "run it with these arguments instead (a JSON object by parameter name)",
      )
      .option(
        "--verify",
        "verify the answer of a QA thread once it has one, as ask --verify (a finished thread: again, without re-running it)",
      )
      .option(
        "--approval-id <id>",
        "the approval to answer when the thread waits for several (without it: the one pending)",
      ),
  )
    .addHelpText(
      "after",
      `\nA run that pauses for an approval exits with code 3 (in a terminal, it asks instead).`,
    )
    .action(async (threadId: string, flags: ResumeFlags) => {
      const approval = decisionFromFlags(flags);
      const { resumeThread: resume } = await import("../../apps/run-thread.ts");
      const config = configFromFlags(flags);
      await runInTerminal(
        flags,
        "codehop resume",
        (options) =>
          resume(threadId, {
            config,
            ...options,
            ...(approval ? { approval } : {}),
            ...(flags.verify ? { verify: true } : {}),
          }),
        { threadId, config },
      );
    });
}
