import { createServer } from "node:http";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ScriptedOpenAIServer } from "../../testing/scripted-openai-server.ts";
import {
  DEMO_FILES,
  DEMO_VISITOR_PAGE,
  chatResponder,
  type DemoRound,
} from "./demo-trajectories.ts";

/** The demo's documents shipped with the package (data/chat-demo/, made by test/chat/documents.ts). */
export const CHAT_DEMO_DIR = resolve(
  dirname(fileURLToPath(import.meta.url)),
  "../../../data/chat-demo",
);

/** What the chat demo runs against: the scripted model, and a local page for the link round. */
export interface ChatDemo {
  model: ScriptedOpenAIServer;
  /** Paths and links each round attaches. */
  attachments(round: DemoRound): { files: string[]; urls: string[] };
  close(): Promise<void>;
}

/**
 * Starts the scripted model of the file dialogue (src/apps/chat/demo-trajectories.ts) and a local
 * HTTP server for the visitor page the last round attaches as a link.
 */
export async function startChatDemo(options: { delayMs?: number } = {}): Promise<ChatDemo> {
  const replay = chatResponder();
  const delayMs = options.delayMs ?? 0;
  const model = await ScriptedOpenAIServer.start({
    responder: async (req, ctx) => {
      const reply = await replay(req, ctx);
      return delayMs && typeof reply === "object" && "content" in reply
        ? { ...reply, delayMs }
        : reply;
    },
  });
  const page = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(DEMO_VISITOR_PAGE);
  });
  await new Promise<void>((ok) => page.listen(0, "127.0.0.1", ok));
  const { port } = page.address() as { port: number };
  return {
    model,
    attachments: (round) => ({
      files: (round.attach ?? [])
        .filter((k) => k !== "visitor")
        .map((k) => resolve(CHAT_DEMO_DIR, DEMO_FILES[k])),
      urls: (round.attach ?? []).includes("visitor")
        ? [`http://127.0.0.1:${port}/harbor-bridge/visit.html`]
        : [],
    }),
    async close() {
      page.closeAllConnections();
      await new Promise<void>((ok) => page.close(() => ok()));
      await model.close();
    },
  };
}
