import { randomUUID } from "node:crypto";
import { Command } from "commander";
import { configFromFlags, runInTerminal, type RunFlags } from "../cli-support.ts";

/** `codehop ask "<question>"`: answers a question with the three agents, checkpointing every step. */
export default function askCommand(): Command {
  return new Command("ask")
    .description("answer a question with the manager → wikipedia_search → page_search agents")
    .argument("<question...>", "the question (quote it, or pass it as several words)")
    .option("--thread <id>", "thread id to use (default: a new one, printed when the run starts)")
    .option(
      "--corpus <db>",
      "local corpus DB made by `codehop ingest` (default CODEHOP_CORPUS; unset = online Wikipedia)",
    )
    .option("--home <dir>", "data directory for checkpoints (default CODEHOP_HOME or .codehop)")
    .option("--model <name>", "model for every agent (default CODEHOP_MODEL)")
    .option(
      "--json",
      "print one JSON object (answer, thread_id, usage, sources ...) instead of the live tree",
    )
    .option("-q, --quiet", "no live tree; just the answer")
    .option(
      "--verify",
      "check each claim of the answer against passages of its source pages (the JSON gains citations and verification)",
    )
    .addHelpText(
      "after",
      "\nModel endpoint: OPENAI_BASE_URL, OPENAI_API_KEY, CODEHOP_MODEL (per agent: CODEHOP_MODEL_MANAGER, _WIKIPEDIA_SEARCH, _PAGE_SEARCH; the --verify step: CODEHOP_MODEL_VERIFIER).",
    )
    .action(async (words: string[], flags: RunFlags & { thread?: string; verify?: boolean }) => {
      const threadId = flags.thread ?? randomUUID();
      const question = words.join(" ");
      const config = configFromFlags(flags);
      // Recorded before the agents are even loaded, so a kill from here on can be resumed.
      const { recordInputEarly } = await import("../../runs/thread-record.ts");
      const { qaRecording } = await import("../../apps/qa/recording.ts");
      await recordInputEarly(qaRecording, question, threadId, config);
      const { ask } = await import("../../apps/qa/app.ts");
      await runInTerminal(
        flags,
        "codehop ask",
        (options) => ask(question, { threadId, config, verify: flags.verify, ...options }),
        { threadId, config },
      );
    });
}
