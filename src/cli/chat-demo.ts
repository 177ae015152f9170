import { randomUUID } from "node:crypto";
import { isAbsolute, join, relative } from "node:path";
import type { RunFlags } from "./cli-support.ts";
import { stopOnCtrlC } from "./interrupt.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { chatRoundView } from "./chat-view.ts";
import { cliCommand, type CommandContext } from "../config/cli-command.ts";

/**
 * `file` as a printed command names it: relative to the working directory when it is under it (a
 * clone's root: `data/chat-demo/...`), else absolute (an installed package's copy), so the command
 * finds the file wherever it is pasted from here.
 */
function pathForCommand(file: string): string {
  const rel = relative(process.cwd(), file);
  return rel && !rel.startsWith("..") && !isAbsolute(rel) ? rel : file;
}

/** The demo's note; `files` are the two documents a real model's first chat attaches. */
function scriptedNote(home: CommandContext, files: string[]): string {
  return [
    "NOTE: the model in this demo is SCRIPTED. A local OpenAI-compatible server replays recorded",
    "replies (src/apps/chat/demo-trajectories.ts) over real HTTP; the chat agent, the sandbox, text",
    "extraction (PDF, DOCX, a web page), the per-thread file index, search_files and the SQLite",
    "checkpoints are real. To talk with a real model instead:",
    "  export OPENAI_BASE_URL=http://localhost:8000/v1 OPENAI_API_KEY=EMPTY CODEHOP_MODEL=Qwen/Qwen2.5-7B-Instruct",
    `  ${cliCommand(["chat", ...files.flatMap((f) => ["--file", pathForCommand(f)])], home)}`,
  ].join("\n");
}

/**
 * `codehop demo --question chat`: a scripted file dialogue of six rounds on one thread — two files
 * attached (a PDF report, a DOCX budget), questions about each, one combining both, one about the
 * conversation itself, then a link attached — printed as a conversation, with the agent's steps
 * as a live tree (stderr) unless --quiet / --json.
 */
export async function runChatDemo(
  flags: RunFlags & { delay?: number },
  home: string,
): Promise<void> {
  const { startChatDemo, CHAT_DEMO_DIR } = await import("../apps/chat/demo.ts");
  const { DEMO_ROUNDS, DEMO_FILES } = await import("../apps/chat/demo-trajectories.ts");
  const { chat } = await import("../apps/chat/app.ts");
  const demo = await startChatDemo({ delayMs: flags.delay ?? 0 });
  // Printed commands repeat --home, so they reach this conversation.
  const context: CommandContext = { home: flags.home };
  const threadId = randomUUID();
  const out = (text: string) => process.stdout.write(`${text}\n`);
  const ctrlC = stopOnCtrlC({
    reason: new CodehopError(ErrorCodes.RUN_INTERRUPTED, "interrupted (Ctrl-C)"),
  });
  try {
    if (!flags.json) {
      process.stderr.write(
        `${scriptedNote(context, [join(CHAT_DEMO_DIR, DEMO_FILES.report), join(CHAT_DEMO_DIR, DEMO_FILES.budget)])}\n\ncodehop chat demo — thread ${threadId}\n\n`,
      );
    }
    for (const round of DEMO_ROUNDS) {
      const { files, urls } = demo.attachments(round);
      if (!flags.json) {
        for (const a of [...files, ...urls]) out(`(attaching ${a.split("/").pop()})`);
        out(`you> ${round.message}`);
      }
      const view = chatRoundView(!flags.json && !flags.quiet);
      const result = await chat(threadId, round.message, {
        files,
        urls,
        // The demo ignores OPENAI_* / CODEHOP_MODEL on purpose: it always uses the scripted server.
        config: {
          home,
          baseURL: demo.model.baseURL,
          apiKey: "scripted",
          model: "scripted-demo",
          models: {},
        },
        signal: ctrlC.signal,
        ...view.options,
      });
      view.stop();
      if (flags.json) {
        out(JSON.stringify(result));
        continue;
      }
      for (const a of result.attachments)
        out(a.ok ? `(attached ${a.name})` : `(not attached: ${a.name} — ${a.error})`);
      out(`assistant> ${result.reply}`);
      out("");
    }
    if (!flags.json) {
      process.stderr.write(
        [
          `The conversation is thread ${threadId} in ${home}/checkpoints.db; its files are indexed in ${home}/chat-files/. Try:`,
          `  ${cliCommand(["chat", "--thread", threadId], context)}     # continue it (needs a model: see the note above)`,
          `  ${cliCommand(["history", threadId], context)}           # its checkpoints`,
          `  ${cliCommand(["threads", "--delete", threadId], context)}  # delete it and its files`,
          "",
        ].join("\n"),
      );
    }
  } finally {
    ctrlC.dispose();
    await demo.close();
  }
}
