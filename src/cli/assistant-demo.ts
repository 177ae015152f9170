import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { runInTerminal, type RunFlags } from "./cli-support.ts";
import { cliCommand } from "../config/cli-command.ts";

const SCRIPTED_NOTE = [
  "NOTE: the model in this demo is SCRIPTED. A local OpenAI-compatible server replays recorded replies",
  "(src/apps/assistant/demo-trajectories.ts) over real HTTP; the agents, the sandbox, web search through the",
  "SearxNG API of a local website, the text browser (viewports, find in page), the document readers (a PDF and",
  "a spreadsheet made just now) and the SQLite checkpoints are real.",
].join("\n");

/**
 * `codehop demo --question assistant`: the general assistant solves a scripted task over a local
 * website, a PDF and a spreadsheet it makes (under `<home>/assistant-demo/`), with the live tree.
 */
export async function runAssistantDemo(
  flags: RunFlags & { delay?: number },
  home: string,
): Promise<void> {
  const { startAssistantDemo } = await import("../apps/assistant/demo.ts");
  const { DEMO_TASK } = await import("../apps/assistant/demo-trajectories.ts");
  const { assist } = await import("../apps/assistant/app.ts");
  const demo = await startAssistantDemo(join(home, "assistant-demo"), {
    delayMs: flags.delay ?? 0,
  });
  const threadId = randomUUID();
  try {
    if (!flags.json) {
      process.stderr.write(
        `${SCRIPTED_NOTE}\n\nTask: ${DEMO_TASK}\nFiles: ${demo.files.join(", ")}\n`,
      );
    }
    await runInTerminal(flags, "codehop demo (assistant)", (options) =>
      assist(DEMO_TASK, {
        threadId,
        files: demo.files,
        web: demo.webSettings,
        // The demo ignores OPENAI_* / CODEHOP_MODEL on purpose: it always uses the scripted server.
        config: {
          home,
          baseURL: demo.model.baseURL,
          apiKey: "scripted",
          model: "scripted-demo",
          models: {},
        },
        ...options,
      }),
    );
    if (!flags.json) {
      process.stderr.write(
        [
          "",
          `The task's files are in ${home}/assistant-files/${threadId}/.`,
          "With a real model and a search provider (docs/assistant.md):",
          `  ${cliCommand(["assist", "What is the tallest building in Europe?"], { home: flags.home })}`,
          "",
        ].join("\n"),
      );
    }
  } finally {
    await demo.close();
  }
}
