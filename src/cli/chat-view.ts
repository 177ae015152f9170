import type { StreamEvent } from "../runs/progress.ts";
import { createLiveView, type LiveView } from "../runs/tree-renderer.ts";

/**
 * The live tree of one chat round in the terminal (stderr): the chat agent's own steps, which run
 * under the `respond` node's namespace, drawn as the root of the tree, titled with the user's
 * `message` (the agent's own task is the whole conversation). Disabled, it draws nothing and asks
 * the graph not to stream the agent's steps.
 */
export function chatRoundView(
  enabled: boolean,
  message?: string,
): {
  /** Options for `chat()`. */
  options: {
    streamAgentSteps: boolean;
    onStart: () => void;
    onEvent: (event: StreamEvent) => void;
  };
  /** Draws the final tree; idempotent. */
  stop(): void;
} {
  let view: LiveView | undefined;
  return {
    options: {
      streamAgentSteps: enabled,
      onStart: () => {
        if (enabled)
          view = createLiveView(process.stderr, {
            rootName: "chat",
            ...(message?.trim() ? { rootTask: message.trim() } : {}),
          });
      },
      onEvent: ([ns, mode, chunk]) => {
        if (ns[0]?.startsWith("respond:")) view?.onEvent([ns.slice(1), mode, chunk]);
      },
    },
    stop() {
      view?.stop();
      view = undefined;
    },
  };
}
