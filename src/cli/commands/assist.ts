import { randomUUID } from "node:crypto";
import { Command, Option } from "commander";
import { configFromFlags, runInTerminal, type RunFlags } from "../cli-support.ts";

/** Flags of `codehop assist`. */
interface AssistFlags extends RunFlags {
  thread?: string;
  file: string[];
  browser?: "text" | "chromium" | "auto";
}

/**
 * `codehop assist "<task>" [--file f ...]`: solves a task with the general assistant (assistant →
 * web_search: web search and browsing, the task's files, images, audio, code), checkpointing every
 * step.
 */
export default function assistCommand(): Command {
  return new Command("assist")
    .description(
      "solve a task with the general assistant (assistant → web_search): the web, attached files, images, audio and code",
    )
    .argument("<task...>", "the task (quote it, or pass it as several words)")
    .option(
      "--file <path>",
      "a file the task comes with (PDF, Word, Excel, CSV, PowerPoint, JSON, XML, ZIP, text, image, audio); repeat for more",
      (value: string, all: string[]) => [...all, value],
      [],
    )
    .addOption(
      new Option(
        "--browser <mode>",
        "how pages are read (default CODEHOP_BROWSER or auto)",
      ).choices(["text", "chromium", "auto"]),
    )
    .option("--thread <id>", "thread id to use (default: a new one, printed when the run starts)")
    .option(
      "--home <dir>",
      "data directory for checkpoints and the task's files (default CODEHOP_HOME or .codehop)",
    )
    .option("--model <name>", "model for every agent (default CODEHOP_MODEL)")
    .option(
      "--json",
      "print one JSON object (answer, thread_id, usage, sources ...) instead of the live tree",
    )
    .option("-q, --quiet", "no live tree; just the answer")
    .addHelpText(
      "after",
      "\nModel endpoint: OPENAI_BASE_URL, OPENAI_API_KEY, CODEHOP_MODEL (per agent: CODEHOP_MODEL_ASSISTANT, _WEB_SEARCH; file questions: _INSPECTOR; images: _VISUALIZER, a multimodal model).\nWeb: CODEHOP_SEARCH_PROVIDER (searxng, brave, tavily, serper), CODEHOP_SEARCH_URL, CODEHOP_SEARCH_API_KEY; audio: CODEHOP_TRANSCRIPTION_BASE_URL. See docs/assistant.md.",
    )
    .action(async (words: string[], flags: AssistFlags) => {
      const threadId = flags.thread ?? randomUUID();
      const task = words.join(" ");
      const config = configFromFlags(flags);
      // Recorded before the agents are even loaded, so a kill from here on can be resumed.
      const { recordInputEarly } = await import("../../runs/thread-record.ts");
      const { assistantRecording } = await import("../../apps/assistant/recording.ts");
      await recordInputEarly(assistantRecording, task, threadId, config);
      const { assist } = await import("../../apps/assistant/app.ts");
      await runInTerminal(
        flags,
        "codehop assist",
        (options) =>
          assist(task, {
            threadId,
            config,
            files: flags.file,
            ...(flags.browser ? { web: { browser: flags.browser } } : {}),
            ...options,
          }),
        { threadId, config },
      );
    });
}
