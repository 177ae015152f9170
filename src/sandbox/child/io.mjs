// @ts-check
/** The child's side of the transport: synchronous writes to fd 3, line-framed reads from stdin. */
import { Buffer, Number, String, jsonParse, process, writeSync } from "./commons.mjs";
import { CHILD_OUT_FD, LineBuffer, encodeLine } from "./protocol.mjs";

/** @typedef {import("./protocol.mjs").ChildMessageShape} ChildMessageShape */
/** @typedef {import("./protocol.mjs").HostMessage} HostMessage */

/**
 * Sends one message to the host, synchronously (a message sent right before a guest busy-loop
 * still arrives). Exits quietly if the host went away.
 * @param {ChildMessageShape} message
 */
export function send(message) {
  const buf = Buffer.from(encodeLine(message), "utf8");
  let off = 0;
  while (off < buf.length) {
    try {
      off += writeSync(CHILD_OUT_FD, buf, off, buf.length - off);
    } catch (err) {
      if (err && /** @type {NodeJS.ErrnoException} */ (err).code === "EAGAIN") continue;
      process.exit(0); // host went away
    }
  }
}

/**
 * Calls `handle` with each message the host sends; the process exits when the host closes stdin.
 * @param {(message: HostMessage) => void} handle
 */
export function receive(handle) {
  // The host is trusted: its lines are bounded only by what it chooses to send.
  const lines = new LineBuffer(Number.MAX_SAFE_INTEGER);
  process.stdin.setEncoding("utf8");
  process.stdin.on("data", (chunk) => {
    for (const line of lines.push(String(chunk)) ?? []) handle(jsonParse(line));
  });
  process.stdin.on("end", () => process.exit(0));
}
