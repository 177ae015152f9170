import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { DEFAULT_CAPABILITIES } from "../src/core/settings.ts";
import { PROMPT_FILES, loadPromptSet, renderAllPrompts } from "../src/core/prompts.ts";
import {
  PROMPTS_DIR,
  listPromptFiles,
  loadPrompt,
  placeholders,
  renderTemplate,
} from "../src/prompts/render.ts";
import { defineTool } from "../src/tools/define-tool.ts";

/**
 * Renders every prompt file under prompts/. Code-agent prompt sets (prompts/code_agent and any
 * agent folder overriding its files) go through the real rendering functions the agent uses, so a
 * missing or unknown placeholder fails here, not in a run. Other prompt files are rendered strictly
 * with the values in their folder's `_samples.json` when present, else with one sample value per
 * placeholder (which still catches malformed braces).
 */
const files = listPromptFiles();
/** File names rendered by the code-agent renderer inside an agent folder. */
const codeAgentFiles = new Set([...Object.values(PROMPT_FILES), "managed_task.md"]);
const folders = [...new Set(files.map((f) => dirname(f)))];

const tools = [
  defineTool({
    name: "search_wikipedia",
    description: "Searches Wikipedia.",
    parameters: z.object({ query: z.string().describe("search terms") }),
    returns: "string",
    invoke: async () => "",
  }),
  defineTool({
    name: "page_agent",
    description: "Reads one page and answers a question about it.",
    parameters: z.object({ task: z.string() }),
    returns: "string",
    isAgent: true,
    invoke: async () => "",
  }),
];

/** A folder holds a code-agent prompt set when it has a system.md (or is one of the defaults). */
function isAgentFolder(dir: string): boolean {
  return (
    dir === "code_agent" ||
    existsSync(join(PROMPTS_DIR, dir, "system.md")) ||
    existsSync(join(PROMPTS_DIR, dir, "planning.md"))
  );
}

it("finds the default prompt files", () => {
  for (const f of [
    "code_agent/system.md",
    "code_agent/planning.md",
    "code_agent/task.md",
    "managed_agent/task.md",
  ]) {
    expect(files).toContain(f);
  }
});

describe.each(folders.filter(isAgentFolder))("agent prompt set prompts/%s", (dir) => {
  it("renders every prompt through the code-agent renderer", () => {
    const set = loadPromptSet(dir === "code_agent" ? undefined : dir);
    const out = renderAllPrompts(
      set,
      {
        agentName: "sample_agent",
        agentDescription: "answers sample questions",
        tools,
        capabilities: DEFAULT_CAPABILITIES,
      },
      "Sample task?",
    );
    for (const [key, text] of Object.entries(out)) {
      expect(text, key).not.toMatch(/\{\{|\}\}/);
      expect(text.trim().length, key).toBeGreaterThan(0);
    }
    expect(out.system).toContain("async function search_wikipedia(query: string): Promise<string>");
    expect(out.system).toContain("Team members");
    expect(out.system).toContain("async function page_agent(task: string)");
    expect(out.planning).toContain("Facts survey");
    expect(out.task).toContain("Sample task?");
  });
});

describe.each(
  files.filter((f) => !isAgentFolder(dirname(f)) || !codeAgentFiles.has(f.split("/").pop()!)),
)("prompt file prompts/%s", (file) => {
  it("renders strictly", () => {
    const template = loadPrompt(file);
    const samplesPath = join(PROMPTS_DIR, dirname(file), "_samples.json");
    const names = placeholders(template);
    let vars: Record<string, string>;
    if (existsSync(samplesPath)) {
      const all = JSON.parse(readFileSync(samplesPath, "utf8")) as Record<string, string>;
      vars = Object.fromEntries(names.map((n) => [n, all[n]]));
    } else {
      vars = Object.fromEntries(names.map((n) => [n, `<${n}>`]));
    }
    const out = renderTemplate(template, vars, file);
    expect(out).not.toMatch(/\{\{|\}\}/);
    expect(out.trim().length).toBeGreaterThan(0);
  });
});

it("the managed-agent wrapper carries the task and the agent's name", () => {
  const out = renderAllPrompts(
    loadPromptSet(),
    { agentName: "page_search", agentDescription: "d", tools: [], capabilities: [] },
    "Find the height of the tower.",
  );
  expect(out.managedTask).toContain("page_search");
  expect(out.managedTask).toContain("Find the height of the tower.");
  expect(out.system).not.toContain("Team members");
});
