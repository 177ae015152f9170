import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  assistantDemoResponder,
  demoFiles,
  demoSite,
} from "../../src/apps/assistant/demo-trajectories.ts";
import { ScriptedOpenAIServer, type Responder } from "../../src/testing/scripted-openai-server.ts";
import { WebTestServer } from "../../src/testing/web-test-server.ts";

/** The assistant's offline world for a test: the demo site, its files on disk, a scripted model. */
export interface AssistantWorld {
  web: WebTestServer;
  model: ScriptedOpenAIServer;
  home: string;
  /** The demo files written to a folder, by name. */
  files: Record<string, string>;
  /** Run configuration for assist() / the lifecycle. */
  config: () => Record<string, unknown>;
  /** Web settings pointing the search provider and archive at the local server. */
  webSettings: () => Record<string, unknown>;
  close(): Promise<void>;
}

export async function startAssistantWorld(
  responder?: (origin: string) => Responder,
): Promise<AssistantWorld> {
  const web = await WebTestServer.start(demoSite());
  const model = await ScriptedOpenAIServer.start({
    responder: (responder ?? assistantDemoResponder)(web.origin),
  });
  const home = mkdtempSync(join(tmpdir(), "codehop-assistant-"));
  const dir = mkdtempSync(join(tmpdir(), "codehop-assistant-files-"));
  const files: Record<string, string> = {};
  for (const [name, bytes] of Object.entries(demoFiles())) {
    files[name] = join(dir, name);
    writeFileSync(files[name], bytes);
  }
  return {
    web,
    model,
    home,
    files,
    config: () => ({
      home,
      baseURL: model.baseURL,
      apiKey: "scripted",
      model: "scripted",
      models: {},
    }),
    webSettings: () => ({
      searchProvider: "searxng",
      searchUrl: web.url("/searxng"),
      archiveUrl: web.url("/wayback/available"),
      browser: "text",
    }),
    async close() {
      await model.close();
      await web.close();
    },
  };
}
