/**
 * Host -> guest error text. Tool errors reach the model, so they must not carry host stack frames,
 * file system paths or long dumps of configuration.
 */

/** Longest tool error message passed to the guest. */
export const MAX_TOOL_ERROR_CHARS = 2_000;

const STACK_LINE = /\n\s+at\s[^\n]*/g;
// file:///abs/path, /abs/path/with/segments, C:\win\path — but not URLs' paths (preceded by a host).
const FILE_URL = /file:\/\/\/?[^\s'"`)]+/g;
const POSIX_PATH = /(^|[\s'"`(=:,])\/(?:[\w.@+-]+\/)+[\w.@+-]*/g;
const WINDOWS_PATH = /\b[A-Za-z]:\\(?:[^\s\\'"`]+\\)*[^\s\\'"`]*/g;

/** Message of a host error, stripped of stack frames and paths, capped in length. */
export function sanitizeErrorMessage(err: unknown): string {
  let message: string;
  if (err instanceof Error) message = err.message;
  else if (typeof err === "string") message = err;
  else {
    try {
      message = JSON.stringify(err) ?? String(err);
    } catch {
      message = "Tool failed";
    }
  }
  if (typeof message !== "string" || message.trim() === "") message = "Tool failed";
  message = message
    .replace(STACK_LINE, "")
    .replace(FILE_URL, "<path>")
    .replace(POSIX_PATH, "$1<path>")
    .replace(WINDOWS_PATH, "<path>");
  if (message.length > MAX_TOOL_ERROR_CHARS)
    message = `${message.slice(0, MAX_TOOL_ERROR_CHARS)}... [truncated]`;
  return message;
}
