/** What {@link stopOnCtrlC} returns: the signal the command watches, and how to let go of Ctrl-C. */
export interface CtrlCStop {
  /** Aborted by the first Ctrl-C. */
  readonly signal: AbortSignal;
  /** Removes the SIGINT handler (idempotent); Ctrl-C then has its default effect again. */
  dispose(): void;
}

/**
 * Double Ctrl-C for long-running commands: the first SIGINT aborts the returned signal so the
 * command can stop cleanly and leave something to resume; a second one quits at once with exit
 * code 130 (what a shell reports for SIGINT). `onStop` and `onQuit` run just before each, to tell
 * the user what is happening; `reason` becomes the signal's abort reason.
 */
export function stopOnCtrlC(
  options: { reason?: unknown; onStop?: () => void; onQuit?: () => void } = {},
): CtrlCStop {
  const controller = new AbortController();
  const onSigint = () => {
    if (controller.signal.aborted) {
      options.onQuit?.();
      process.exit(130);
    }
    options.onStop?.();
    controller.abort(options.reason);
  };
  process.on("SIGINT", onSigint);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off("SIGINT", onSigint);
    },
  };
}
