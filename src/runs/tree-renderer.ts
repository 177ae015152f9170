import { createLogUpdate } from "log-update";
import { colorsFor } from "../config/colors.ts";
import { RunProgress, type StreamEvent } from "./progress.ts";

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/** A live display of a run: feed it stream events, stop it when the run ends. */
export interface LiveView {
  /** The underlying tree (also available after stop()). */
  readonly progress: RunProgress;
  onEvent(event: StreamEvent): void;
  /**
   * Draws the final tree (TTY) and stops the spinner. `interrupted`: the run was stopped by its
   * user, so the agents still at work are shown as interrupted, not as busy.
   */
  stop(options?: { interrupted?: boolean }): void;
}

/** Lines of the top of the tree a frame always keeps: the header (if any) and the root agent with its task. */
const KEEP_TOP = 2;

/**
 * The lines of one frame that fit in `rows` terminal rows. log-update cannot erase lines that
 * scrolled off the screen, so a frame must fit; a tree that does not keeps its top (the question
 * and the root agent) and its bottom (where the run is now, and the totals), and says how many
 * lines in between are hidden until the run ends.
 */
export function fitToRows(lines: string[], rows: number, keepTop = KEEP_TOP): string[] {
  if (lines.length <= rows) return lines;
  const top = Math.min(keepTop, Math.max(0, rows - 2));
  const bottom = Math.max(1, rows - top - 1);
  const hidden = lines.length - top - bottom;
  return [
    ...lines.slice(0, top),
    `  … ${hidden} lines hidden (the whole tree is printed when the run ends)`,
    ...lines.slice(-bottom),
  ];
}

/**
 * Live tree of agents and steps for a terminal. On a TTY the whole tree is redrawn in place with
 * a spinner (log-update), keeping only the lines that fit on screen (its top and its bottom);
 * elsewhere (pipes, CI logs) it prints one line per event, so logs stay readable and append-only.
 * Colours follow FORCE_COLOR / NO_COLOR / TTY (src/config/env.ts `colorWanted`).
 */
export function createLiveView(
  stream: NodeJS.WriteStream = process.stderr,
  options: { rootName?: string; rootTask?: string; header?: string } = {},
): LiveView {
  const colors = colorsFor(stream);
  if (!stream.isTTY) {
    if (options.header) stream.write(`${options.header}\n`);
    const progress = new RunProgress({
      rootName: options.rootName,
      rootTask: options.rootTask,
      onLine: (l) => stream.write(`${l}\n`),
    });
    return {
      progress,
      onEvent: (e) => progress.apply(e),
      stop: (o = {}) => {
        if (o.interrupted) progress.interrupt();
      },
    };
  }
  const progress = new RunProgress({ rootName: options.rootName, rootTask: options.rootTask });
  const log = createLogUpdate(stream);
  let tick = 0;
  const started = Date.now();
  const frame = (final: boolean): string[] => {
    const width = Math.max(40, (stream.columns ?? 100) - 2);
    const spinner = final ? "•" : FRAMES[tick % FRAMES.length];
    let lines = progress.render(spinner, width, { colors });
    const t = progress.totals;
    const k = (n: number) => (n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n));
    lines.push(
      colors.dim(
        `${t.calls} model calls · ${k(t.inputTokens)} tokens in · ${k(t.outputTokens)} out · ${((Date.now() - started) / 1000).toFixed(1)} s`,
      ),
    );
    if (options.header) lines = [options.header, ...lines];
    if (!progress.root && !final) lines.push(`${colors.cyan(spinner)} starting…`);
    return lines;
  };
  // Live frames must fit the screen (log-update would cut their top off).
  const draw = () => log(fitToRows(frame(false), Math.max(5, (stream.rows ?? 40) - 1)).join("\n"));
  const timer = setInterval(() => {
    tick++;
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
    stop(o = {}) {
      clearInterval(timer);
      if (o.interrupted) progress.interrupt();
      // The final tree replaces the live frame and is printed whole, past log-update (which
      // keeps only the bottom of a frame taller than the screen): it scrolls like any output.
      log.clear();
      log.done();
      stream.write(`${frame(true).join("\n")}\n`);
    },
  };
}
