// @ts-check
/** The child's side of the transport: synchronous writes to fd 3, line-framed reads from stdin. */
import {
  Buffer,
  Int32Array,
  Number,
  SharedArrayBuffer,
  String,
  atomicsWait,
  jsonParse,
  min,
  process,
  writeSync,
} from "./commons.mjs";
import { CHILD_OUT_FD, LineBuffer, encodeLine } from "./protocol.mjs";

/** @typedef {import("./protocol.mjs").ChildMessageShape} ChildMessageShape */
/** @typedef {import("./protocol.mjs").HostMessage} HostMessage */

/** A sleep of the child's main thread while the host drains the pipe (no spinning on a full pipe). */
const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Sends one message to the host, synchronously (a message sent right before a guest busy-loop
 * still arrives). Exits quietly if the host went away.
 * @param {ChildMessageShape} message
 */
export function send(message) {
  sendLine(encodeLine(message));
}

/**
 * Writes one protocol line to the host, synchronously. The pipe holds 64 KB: a longer line (a
 * large value) fills it, and the child then sleeps a little between tries (growing from 0.05 to
 * 2 ms) instead of spinning, which took a core the host needed to read it on a 2-core machine.
 * @param {string} line
 */
export function sendLine(line) {
  const buf = Buffer.from(line, "utf8");
  let off = 0;
  let wait = 0.05;
  while (off < buf.length) {
    try {
      off += writeSync(CHILD_OUT_FD, buf, off, buf.length - off);
      wait = 0.05;
    } catch (err) {
      if (err && /** @type {NodeJS.ErrnoException} */ (err).code === "EAGAIN") {
        atomicsWait(pause, 0, 0, wait);
        wait = min(wait * 2, 2);
        continue;
      }
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
