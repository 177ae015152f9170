import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ScriptedOpenAIServer } from "../../testing/scripted-openai-server.ts";
import { WebTestServer } from "../../testing/web-test-server.ts";
import type { WebSettings } from "../../web/settings.ts";
import { assistantDemoResponder, demoFiles, demoSite } from "./demo-trajectories.ts";

/** What the assistant's demo runs against (see src/apps/assistant/demo-trajectories.ts). */
export interface AssistantDemo {
  /** The scripted model. */
  model: ScriptedOpenAIServer;
  /** The local website with its SearxNG-compatible search and web archive. */
  web: WebTestServer;
  /** The demo files, made in `dir`: their paths. */
  files: string[];
  /** Web settings that point the search provider and the archive at the local site. */
  webSettings: Partial<WebSettings>;
  close(): Promise<void>;
}

/**
 * Starts the demo's world: the local site (with search and archive), the scripted model, and the
 * PDF and spreadsheet made into `dir` (created when missing).
 */
export async function startAssistantDemo(
  dir: string,
  options: { delayMs?: number } = {},
): Promise<AssistantDemo> {
  const web = await WebTestServer.start(demoSite());
  const replay = assistantDemoResponder(web.origin);
  const delayMs = options.delayMs ?? 0;
  const model = await ScriptedOpenAIServer.start({
    responder: async (req, ctx) => {
      const reply = await replay(req, ctx);
      return delayMs && typeof reply === "object" && "content" in reply
        ? { ...reply, delayMs }
        : reply;
    },
  });
  mkdirSync(dir, { recursive: true });
  const files = Object.entries(demoFiles()).map(([name, bytes]) => {
    const path = join(dir, name);
    writeFileSync(path, bytes);
    return path;
  });
  return {
    model,
    web,
    files,
    webSettings: {
      searchProvider: "searxng",
      searchUrl: web.url("/searxng"),
      archiveUrl: web.url("/wayback/available"),
      // The demo's pages are static: the text browser reads them (no Chromium needed).
      browser: "text",
      allowPrivateAddresses: true,
    },
    async close() {
      await model.close();
      await web.close();
    },
  };
}
