import { randomUUID } from "node:crypto";
import { Command, Option } from "commander";
import { wholeNumberOption } from "../option-values.ts";
import { printResult, runInTerminal, type RunFlags } from "../cli-support.ts";
import { cliCommand, placeholder, type CommandContext } from "../../config/cli-command.ts";
import { DEMO_QUESTIONS } from "../../apps/qa/demo-trajectories.ts";
import { CodehopError, ErrorCodes } from "../../errors.ts";
import { renderPrompt } from "../../prompts/render.ts";
import type { Responder } from "../../testing/scripted-openai-server.ts";

/** Printed once, before the first question. */
const SCRIPTED_NOTE =
  "NOTE: the model in this demo is SCRIPTED. A local OpenAI-compatible server replays recorded replies\n" +
  "(src/apps/qa/demo-trajectories.ts, src/apps/research/demo-trajectories.ts) over real HTTP; the agents,\n" +
  "sandbox, tools, corpus search, citations, verification and SQLite checkpoints are real. How to use a\n" +
  "real model is printed at the end.";

/** The `--question` name of the scripted research run (src/apps/research/demo-trajectories.ts). */
const RESEARCH_DEMO = "research";

/** Printed once, at the end: how to run the same question with a real model. */
function realModelHelp(corpus: string, topic: string, context: CommandContext): string {
  return [
    "To use a real model instead of the scripted one:",
    "  export OPENAI_BASE_URL=http://localhost:8000/v1   # vLLM (or http://localhost:11434/v1 for Ollama; unset for OpenAI)",
    "  export OPENAI_API_KEY=...                         # required for OpenAI; any string for local servers",
    "  export CODEHOP_MODEL=Qwen/Qwen2.5-7B-Instruct     # or gpt-4o-mini, qwen2.5:7b ...",
    `  ${cliCommand(["doctor"], { home: context.home })}   # checks the endpoint and the data directory`,
    `  ${cliCommand(["ask", DEMO_QUESTIONS.plywood], { ...context, corpus })}   # omit --corpus for online Wikipedia`,
    `  ${cliCommand(["research", topic, "--out", "report.md"], { ...context, corpus })}`,
  ].join("\n");
}

/**
 * `responder`, plus the replies `codehop doctor` asks for (its "ready" completion and its
 * stop-sequence probe, whose line the server then cuts at the stop sequence as real servers do),
 * so doctor passes against `demo --serve`.
 */
function answeringDoctor(responder: Responder): Responder {
  const ready = renderPrompt("doctor/ready.md", {}).trim();
  const [probeHead] = renderPrompt("doctor/stop-probe.md", { line: "\u0000" }).split("\u0000");
  return (req, ctx) => {
    const [only, ...more] = req.messages;
    const text = only?.role === "user" && !more.length ? only.content.trim() : undefined;
    if (text === ready) return "ready";
    if (text?.startsWith(probeHead.trim())) return text.slice(probeHead.trim().length).trim();
    return responder(req, ctx);
  };
}

/** `codehop demo`: the offline demo — real agents over the demo corpus with a scripted model. */
export default function demoCommand(): Command {
  return new Command("demo")
    .description(
      "offline demo: the QA agents answer demo questions (or the research team writes a report, --question research) over data/demo-corpus.jsonl with a scripted model",
    )
    .option(
      "--question <name>",
      `which demo: ${[...Object.keys(DEMO_QUESTIONS), RESEARCH_DEMO].join(", ")} (a research report), chat (a scripted file dialogue), assistant (the general assistant over a local website, a PDF and a spreadsheet), or all (every one but chat and assistant)`,
      "plywood,towers",
    )
    .option("--home <dir>", "data directory (default CODEHOP_HOME or .codehop)")
    .option("--json", "print one JSON object per question")
    .option(
      "--out <file>",
      "research demo: write the report to <file> (Markdown) and beside it as .html",
    )
    .option("-q, --quiet", "no live tree")
    .option(
      "--serve",
      "only start the scripted model server and print how to point codehop at it (Ctrl-C to stop)",
    )
    .addOption(
      new Option("--port <n>", "port of the scripted model server")
        .argParser(wholeNumberOption("--port", 0, 65_535))
        .default(0, "a free port"),
    )
    .option(
      "--delay <ms>",
      "simulated model latency per reply, to watch the live tree",
      wholeNumberOption("--delay", 0, 600_000),
      250,
    )
    .action(
      async (
        flags: RunFlags & {
          question: string;
          serve?: boolean;
          port: number;
          delay: number;
          out?: string;
        },
      ) => {
        const { loadAppConfig } = await import("../../runs/config.ts");
        const config = loadAppConfig(flags.home ? { home: flags.home } : {});
        const context: CommandContext = { home: flags.home };
        const thread = placeholder("thread");
        const choices = [...Object.keys(DEMO_QUESTIONS), RESEARCH_DEMO];
        const asked =
          flags.question === "all" ? choices : flags.question.split(",").map((s) => s.trim());
        // "chat" is the conversation demo (src/cli/chat-demo.ts), "assistant" the general
        // assistant's (src/cli/assistant-demo.ts); the rest run over the demo corpus.
        const names = asked.filter((n) => n !== "chat" && n !== "assistant");
        for (const n of names) {
          if (!choices.includes(n)) {
            throw new CodehopError(
              ErrorCodes.CONFIG_INVALID,
              `Unknown demo question "${n}". Choose from: ${choices.join(", ")}, chat, assistant, all.`,
            );
          }
        }
        // --out is the research report's: refused before anything runs when no research is asked.
        if (flags.out !== undefined && !names.includes(RESEARCH_DEMO))
          throw new CodehopError(
            ErrorCodes.CONFIG_INVALID,
            `--out writes the research demo's report: add --question research (asked: ${asked.join(", ")}).`,
          );
        if (asked.includes("chat") && !flags.serve) {
          const { runChatDemo } = await import("../chat-demo.ts");
          await runChatDemo(flags, config.home);
          if (!names.length && !asked.includes("assistant")) return;
        }
        if (asked.includes("assistant") && !flags.serve) {
          const { runAssistantDemo } = await import("../assistant-demo.ts");
          await runAssistantDemo(flags, config.home);
          if (!names.length) return;
        }
        // Loaded on use: keeps `codehop --help` and the other commands fast to start.
        const { ensureDemoCorpus, startDemoModelServer } = await import("../../apps/qa/demo.ts");
        const { ask } = await import("../../apps/qa/app.ts");
        const { allDemosResponder, DEMO_RESEARCH } =
          await import("../../apps/research/demo-trajectories.ts");
        const corpus = await ensureDemoCorpus(config.home);
        // One scripted server for every demo (QA questions and the research run), so a demo
        // thread of either app can be resumed or replayed against `--serve`.
        const server = await startDemoModelServer({
          responder: answeringDoctor(allDemosResponder()),
          port: flags.port,
          delayMs: flags.delay,
        });
        if (flags.serve) {
          // The commands answer with the scripted model: doctor's probes, the research demo's
          // topic over the demo corpus, and the demo threads (resume, replay).
          const env = `OPENAI_BASE_URL=${server.baseURL} OPENAI_API_KEY=scripted CODEHOP_MODEL=scripted`;
          process.stderr.write(
            [
              `Scripted model server listening at ${server.baseURL} (demo corpus: ${corpus}).`,
              "In another terminal, point codehop at it and run:",
              `  export ${env}`,
              `  ${cliCommand(["doctor"], context)}   # checks the (scripted) endpoint`,
              `  ${cliCommand(["research", DEMO_RESEARCH.topic, "--out", "report.md"], { ...context, corpus })}   # the research demo's topic`,
              `  ${cliCommand(["resume", thread], context)}  /  ${cliCommand(["replay", thread, "--checkpoint", placeholder("id")], context)}   # a demo thread`,
              "Ctrl-C stops it.",
              "",
            ].join("\n"),
          );
          await new Promise<void>((resolve) => process.once("SIGINT", () => resolve()));
          await server.close();
          return;
        }
        const threads: string[] = [];
        try {
          if (!flags.json) process.stderr.write(`${SCRIPTED_NOTE}\n\n`);
          // The demo ignores OPENAI_* / CODEHOP_MODEL on purpose: it always uses the scripted server.
          const demoConfig = {
            home: config.home,
            corpus,
            baseURL: server.baseURL,
            apiKey: "scripted",
            model: "scripted-demo",
            models: {},
          };
          for (const name of names) {
            const threadId = randomUUID();
            threads.push(`${name} ${threadId}`);
            if (name === RESEARCH_DEMO) {
              if (!flags.json) process.stderr.write(`Research topic: ${DEMO_RESEARCH.topic}\n`);
              const { research } = await import("../../apps/research/app.ts");
              await runInTerminal(
                flags,
                "codehop demo (research)",
                (options) =>
                  research(DEMO_RESEARCH.topic, { threadId, config: demoConfig, ...options }),
                undefined,
                (result, f) => printResult(result, { ...f, out: flags.out }),
              );
              continue;
            }
            const question = DEMO_QUESTIONS[name as keyof typeof DEMO_QUESTIONS];
            if (!flags.json) process.stderr.write(`Question: ${question}\n`);
            await runInTerminal(flags, `codehop demo (${name})`, (options) =>
              ask(question, { threadId, config: demoConfig, ...options }),
            );
          }
          if (!flags.json) {
            process.stderr.write(
              [
                "",
                `Checkpoints and the call journal are in ${config.home}/checkpoints.db (threads: ${threads.join(", ")}). Try:`,
                `  ${cliCommand(["threads"], context)}   # the demo threads`,
                `  ${cliCommand(["show", thread], context)}   # a whole run as a tree`,
                `  ${cliCommand(["history", thread], context)}   # its checkpoints`,
                `  ${cliCommand(["history", thread, "--checkpoint", placeholder("id")], context)}   # the state at one step`,
                `  ${cliCommand(["demo", "--serve"], context)}   # then, in another terminal, with the printed OPENAI_BASE_URL:`,
                `  ${cliCommand(["resume", thread], context)}  /  ${cliCommand(["replay", thread, "--checkpoint", placeholder("id")], context)}`,
                "",
                realModelHelp(corpus, DEMO_RESEARCH.topic, context),
                "",
              ].join("\n"),
            );
          }
        } finally {
          await server.close();
        }
      },
    );
}
