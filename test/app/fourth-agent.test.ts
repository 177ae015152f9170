import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { qaApp } from "../../src/apps/qa/app.ts";
import { ensureDemoCorpus } from "../../src/apps/qa/demo.ts";
import { qaTeam, type ReferenceAgentOptions } from "../../src/apps/qa/team.ts";
import { labelSubgraphs } from "../../src/cli/commands/graph.ts";
import { readEnv } from "../../src/config/env.ts";
import { ResultsStore } from "../../src/eval/results-store.ts";
import { runEval } from "../../src/eval/runner.ts";
import { createCodeAgent } from "../../src/framework/code-agent.ts";
import {
  buildTeamAgent,
  memberBase,
  teamAgentNames,
  withTeamMember,
} from "../../src/framework/team.ts";
import type { AppGraph, RunApp } from "../../src/runs/app.ts";
import { threadHistory, traceThread } from "../../src/runs/inspect.ts";
import { startRun } from "../../src/runs/lifecycle.ts";
import { RunProgress } from "../../src/runs/progress.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";

// Adding an agent to the QA team through the registry alone: a `units` agent (its create + its
// tool), appended to the manager's children by one registry call. No other file knows it, yet the
// live tree, `codehop graph`'s labels, the history and the model checks name it.

const team = withTeamMember<ReferenceAgentOptions>(
  qaTeam,
  {
    name: "units",
    prompts: "units",
    children: [],
    create: (build) =>
      createCodeAgent({
        ...memberBase(build),
        description: "converts between units of measurement",
        maxSteps: 2,
      }),
    tool: (agent) =>
      agent.asTool({
        name: "units_agent",
        description: "Asks the units agent to convert a quantity. Returns the converted value.",
        parameters: z.object({ query: z.string().describe("e.g. 330 m in feet") }),
        toInput: ({ query }) => ({ task: query }),
      }),
  },
  { parent: "manager" },
);

/** The QA app with the extended team: the same lifecycle, the registry's agents. */
const app: RunApp = {
  ...qaApp,
  team,
  graph: (checkpointer) => {
    const graph = buildTeamAgent(team, {}, { withInput: true }).builder.compile({ checkpointer });
    graph.name = "manager";
    return graph as AppGraph;
  },
};

const action = (code: string) => `Thought: go\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;
let server: ScriptedOpenAIServer;
let home: string;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "codehop-fourth-"));
  server = await ScriptedOpenAIServer.start({
    responder: (req) => {
      const system = req.messages[0].content;
      if (system.startsWith("You are units:"))
        return action("final_answer(`${Math.round(330 * 3.28084)} feet`)");
      if (system.includes("You are the manager agent")) {
        // Step 1 asks the units agent; step 2 (an observation is in the prompt) answers.
        const seen = req.messages.some((m) => m.content.startsWith("Observation:"));
        return seen
          ? action('final_answer("The tower is about 1083 feet tall.")')
          : action('console.log(await units_agent("330 m in feet"))');
      }
      return action('final_answer("unexpected agent")');
    },
  });
});
afterAll(() => server?.close());

describe("a fourth agent added to the QA team through the registry alone", () => {
  it("is evaluated: `codehop eval`'s agentic system records its transcript and its usage", async () => {
    const corpus = await ensureDemoCorpus(home);
    const dataset = join(home, "units.jsonl");
    writeFileSync(
      dataset,
      `${JSON.stringify({ id: "u1", question: "How tall is a 330 m tower in feet?", answer: "1083 feet" })}\n`,
    );
    const out = join(home, "eval-out");
    const res = await runEval({
      dataset,
      out,
      app,
      systems: ["agentic"],
      env: readEnv({
        OPENAI_BASE_URL: server.baseURL,
        OPENAI_API_KEY: "k",
        CODEHOP_MODEL: "scripted",
        CODEHOP_CORPUS: corpus,
        CODEHOP_MAX_RETRIES: "0",
      }),
      log: () => undefined,
    });
    const [result] = res.report.results;
    expect(result.error).toBeUndefined();
    expect(result.prediction).toBe("The tower is about 1083 feet tall.");
    expect(res.report.config.systems).toMatchObject({
      agentic: { agents: ["manager", "wikipedia_search", "page_search", "units"] },
    });
    // Usage per agent, the units agent's own line included.
    expect(Object.keys(result.usage).sort()).toEqual(["manager", "units"]);
    expect(result.usage.units.calls).toBe(1);
    // The transcripts: one per agent invocation, the units agent's under its own name (not the
    // system's fallback), with its system prompt and its answer.
    const transcripts = new ResultsStore(out).transcripts("agentic", "u1");
    expect(transcripts.map((t) => t.agent)).toEqual(["manager", "units"]);
    const units = transcripts.find((t) => t.agent === "units")!;
    expect(units.messages[0].content).toMatch(/^You are units:/);
    expect(units.messages.at(-1)!.role).toBe("assistant");
    expect(units.messages.at(-1)!.content).toContain(
      "final_answer(`${Math.round(330 * 3.28084)} feet`)",
    );
  });

  it("is built into the team and named in its model checks", () => {
    expect(teamAgentNames(team)).toEqual(["manager", "wikipedia_search", "page_search", "units"]);
    expect(team.members.find((m) => m.name === "manager")!.children).toEqual([
      "wikipedia_search",
      "units",
    ]);
  });

  it("runs, and is labelled by its own name in the live tree, the history, the trace and the drawing", async () => {
    const corpus = await ensureDemoCorpus(home);
    const lines: string[] = [];
    const progress = new RunProgress({ rootName: "manager", onLine: (l) => lines.push(l) });
    const result = await startRun(app, "How tall is a 330 m tower in feet?", {
      threadId: "four",
      config: { home, corpus, baseURL: server.baseURL, apiKey: "k", model: "scripted" },
      onEvent: (e) => progress.apply(e),
    });
    expect(result.answer).toBe("The tower is about 1083 feet tall.");
    expect(Object.keys(result.usage.by_agent).sort()).toEqual(["manager", "units"]);

    // The live tree (what `codehop ask` draws): the units run nested under the manager's step 1.
    const child = progress.root!.steps[0].children[0];
    expect(child.name).toBe("units");
    expect(child.answer).toBe("1083 feet");
    expect(lines.some((l) => l.startsWith("  [units] started"))).toBe(true);

    // `codehop history --all`: the units agent's checkpoints carry its name.
    const { openPersistence } = await import("../../src/persistence/index.ts");
    const persistence = openPersistence(home);
    try {
      const rows = await threadHistory(app, "four", { persistence, allNamespaces: true });
      expect(new Set(rows.map((r) => r.agent))).toEqual(new Set(["manager", "units"]));
      expect(rows.filter((r) => r.namespace).every((r) => r.agent === "units")).toBe(true);
      // `codehop show`: the tree rebuilt from the checkpoints names it too.
      const traced = await traceThread(app, "four", { persistence });
      expect(traced.root!.steps[0].children.map((c) => c.name)).toEqual(["units"]);
    } finally {
      persistence.close();
    }

    // `codehop graph`: the manager's act node holds two agents; the one LangGraph draws is named.
    const graph = app.graph(undefined as never);
    const mermaid = await labelSubgraphs(
      (await graph.getGraphAsync({ xray: true })).drawMermaid(),
      graph as never,
    );
    expect(mermaid).toContain('subgraph act["units agent (1 of 2 in act)"]');
  });
});
