import { createInterface } from "node:readline/promises";
import type { ApprovalDecision, ApprovalRequest } from "../core/approval.ts";
import { cliCommand, type CommandContext } from "../config/cli-command.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";

/** The approval a run waits for, as the terminal shows it (several lines, no trailing newline). */
export function formatApproval(request: ApprovalRequest): string {
  const path = request.agentPath.join(" › ");
  return [
    `Approval needed: ${request.tool}() called by agent ${request.agent}${request.agentPath.length > 1 ? ` (${path})` : ""}, step ${request.step}`,
    ...(request.line !== null ? [`  line ${request.line}: ${request.lineText ?? ""}`] : []),
    `  arguments: ${JSON.stringify(request.args)}`,
    `  approval id: ${request.approvalId}`,
  ].join("\n");
}

/**
 * The commands that answer `request`, pending on `threadId`, as the user pastes them: the CLI as it
 * runs here, `--home` when the command was given one; `--edit` carries the call's own arguments
 * (pasted unchanged it runs the call as asked; the user edits them first).
 */
export function approvalCommands(
  threadId: string,
  request: Pick<ApprovalRequest, "args">,
  context: CommandContext = {},
): string {
  const resume = (...answer: Array<string | { placeholder: string }>) =>
    `  ${cliCommand(["resume", threadId, ...answer], context)}`;
  return [
    resume("--approve"),
    // The reason is the user's to write: an example in double quotes, valid as it is.
    resume("--reject", { placeholder: '"why"' }),
    resume("--edit", JSON.stringify(request.args)),
  ].join("\n");
}

/** Parses `--edit`'s JSON: an object of arguments by name (CODEHOP_CONFIG_INVALID otherwise). */
export function parseEditedArgs(json: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `--edit needs the arguments as a JSON object, e.g. '{"path": "notes.txt"}': ${(err as Error).message}`,
    );
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `--edit needs the arguments as a JSON object (by parameter name), got ${json}`,
    );
  }
  return value as Record<string, unknown>;
}

/** A decision from the resume flags, or undefined when none is given (several: an error). */
export function decisionFromFlags(flags: {
  approve?: boolean;
  reject?: string;
  edit?: string;
  approvalId?: string;
}): ApprovalDecision | undefined {
  const given = [flags.approve, flags.reject !== undefined, flags.edit !== undefined].filter(
    Boolean,
  ).length;
  if (given > 1) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      "Give one of --approve, --reject and --edit.",
    );
  }
  if (flags.approvalId !== undefined && !given) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      "--approval-id names the approval to answer: give it with --approve, --reject or --edit.",
    );
  }
  // Without --approval-id, the decision answers the one approval pending (several: an error).
  const id = flags.approvalId !== undefined ? { approvalId: flags.approvalId } : {};
  if (flags.approve) return { ...id, decision: "approve" };
  if (flags.reject !== undefined) return { ...id, decision: "reject", reason: flags.reject };
  if (flags.edit !== undefined)
    return { ...id, decision: "edit", args: parseEditedArgs(flags.edit) };
  return undefined;
}

/**
 * Asks the user for a decision on `request`: approve, edit the arguments (JSON, asked again until
 * it parses) or reject with a reason. Undefined when the input ends or Ctrl-C is pressed (the
 * thread keeps waiting).
 */
export async function askDecision(
  request: ApprovalRequest,
  io: { input: NodeJS.ReadableStream; output: NodeJS.WritableStream },
): Promise<ApprovalDecision | undefined> {
  const rl = createInterface({ input: io.input, terminal: false });
  // Lines are read from the iterator, which buffers them: answers typed (or piped) ahead of a
  // question are not lost.
  const lines = rl[Symbol.asyncIterator]();
  const ask = async (question: string): Promise<string | undefined> => {
    io.output.write(question);
    const next = await lines.next();
    return next.done ? undefined : String(next.value);
  };
  try {
    io.output.write(`${formatApproval(request)}\n`);
    for (;;) {
      const answer = (await ask("[a]pprove, [e]dit arguments, [r]eject? "))?.trim().toLowerCase();
      if (answer === undefined) return undefined;
      if (answer === "a" || answer === "approve") return { decision: "approve" };
      if (answer === "r" || answer === "reject") {
        const reason = await ask("Reason (the agent reads it): ");
        if (reason === undefined) return undefined;
        return { decision: "reject", ...(reason.trim() ? { reason: reason.trim() } : {}) };
      }
      if (answer === "e" || answer === "edit") {
        for (;;) {
          const json = await ask(`Arguments as JSON [${JSON.stringify(request.args)}]: `);
          if (json === undefined) return undefined;
          if (!json.trim()) return { decision: "edit", args: request.args };
          try {
            return { decision: "edit", args: parseEditedArgs(json) };
          } catch (err) {
            io.output.write(`${(err as Error).message}\n`);
          }
        }
      }
    }
  } finally {
    rl.close();
  }
}
