import { createLogUpdate } from "log-update";
import { RunProgress, type StreamEvent } from "./progress.ts";

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/** A live display of a run: feed it stream events, stop it when the run ends. */
export interface LiveView {
  /** The underlying tree (also available after stop()). */
  readonly progress: RunProgress;
  onEvent(event: StreamEvent): void;
  /** Draws the final tree (TTY) and stops the spinner. */
  stop(): void;
}

/**
 * Live tree of agents and steps for a terminal. On a TTY the whole tree is redrawn in place with
 * a spinner (log-update), keeping only the lines that fit on screen; elsewhere (pipes, CI logs) it
 * prints one line per event, so logs stay readable and append-only.
 */
export function createLiveView(
  stream: NodeJS.WriteStream = process.stderr,
  options: { rootName?: string; header?: string } = {},
): LiveView {
  if (!stream.isTTY) {
    if (options.header) stream.write(`${options.header}\n`);
    const progress = new RunProgress({
      rootName: options.rootName,
      onLine: (l) => stream.write(`${l}\n`),
    });
    return { progress, onEvent: (e) => progress.apply(e), stop: () => {} };
  }
  const progress = new RunProgress({ rootName: options.rootName });
  const log = createLogUpdate(stream);
  let frame = 0;
  const started = Date.now();
  const draw = (final = false) => {
    const width = Math.max(40, (stream.columns ?? 100) - 2);
    let lines = progress.render(final ? "•" : FRAMES[frame % FRAMES.length], width);
    const t = progress.totals;
    const k = (n: number) => (n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n));
    lines.push(
      `${t.calls} model calls · ${k(t.inputTokens)} tokens in · ${k(t.outputTokens)} out · ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    if (options.header) lines = [options.header, ...lines];
    if (!progress.root && !final) lines.push(`${FRAMES[frame % FRAMES.length]} starting…`);
    // log-update cannot erase lines scrolled off screen: keep the tail that fits.
    const rows = Math.max(5, (stream.rows ?? 40) - 1);
    if (!final && lines.length > rows)
      lines = [`… ${lines.length - rows + 1} lines above`, ...lines.slice(-(rows - 1))];
    log(lines.join("\n"));
  };
  const timer = setInterval(() => {
    frame++;
    draw();
  }, 100);
  timer.unref();
  draw();
  return {
    progress,
    onEvent(e) {
      progress.apply(e);
      draw();
    },
    stop() {
      clearInterval(timer);
      draw(true);
      log.done();
    },
  };
}
