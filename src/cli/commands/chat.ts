import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";
import { Command } from "commander";
import { parse as parseShellWords } from "shell-quote";
import { configFromFlags, type RunFlags } from "../cli-support.ts";
import { cliCommand } from "../../config/cli-command.ts";
import { wholeNumberOption } from "../option-values.ts";
import { CodehopError, ErrorCodes } from "../../errors.ts";
import { approvalCommands, formatApproval, parseEditedArgs } from "../approval-prompt.ts";
import type { ApprovalDecision, ApprovalRequest } from "../../core/approval.ts";

/** Flags of `codehop chat`. */
interface ChatFlags extends RunFlags {
  thread?: string;
  file?: string[];
  url?: string[];
  keepRounds?: number;
}

/** The session's /help text, with the command that continues this conversation later. */
const help = (threadId: string, home: string | undefined) =>
  [
    "Commands:",
    "  /attach <path-or-url> ...   add files (PDF, DOCX, HTML, Markdown, text) or links to this conversation",
    "  /files                      list the attached files",
    "  /forget                     forget this conversation (its history and files) and start a new one",
    "  /forget <file>              remove one attached file",
    "  /thread                     show the thread id",
    `  /exit                       leave (Ctrl-D works too); \`${cliCommand(["chat", "--thread", threadId], { home })}\` continues later`,
    "Ctrl-C while the assistant works stops that reply; the conversation is kept.",
  ].join("\n");

/**
 * Errors that end a chat session even in a terminal: every later round would fail the same way
 * (a bad codehop.config.json, MCP tools whose names clash, an MCP server that cannot start).
 */
const STOPS_THE_SESSION = new Set<string>([
  ErrorCodes.CONFIG_INVALID,
  ErrorCodes.MCP_SERVER_FAILED,
]);

const collect = (value: string, previous: string[] = []) => [...previous, value];

/**
 * The paths and links of `/attach ...`, split as a shell splits words: quotes ("my report.pdf",
 * 'a b.md') and backslashes (my\ report.pdf) keep spaces in a path; `$` and globs are taken
 * literally. A usage message instead when there is none or the line has shell operators.
 */
export function attachTargets(text: string): string[] | string {
  const usage =
    'usage: /attach <path-or-url> ... (quote paths with spaces: /attach "my report.pdf")';
  const words: string[] = [];
  for (const token of parseShellWords(text, (key) => `$${key}`)) {
    if (typeof token === "string") words.push(token);
    else if ("op" in token && token.op === "glob") words.push(token.pattern);
    else return usage;
  }
  return words.length ? words : usage;
}

/**
 * `codehop chat`: an interactive conversation with the chat agent in the terminal. Each line is a
 * message (or a /command); the history is kept per thread in the data directory, so `--thread`
 * continues a conversation. Ctrl-C stops the reply being worked on and keeps the conversation.
 */
export default function chatCommand(): Command {
  return new Command("chat")
    .description(
      "talk with the chat agent: attach files and links, ask about them over many rounds (history kept per thread)",
    )
    .option("--thread <id>", "conversation to continue or start (default: a new one)")
    .option("--file <path>", "attach a file at the start (repeatable)", collect)
    .option("--url <url>", "attach a link at the start (repeatable)", collect)
    .option(
      "--keep-rounds <n>",
      "rounds the agent sees verbatim; older ones are summarized (default: the chat app's setting)",
      wholeNumberOption("--keep-rounds"),
    )
    .option("--home <dir>", "data directory (default CODEHOP_HOME or .codehop)")
    .option("--model <name>", "model for the chat agent (default CODEHOP_MODEL)")
    .option("--json", "print one JSON object per round instead of the reply")
    .option("-q, --quiet", "no live tree of the agent's steps")
    .action(async (flags: ChatFlags) => {
      // The live tree's renderer loads when a conversation starts, not with `--help`.
      const { chatRoundView } = await import("../chat-view.ts");
      const config = configFromFlags(flags) ?? {};
      const { loadAppConfig, assertModelConfigured } = await import("../../runs/config.ts");
      const resolved = loadAppConfig(config);
      if (!resolved.baseURL) assertModelConfigured(resolved, ["chat"]);
      const settings: Record<string, number> = {};
      if (flags.keepRounds !== undefined) settings.keepRounds = flags.keepRounds;
      // Rounds come at a person's pace: each round's process starts with its model call, none ahead.
      const { setDefaultSandboxMode } = await import("../../core/default-sandbox.ts");
      setDefaultSandboxMode("on-demand");
      // Loaded on use: the agent stack takes a moment to import.
      const app = await import("../../apps/chat/app.ts");
      const out = (text: string) => process.stdout.write(`${text}\n`);
      const err = (text: string) => process.stderr.write(`${text}\n`);
      let threadId = flags.thread ?? randomUUID();

      const printAttachments = (results: Awaited<ReturnType<typeof app.attachToThread>>) => {
        for (const r of results) {
          if (r.ok && r.file) {
            const what = r.file.pages ? `${r.file.pages} pages, ` : "";
            out(`attached: ${r.file.name} (${what}${r.file.passages} passages)`);
          } else out(`not attached: ${r.name} — ${r.error}`);
        }
      };

      const history = await app.chatHistory(threadId, { config });
      err(
        `codehop chat — thread ${threadId}${history.length ? ` (continuing: ${history.length} rounds so far)` : ""}. /help for commands, /exit to leave.`,
      );
      const last = history[history.length - 1];
      if (last && !flags.json) {
        out(`you> ${last.user}`);
        if (last.reply !== undefined) out(`assistant> ${last.reply}`);
      }
      /** Attaches files and links; Ctrl-C stops between (and during downloads of) them. */
      const attach = async (targets: string[]) => {
        running = new AbortController();
        try {
          printAttachments(
            await app.attachToThread(threadId, targets, {
              config,
              settings,
              signal: running.signal,
            }),
          );
        } catch (e) {
          if (!CodehopError.isInstance(e) || e.code !== ErrorCodes.RUN_INTERRUPTED) throw e;
          // Each file is indexed whole or not at all: the ones before the Ctrl-C stay.
          out("(stopped attaching — the files attached before are kept; see /files)");
        } finally {
          running = undefined;
        }
      };

      const tty = Boolean(process.stdin.isTTY);
      const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: tty });
      rl.setPrompt("you> ");
      // Lines are read from one iterator, made before anything else is awaited: lines typed or
      // piped while the --file attachments are indexed are queued, then answered in order, and
      // an input that ends meanwhile still has its lines answered.
      const lines = rl[Symbol.asyncIterator]();
      let running: AbortController | undefined;
      let interruptedAtPrompt = false;
      const onInterrupt = () => {
        if (running) {
          running.abort(new CodehopError(ErrorCodes.RUN_INTERRUPTED, "interrupted (Ctrl-C)"));
          return;
        }
        if (interruptedAtPrompt || !tty) {
          rl.close();
          return;
        }
        interruptedAtPrompt = true;
        out("\n(Ctrl-C again or /exit to leave)");
        rl.prompt();
      };
      rl.on("SIGINT", onInterrupt);
      process.on("SIGINT", onInterrupt);

      const startFiles = [...(flags.file ?? []), ...(flags.url ?? [])];
      if (startFiles.length) await attach(startFiles);

      const nextLine = async (question?: string): Promise<string | undefined> => {
        // A question waits on the same line in a terminal; in a log it is a line of its own.
        if (question) process.stdout.write(tty ? question : `${question}\n`);
        const next = await lines.next();
        return next.done ? undefined : String(next.value);
      };

      /** Asks approve / edit / reject for a paused tool call; undefined when the input ends. */
      const decide = async (request: ApprovalRequest): Promise<ApprovalDecision | undefined> => {
        out(formatApproval(request));
        for (;;) {
          const answer = (await nextLine("[a]pprove, [e]dit arguments, [r]eject? "))
            ?.trim()
            .toLowerCase();
          if (answer === undefined) return undefined;
          if (answer === "a" || answer === "approve") return { decision: "approve" };
          if (answer === "r" || answer === "reject") {
            const reason = (await nextLine("Reason (the agent reads it): "))?.trim();
            if (reason === undefined) return undefined;
            return { decision: "reject", ...(reason ? { reason } : {}) };
          }
          if (answer === "e" || answer === "edit") {
            const json = await nextLine(`Arguments as JSON [${JSON.stringify(request.args)}]: `);
            if (json === undefined) return undefined;
            try {
              return { decision: "edit", args: json.trim() ? parseEditedArgs(json) : request.args };
            } catch (e) {
              out((e as Error).message);
            }
          }
        }
      };

      const runRound = async (message: string) => {
        running = new AbortController();
        const view = chatRoundView(!flags.json && !flags.quiet, message);
        try {
          let approval: ApprovalDecision | undefined;
          for (;;) {
            const result = await app.chat(threadId, message, {
              config,
              ...(Object.keys(settings).length ? { settings } : {}),
              signal: running.signal,
              ...(approval ? { approval } : {}),
              ...view.options,
            });
            view.stop();
            if (flags.json) out(JSON.stringify(result));
            if (result.approval) {
              // The agent's code wants to run a tool that needs approval: ask, then go on.
              approval = await decide(result.approval);
              if (approval) continue;
              // The commands on lines of their own, nothing after them: each pastes as it is.
              out(
                `(the reply waits for this approval; answer it later with one of:)\n${approvalCommands(threadId, result.approval, { home: flags.home })}`,
              );
              return;
            }
            if (!flags.json) {
              for (const a of result.attachments)
                if (!a.ok) out(`not attached: ${a.name} — ${a.error}`);
              out(`assistant> ${result.reply}`);
            }
            return;
          }
        } catch (e) {
          view.stop();
          if (CodehopError.isInstance(e) && e.code === ErrorCodes.RUN_INTERRUPTED) {
            out("(stopped — the conversation is kept; ask again or go on)");
          } else if (CodehopError.isInstance(e) && tty && !STOPS_THE_SESSION.has(e.code)) {
            // The round failed (e.g. the model endpoint is down): say so, keep the session.
            out(`(the reply failed: ${e.message.split("\n")[0]} [${e.code}])`);
          } else {
            // Piped input has nobody to read "(the reply failed ...)" and retry, and a bad
            // configuration fails every round alike: the session ends with the error (exit 2).
            throw e;
          }
        } finally {
          running = undefined;
        }
      };

      const command = async (line: string): Promise<boolean> => {
        const [name] = line.split(/\s+/);
        const rest = line.slice(name.length).trim();
        switch (name) {
          case "/exit":
          case "/quit":
            return false;
          case "/help":
            out(help(threadId, flags.home));
            break;
          case "/thread":
            out(`thread ${threadId}`);
            break;
          case "/files": {
            const files = app.threadFiles(threadId, { config });
            if (!files.length) out("(no files attached; /attach <path-or-url>)");
            for (const f of files)
              out(
                `- ${f.name} (${f.kind}${f.pages ? `, ${f.pages} pages` : ""}, ${f.passages} passages) from ${f.source}`,
              );
            break;
          }
          case "/attach": {
            const targets = attachTargets(rest);
            if (typeof targets === "string") out(targets);
            else await attach(targets);
            break;
          }
          case "/forget":
            if (rest) {
              out(
                app.removeThreadFile(threadId, rest, { config })
                  ? `removed ${rest}`
                  : `no attached file named ${rest} (see /files)`,
              );
            } else {
              // Every app's thread data goes (src/apps/index.ts loads them all): only when asked.
              const { deleteThread } = await import("../../apps/index.ts");
              await deleteThread(threadId, { config });
              const old = threadId;
              threadId = randomUUID();
              out(`forgot the conversation ${old} (history and files); new thread ${threadId}`);
            }
            break;
          default:
            out(`unknown command ${name}; /help lists them`);
        }
        return true;
      };

      try {
        if (tty) rl.prompt();
        for (let raw = await nextLine(); raw !== undefined; raw = await nextLine()) {
          interruptedAtPrompt = false;
          const line = raw.trim();
          if (line) {
            const goOn = line.startsWith("/") ? await command(line) : (await runRound(line), true);
            if (!goOn) break;
          }
          if (tty) rl.prompt();
        }
      } finally {
        process.off("SIGINT", onInterrupt);
        rl.close();
      }
      err(
        `bye — continue with \`${cliCommand(["chat", "--thread", threadId], { home: flags.home })}\``,
      );
    });
}
