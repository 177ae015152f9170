import { randomUUID } from "node:crypto";
import { Command } from "commander";
import {
  configFromFlags,
  printResult,
  runInTerminal,
  withJsonErrors,
  type RunFlags,
} from "../cli-support.ts";
import { CodehopError, ErrorCodes } from "../../errors.ts";

/** Flags of `codehop research`. */
interface ResearchFlags extends RunFlags {
  thread?: string;
  out?: string;
  maxQuestions?: string;
  source?: string;
}

/** `--max-questions N`: an integer from 1 to 12 (CODEHOP_CONFIG_INVALID otherwise). */
function parseMaxQuestions(value: string | undefined, limit: number): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > limit) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `--max-questions must be a whole number from 1 to ${limit}, got "${value}".`,
    );
  }
  return n;
}

/**
 * `codehop research "<topic>"`: researches a topic with the researcher team and writes a report
 * with numbered citations, every cited sentence checked against its passages.
 */
export default function researchCommand(): Command {
  return new Command("research")
    .description(
      "research a topic and write a cited, verified report (planner → researchers → writer → verifier)",
    )
    .argument("<topic...>", "the topic (quote it, or pass it as several words)")
    .option(
      "--corpus <db>",
      "local corpus DB made by `codehop ingest` (default CODEHOP_CORPUS; unset = online Wikipedia)",
    )
    .option(
      "--source <list>",
      "where to research: web, wikipedia, corpus, or a comma list such as web,corpus (default CODEHOP_SOURCES; unset = the corpus if given, else Wikipedia)",
    )
    .option("--out <file>", "write the report to <file> (Markdown) and beside it as .html")
    .option("--max-questions <n>", "research at most n sub-questions (1-12, default 4)")
    .option("--thread <id>", "thread id to use (default: a new one, printed when the run starts)")
    .option("--home <dir>", "data directory for checkpoints (default CODEHOP_HOME or .codehop)")
    .option("--model <name>", "model for every agent and step (default CODEHOP_MODEL)")
    .option(
      "--json",
      "print one JSON object (report, citations, verification, questions, usage ...) instead of the live tree",
    )
    .option("-q, --quiet", "no live tree; just the report")
    .addHelpText(
      "after",
      "\nModel endpoint: OPENAI_BASE_URL, OPENAI_API_KEY, CODEHOP_MODEL (per agent or step: CODEHOP_MODEL_PLANNER, _RESEARCHER, _PAGE_READER, _CONDENSER, _WRITER, _VERIFIER).",
    )
    .action(async (words: string[], flags: ResearchFlags) => {
      const threadId = flags.thread ?? randomUUID();
      // Checked before anything runs; under --json a bad topic or limit still prints
      // `{ error, thread_id }` on stdout, as `ask` does.
      const { topic, maxQuestions, sources } = await withJsonErrors(flags, threadId, async () => {
        const { checkTopic, MAX_QUESTIONS } = await import("../../apps/research/base/settings.ts");
        const { parseSources } = await import("../../store/source-kinds.ts");
        return {
          topic: checkTopic(words.join(" ")),
          maxQuestions: parseMaxQuestions(flags.maxQuestions, MAX_QUESTIONS),
          sources: flags.source === undefined ? undefined : parseSources(flags.source),
        };
      });
      const config = { ...configFromFlags(flags), ...(sources ? { sources } : {}) };
      // A corpus source without a corpus is refused before the thread is recorded.
      await withJsonErrors(flags, threadId, async () => {
        const { checkSources } = await import("../../apps/research/base/settings.ts");
        checkSources(config);
      });
      // Recorded before the agents are even loaded, so a kill from here on can be resumed.
      const { recordInputEarly } = await import("../../runs/thread-record.ts");
      const { researchRecording } = await import("../../apps/research/recording.ts");
      await recordInputEarly(researchRecording, topic, threadId, config);
      const { research } = await import("../../apps/research/app.ts");
      await runInTerminal(
        flags,
        "codehop research",
        (options) => research(topic, { threadId, config, maxQuestions, ...options }),
        { threadId },
        (result, f) => printResult(result, { ...f, out: flags.out }),
      );
    });
}
