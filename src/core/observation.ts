import type { ActionOutcome } from "./state.ts";

/** Header of every observation message (also a stop sequence, so the model never writes one). */
export const OBSERVATION_HEADER = "Observation:";

/** Keeps head and tail of an over-long text with a visible marker in between. */
export function truncateMiddle(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const keep = Math.max(0, maxChars - 60);
  const head = Math.ceil(keep * 0.6);
  const tail = keep - head;
  return `${text.slice(0, head)}\n[... ${text.length - head - tail} characters cut ...]\n${text.slice(text.length - tail)}`;
}

function show(value: unknown): string {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/**
 * The observation the model sees for an action outcome (without the "Observation:" header), and
 * whether it reports a failure (failures leave the condensed history once resolved). Every failure
 * says what to do next: unknown names list the tools that exist, timeouts ask for smaller steps.
 * `toolNames` may be a function: it is called only for an unknown name (it may build the tools).
 */
export function formatObservation(
  outcome: ActionOutcome,
  toolNames: readonly string[] | (() => readonly string[]),
  maxChars: number,
): { text: string; isError: boolean } {
  const parts: string[] = [];
  const logs = outcome.logs.replace(/\s+$/, "");
  const err = outcome.error;
  if (err?.name === "FormatError")
    return { text: truncateMiddle(err.message, maxChars), isError: true };
  if (logs) parts.push(`Execution logs:\n${logs}`);
  if (err || !outcome.ok) {
    const where = err?.line
      ? err.column
        ? ` (line ${err.line}, column ${err.column})`
        : ` (line ${err.line})`
      : "";
    // Syntax errors carry the same position in their message: say it once.
    const message =
      err && where && err.message.endsWith(where)
        ? err.message.slice(0, -where.length)
        : err?.message;
    let msg = `Error${where}: ${err ? `${err.name}: ${message}` : "the action failed"}`;
    // A bare name that is undefined or not callable is usually a made-up tool (the sandbox reports
    // either, depending on how the guest scope resolves it); "obj.f is not a function" is not.
    const undefinedName = err
      ? /(?:^|[^.\w$])([A-Za-z_$][\w$]*) is not (?:defined|a function)/.exec(err.message)?.[1]
      : undefined;
    const names = undefinedName && (typeof toolNames === "function" ? toolNames() : toolNames);
    if (undefinedName && names && !names.includes(undefinedName)) {
      msg += `\n"${undefinedName}" is not a tool or variable. The tools that exist are: ${[...names, "final_answer"].join(", ")}.`;
    }
    if (err?.name === "TimeoutError")
      msg += "\nThe action took too long and was stopped: do less per step.";
    msg += "\nFix the code and try again; don't repeat the same mistake.";
    parts.push(msg);
  } else if (outcome.isFinalAnswer) {
    parts.push(`Final answer: ${show(outcome.finalAnswer)}`);
  } else if (!logs) {
    parts.push("The code ran without printing anything. Use console.log(...) to see values.");
  }
  const lost = Object.entries(outcome.notCarriedOver ?? {});
  if (lost.length > 0 && !outcome.isFinalAnswer) {
    parts.push(
      `Note: not carried over to the next step: ${lost.map(([name, note]) => `${name} (${note})`).join(", ")}`,
    );
  }
  return { text: truncateMiddle(parts.join("\n"), maxChars), isError: Boolean(err) || !outcome.ok };
}

/** Nudge appended when the same action gave the same observation `count` times in a row. */
export function repeatNudge(count: number): string {
  return `\nNote: you ran the same code and got the same result ${count} times in a row. Repeating it will not help: change your approach, or call final_answer() with what you have.`;
}
