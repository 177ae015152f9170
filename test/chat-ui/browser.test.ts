import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { chatRules, DEMO_FILES, DEMO_REPORT_PAGES } from "../../src/apps/chat/demo-trajectories.ts";
import { action } from "../../src/apps/qa/demo-trajectories.ts";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
} from "../../src/testing/scripted-openai-server.ts";
import { CHROMIUM_FLAGS } from "../../src/web/chromium.ts";
import { type CliRun, cliEnv, spawnCli } from "../app/cli-helpers.ts";
import { makePdf } from "../chat/documents.ts";
import { postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";
import { waitForStderr } from "../server/processes.ts";

// LangChain's agent-chat-ui, built from its public source (test/fixtures/chat-ui/build.sh, `npm
// run test:chat-ui`), served by `next start`, in headless Debian Chromium driven by playwright-core,
// against `codehop serve` + one `codehop worker` on a throwaway PostgreSQL. The user types in the
// UI's setup form (server URL, graph id, API key), so the browser calls the server straight from
// the page: CORS (`--cors-origin`) and the `X-Api-Key` header as the UI sends them. Only the model
// is scripted (src/testing/scripted-openai-server.ts). Three rounds: a streamed reply, a PDF
// attached with the UI's file button and answered with a citation, and a tool call that needs
// approval, shown as the UI's approve form and approved with its button.
//
// The UI's build is not part of the repository (nor of CI, which cannot reach GitHub): without it
// this file is skipped, saying so. CODEHOP_CHAT_UI_SCREENSHOTS=<dir> saves what the browser shows.

const ROOT = join(import.meta.dirname, "../..");
const UI_DIR = process.env.CODEHOP_CHAT_UI_DIR ?? join(ROOT, ".cache/agent-chat-ui");
const uiMissing = !existsSync(join(UI_DIR, ".next/BUILD_ID"));
const SHOTS = process.env.CODEHOP_CHAT_UI_SCREENSHOTS;
const CHROMIUM = process.env.CODEHOP_CHROMIUM_PATH ?? "/usr/bin/chromium";
const KEY = "chat-ui-browser-test-key-0123456789";
const GRAPHS = join(ROOT, "test/fixtures/chat-ui/langgraph.json");

const HELLO = "Hello! What can you do?";
const HELLO_REPLY =
  "Hello! I answer questions about the files you attach, citing the page or section I read.";
const SPAN = "How long is the main span, in feet?";
const NOTE = "repaint the north arch in May";
const SAVE = `Please save a note: ${NOTE}.`;

const rules = [
  ...chatRules([
    {
      message: HELLO,
      steps: [
        action("A greeting: no tool is needed.", `final_answer(${JSON.stringify(HELLO_REPLY)});`),
      ],
      expect: { reply: HELLO_REPLY, cites: [] },
    },
    {
      message: SPAN,
      steps: [
        action(
          "I search the attached report for the span.",
          `console.log(await search_files("main span length"));`,
        ),
        action(
          "The span is 503 m; I convert it in code.",
          `final_answer(\`The main span is 503 metres, about \${Math.round(503 * 3.28084)} feet [${DEMO_FILES.report}, p. 1].\`);`,
        ),
      ],
      expect: { reply: "about 1650 feet", cites: [`${DEMO_FILES.report}, p. 1`] },
    },
    {
      message: SAVE,
      steps: [
        action(
          "save_note needs the user's approval; I call it and report what it returned.",
          `const r = await save_note(${JSON.stringify(NOTE)});\nfinal_answer("Note " + r + ": ${NOTE}.");`,
        ),
      ],
      expect: { reply: "Note saved", cites: [] },
    },
  ]),
];

const cluster = useTestCluster();
let model: ScriptedOpenAIServer;
let server: CliRun | undefined;
let worker: CliRun | undefined;
let next: ChildProcess | undefined;
let browser: Browser | undefined;
let page: Page;
let workerHome: string;
let uiUrl: string;
let apiUrl: string;
/** Every run stream the page opened: its URL and the event names it received. */
const streams: Array<{ url: string; events: string[] }> = [];

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** `next start` of the built UI on a free port; resolves when it answers. */
async function startUi(): Promise<string> {
  const port = await freePort();
  next = spawn(
    process.execPath,
    [
      join(UI_DIR, "node_modules/next/dist/bin/next"),
      "start",
      "-p",
      String(port),
      "-H",
      "127.0.0.1",
    ],
    { cwd: UI_DIR, env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1" }, stdio: "ignore" },
  );
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).ok) return url;
    } catch {
      // not listening yet
    }
    if (next.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`agent-chat-ui (next start in ${UI_DIR}) did not answer on ${url}`);
}

async function shot(name: string) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `${name}.png`) });
}

/** Types a message in the UI's composer and sends it with its button. */
async function send(text: string) {
  await page.getByPlaceholder("Type your message...").fill(text);
  await page.locator('button[type="submit"]').click();
}

beforeAll(async () => {
  if (postgresMissing || uiMissing) return;
  const databaseUrl = await cluster().createDatabase("chat_ui_browser");
  model = await ScriptedOpenAIServer.start({ responder: trajectoryResponder(rules) });
  workerHome = mkdtempSync(join(tmpdir(), "codehop-chat-ui-worker-"));
  const env = (home: string) =>
    cliEnv({
      OPENAI_BASE_URL: model.baseURL,
      OPENAI_API_KEY: "scripted",
      CODEHOP_MODEL: "scripted",
      CODEHOP_MAX_RETRIES: "0",
      CODEHOP_DATABASE_URL: databaseUrl,
      CODEHOP_HOME: home,
    });
  uiUrl = await startUi();
  server = spawnCli(
    ["serve", "--port", "0", "--graphs", GRAPHS, "--api-key", KEY, "--cors-origin", uiUrl],
    env(mkdtempSync(join(tmpdir(), "codehop-chat-ui-server-"))),
  );
  apiUrl = (await waitForStderr(server, /listening on (http:\/\/\S+)/, "codehop serve"))[1];
  worker = spawnCli(
    ["worker", "--graphs", GRAPHS, "--worker-id", "ui1", "--concurrency", "1"],
    env(workerHome),
  );
  await waitForStderr(worker, /ui1 ready/, "codehop worker");
  const { chromium } = await import("playwright-core");
  browser = await chromium.launch({ executablePath: CHROMIUM, args: [...CHROMIUM_FLAGS] });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(90_000);
  if (process.env.CHATUI_DEBUG) {
    page.on("console", (m) => console.error(`console.${m.type()}: ${m.text()}`));
    page.on("requestfinished", async (r) => {
      const res = await r.response();
      if (!r.url().startsWith(apiUrl)) return;
      const body = await res?.text().catch((e) => `(${e})`);
      console.error(
        `${r.method()} ${r.url()} ${r.postData()?.slice(0, 300)} -> ${res?.status()} ${body?.slice(0, 1500)}`,
      );
    });
    page.on("requestfailed", (r) =>
      console.error(`FAILED ${r.method()} ${r.url()} ${r.failure()?.errorText}`),
    );
  }
  page.on("response", async (res) => {
    if (!/\/stream$/.test(new URL(res.url()).pathname)) return;
    const body = await res.text().catch(() => "");
    streams.push({
      url: res.url(),
      events: [...body.matchAll(/^event: (\S+)/gm)].map((m) => m[1]),
    });
  });
}, 300_000);

afterAll(async () => {
  await browser?.close();
  for (const run of [worker, server])
    if (run && run.child.exitCode === null) run.child.kill("SIGKILL");
  await Promise.all([worker?.done, server?.done]);
  if (next && next.exitCode === null) next.kill("SIGKILL");
  await model?.close();
});

afterEach(async (ctx) => {
  if (ctx.task.result?.state !== "fail" || !page) return;
  // What the user saw, and what the processes said: a failure here is read from these.
  await shot(`failed-${ctx.task.name.slice(0, 30).replace(/\W+/g, "-")}`);
  const text = await page
    .locator("body")
    .innerText()
    .catch(() => "");
  console.error(
    `page text:\n${text.slice(-3000)}\n--- streams: ${JSON.stringify(streams)}\n--- worker:\n${worker?.stderr().slice(-3000)}\n--- server:\n${server?.stderr().slice(-2000)}`,
  );
});

describe.skipIf(postgresMissing || uiMissing)(
  `agent-chat-ui in Chromium against codehop serve${uiMissing ? ` (skipped: no build in ${UI_DIR}; npm run test:chat-ui builds it)` : ""}`,
  { timeout: 240_000 },
  () => {
    it("connects through its setup form with the server's URL, graph id and API key", async () => {
      await page.goto(uiUrl);
      await page.locator("#apiUrl").fill(apiUrl);
      await page.locator("#assistantId").fill("chat_notes");
      await page.locator("#apiKey").fill(KEY);
      await page.getByRole("button", { name: "Continue" }).click();
      await expect.poll(() => page.getByPlaceholder("Type your message...").count()).toBe(1);
      // No "Failed to connect" toast: GET /info answered the page (CORS, X-Api-Key).
      await page.waitForTimeout(1000);
      expect(await page.getByText("Failed to connect to LangGraph server").count()).toBe(0);
    });

    it("sends a message and shows the streamed reply", async () => {
      await send(HELLO);
      await page.getByText(HELLO_REPLY).waitFor();
      await shot("chat-ui-reply");
      // The reply came over the run's event stream, as values and messages events.
      await expect.poll(() => streams.length).toBe(1);
      expect(streams[0].events).toContain("values");
      expect(streams[0].events.some((e) => e.startsWith("messages"))).toBe(true);
      expect(streams[0].events).not.toContain("error");
    });

    it("attaches a PDF with the file button and shows a cited answer", async () => {
      const pdf = await makePdf(DEMO_REPORT_PAGES);
      await page
        .locator("#file-input")
        .setInputFiles({ name: DEMO_FILES.report, mimeType: "application/pdf", buffer: pdf });
      await page.getByText(DEMO_FILES.report).first().waitFor();
      await send(SPAN);
      await page.getByText(`about 1650 feet [${DEMO_FILES.report}, p. 1]`).waitFor();
      await shot("chat-ui-cited");
    });

    it("shows a paused tool call (save_note, approval: always) as its approve form; Approve runs it", async () => {
      await send(SAVE);
      // agent-chat-ui draws an interrupt only under the conversation's last message when that is
      // an AI or tool message: the round opened its reply (an empty AI message) before its agent
      // paused, so the form is there, naming the tool and its argument.
      const approve = page.getByRole("button", { name: "Approve", exact: true });
      await approve.waitFor();
      await page.getByText("save_note").first().waitFor();
      await page.getByText(NOTE).first().waitFor();
      await shot("chat-ui-approval");
      // Nothing ran before the approval.
      expect(existsSync(join(workerHome, "notes.log"))).toBe(false);
      await approve.click();
      await page.getByText(`Note saved: ${NOTE}.`).waitFor();
      expect(readFileSync(join(workerHome, "notes.log"), "utf8")).toBe(`${NOTE}\n`);
      // The reply took the place of the open reply: one answer under the request, no form left.
      await expect.poll(() => approve.count()).toBe(0);
      await shot("chat-ui-approved");
    });
  },
);
