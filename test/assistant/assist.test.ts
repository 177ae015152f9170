import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assist } from "../../src/apps/assistant/app.ts";
import { AssistantFiles } from "../../src/apps/assistant/base/files.ts";
import {
  DEMO_ANSWER,
  DEMO_TASK,
  demoSpreadsheetName,
} from "../../src/apps/assistant/demo-trajectories.ts";
import type { AskResult } from "../../src/runs/result.ts";
import { startAssistantWorld, type AssistantWorld } from "./world.ts";

// The whole assistant over real HTTP: the scripted model, a local website with a SearxNG-compatible
// search, a PDF and an XLSX made by the test; the replies depend on what the tools returned.

let world: AssistantWorld;
let result: AskResult;
beforeAll(async () => {
  world = await startAssistantWorld();
  result = await assist(DEMO_TASK, {
    config: world.config(),
    files: Object.values(world.files),
    web: world.webSettings(),
    threadId: "demo-task",
  });
}, 240_000);
afterAll(() => world?.close());

describe("assist()", () => {
  it("answers from the web, the PDF and the spreadsheet", () => {
    expect(result.status).toBe("final_answer");
    expect(result.answer).toBe(DEMO_ANSWER);
  });

  it("ran the team: the assistant planned, the web agent searched, read and found in the page", () => {
    const rules = world.model.requests.map((r) => r.rule);
    expect(rules).toContain("plan:assistant");
    expect(rules).toContain("plan:web_search");
    expect(rules.filter((r) => r === "web_search").length).toBe(3);
    expect(world.web.requests.some((r) => r.path.startsWith("/searxng/search?q=City"))).toBe(true);
    expect(world.web.hits("/tourism/museums-2024")).toBe(1);
    expect(Object.keys(result.usage.by_agent).sort()).toEqual(
      expect.arrayContaining(["assistant", "web_search", "inspector"]),
    );
  });

  it("reports the page it read as a source", () => {
    expect(result.sources.map((s) => s.url)).toContain(world.web.url("/tourism/museums-2024"));
  });

  it("keeps the task's files in the thread's folder", () => {
    const files = new AssistantFiles(world.home).list("demo-task");
    expect(files).toEqual(["annual-report-2023.pdf", demoSpreadsheetName()]);
  });

  it("returns the stored result when the same task runs again on the thread", async () => {
    const before = world.model.requests.length;
    const again = await assist(DEMO_TASK, {
      config: world.config(),
      files: Object.values(world.files),
      web: world.webSettings(),
      threadId: "demo-task",
    });
    expect(again.answer).toBe(DEMO_ANSWER);
    expect(world.model.requests.length).toBe(before);
    expect(new AssistantFiles(world.home).list("demo-task")).toHaveLength(2);
  });
});
