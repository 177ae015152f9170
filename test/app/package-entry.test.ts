import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDemoModelServer } from "../../src/apps/qa/demo.ts";
import { DEMO_ANSWERS, DEMO_QUESTIONS } from "../../src/apps/qa/demo-trajectories.ts";
import type { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";

const run = promisify(execFile);
const repo = process.cwd();
let pkg: string;
let consumer: string;
let server: ScriptedOpenAIServer;

/**
 * `import "codehop"` from plain Node (no tsx): the package's own `npm run build` runs in a copy of
 * the package (so it cannot race a build in the working tree), and a separate project that
 * depends on it imports it by name through package.json "exports".
 */
beforeAll(async () => {
  const root = mkdtempSync(join(tmpdir(), "codehop-pkg-"));
  pkg = join(root, "codehop");
  mkdirSync(pkg);
  for (const file of ["package.json", "tsconfig.json", "tsconfig.build.json"])
    cpSync(join(repo, file), join(pkg, file));
  cpSync(join(repo, "src"), join(pkg, "src"), { recursive: true });
  for (const dir of ["node_modules", "prompts", "data"])
    symlinkSync(join(repo, dir), join(pkg, dir), "dir");
  await run("npm", ["run", "build"], { cwd: pkg, timeout: 110_000 });
  consumer = join(root, "consumer");
  mkdirSync(join(consumer, "node_modules"), { recursive: true });
  symlinkSync(pkg, join(consumer, "node_modules", "codehop"), "dir");
  writeFileSync(join(consumer, "package.json"), JSON.stringify({ type: "module" }));
  server = await startDemoModelServer();
}, 120_000);
afterAll(async () => {
  await server?.close();
});

/** Runs an ES module snippet with plain `node` in the consumer project; returns its stdout. */
async function nodeEval(code: string): Promise<string> {
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", code], {
    cwd: consumer,
    env: { PATH: process.env.PATH, HOME: process.env.HOME },
    timeout: 60_000,
  });
  return stdout;
}

describe("the built package", { timeout: 90_000 }, () => {
  it("exports createManagerGraph, ask and the rest of the API as functions under plain Node", async () => {
    const out = await nodeEval(`
      const m = await import("codehop");
      const names = ["createManagerGraph", "ask", "resume", "replay", "history", "createCodeAgent", "openKnowledgeSource", "openPersistence"];
      console.log(JSON.stringify(Object.fromEntries(names.map((n) => [n, typeof m[n]]))));`);
    expect(JSON.parse(out)).toEqual({
      createManagerGraph: "function",
      ask: "function",
      resume: "function",
      replay: "function",
      history: "function",
      createCodeAgent: "function",
      openKnowledgeSource: "function",
      openPersistence: "function",
    });
  });

  it("answers a question from dist/ (prompts, demo data and the sandbox child found from there)", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-pkg-home-"));
    const out = await nodeEval(`
      const { ask, ensureDemoCorpus } = await import("codehop");
      const corpus = await ensureDemoCorpus(${JSON.stringify(home)});
      const result = await ask(${JSON.stringify(DEMO_QUESTIONS.towers)}, {
        config: { baseURL: ${JSON.stringify(server.baseURL)}, apiKey: "k", model: "scripted", home: ${JSON.stringify(home)}, corpus },
      });
      console.log(JSON.stringify(result));
      process.exit(0);`);
    expect(JSON.parse(out)).toMatchObject({ answer: DEMO_ANSWERS.towers, status: "final_answer" });
  });

  it("holds a chat round over the shipped demo PDF and DOCX from dist/ (unpdf, mammoth under plain Node)", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-pkg-chat-"));
    const out = await nodeEval(`
      const { chat, startChatDemo, DEMO_ROUNDS } = await import("codehop");
      const demo = await startChatDemo();
      const round = DEMO_ROUNDS[0];
      const result = await chat("pkg", round.message, {
        ...demo.attachments(round),
        config: { baseURL: demo.model.baseURL, apiKey: "k", model: "scripted", models: {}, home: ${JSON.stringify(home)} },
      });
      await demo.close();
      console.log(JSON.stringify(result));
      process.exit(0);`);
    const result = JSON.parse(out);
    expect(result.attachments.map((a: { ok: boolean }) => a.ok)).toEqual([true, true]);
    expect(result.citations.map((c: { cite: string }) => c.cite)).toEqual([
      "harbor-bridge-report.pdf, p. 1",
      "budget-2025.docx § Budget",
    ]);
  });
});
