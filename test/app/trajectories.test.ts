import { beforeAll, describe, expect, it } from "vitest";
import {
  DEMO_ANSWERS,
  DEMO_QUESTIONS,
  DEMO_SUBTASKS,
} from "../../src/apps/qa/demo-trajectories.ts";
import { RunProgress } from "../../src/runs/progress.ts";
import { ask } from "../../src/apps/qa/app.ts";
import { MemorySaver } from "@langchain/langgraph";
import { createManagerGraph, MANAGER_RECURSION_LIMIT } from "../../src/apps/qa/team.ts";
import type { Persistence } from "../../src/persistence/index.ts";
import type { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";
import { useDemoWorld } from "./fixtures.ts";
import { foldVariables } from "../../src/core/variables.ts";

// End to end: real graphs, real ChatOpenAI over HTTP to a local scripted server, real sandbox,
// real corpus search over data/demo-corpus.jsonl, real SQLite checkpoints. Only the model is scripted.
const world = useDemoWorld("codehop-traj-", { persistence: true });
let server: ScriptedOpenAIServer;
let persistence: Persistence;
beforeAll(() => {
  ({ server, persistence } = world);
});

const config = () => world.config();
const count = (rule: string) => server.requestsFor(rule).length;

async function managerState(threadId: string) {
  const graph = createManagerGraph({ checkpointer: persistence.checkpointer });
  return (await graph.getState({ configurable: { thread_id: threadId } })).values as Record<
    string,
    any
  >;
}

describe("the manager graph as a LangGraph API", () => {
  it("graph.invoke({ question }, { configurable: { thread_id } }) returns answer, sources and usage per agent", async () => {
    const graph = createManagerGraph({ checkpointer: new MemorySaver() });
    const out = (await graph.invoke(
      { question: DEMO_QUESTIONS.ming },
      {
        configurable: {
          thread_id: "api-1",
          model: "scripted",
          modelSettings: { baseURL: server.baseURL, apiKey: "k" },
          corpus: world.corpus,
        },
        recursionLimit: MANAGER_RECURSION_LIMIT,
      },
    )) as Record<string, any>;
    expect(out.answer).toBe(DEMO_ANSWERS.ming);
    expect(out.sources.map((s: { title: string }) => s.title)).toEqual(
      expect.arrayContaining(["Ming dynasty", "Fall of Constantinople"]),
    );
    expect(Object.keys(out.usage).sort()).toEqual(["manager", "page_search", "wikipedia_search"]);
    expect(out.usage.page_search.calls).toBe(3);
  });
});

describe("reference trajectories over the demo corpus", () => {
  it("Eiffel Tower vs Empire State Building: the manager computes 1930 - 1889 = 41 in code", async () => {
    const lines: string[] = [];
    const progress = new RunProgress({ onLine: (l) => lines.push(l) });
    const result = await ask(DEMO_QUESTIONS.towers, {
      threadId: "towers",
      config: config(),
      persistence,
      onEvent: (e) => progress.apply(e),
    });
    expect(result.answer).toBe(DEMO_ANSWERS.towers);
    expect(result.status).toBe("final_answer");
    expect(result.thread_id).toBe("towers");
    expect(result.sources.map((s) => s.title)).toEqual(
      expect.arrayContaining(["Eiffel Tower", "Empire State Building"]),
    );
    // Every agent's model calls are accounted for, rolled up into the manager's result.
    expect(result.usage.by_agent.manager.calls).toBe(2);
    expect(result.usage.by_agent.wikipedia_search.calls).toBe(5);
    expect(result.usage.by_agent.page_search.calls).toBe(2);
    expect(result.usage.total.calls).toBe(9);
    expect(result.usage.total.input_tokens).toBeGreaterThan(0);
    expect([
      count("manager:towers"),
      count("wiki:eiffel"),
      count("wiki:empire"),
      count("page:empire"),
    ]).toEqual([2, 2, 3, 2]);

    const state = await managerState("towers");
    const [first, last] = state.steps;
    expect(first.toolCalls.map((c: any) => [c.tool, c.args.query])).toEqual([
      ["wikipedia_search_agent", DEMO_SUBTASKS.eiffel],
      ["wikipedia_search_agent", DEMO_SUBTASKS.empire],
    ]);
    // The sub-agents' answers reached the manager as its observation, from the real corpus.
    expect(first.observation).toContain("1889");
    expect(first.observation).toContain("1930");
    expect(last.code).toContain("started - completed");
    expect(last.isFinalAnswer).toBe(true);
    // The page agent really read the Empire State Building page.
    const pageReq = server.requestsFor("page:empire").at(-1)!;
    expect(
      pageReq.request.messages.findLast((m) => m.content.startsWith("Observation:"))!.content,
    ).toContain("17 March 1930");
    // The live view counted every model call once, matching the run's own accounting.
    expect(progress.totals).toEqual({
      calls: result.usage.total.calls,
      inputTokens: result.usage.total.input_tokens,
      outputTokens: result.usage.total.output_tokens,
    });
    // The live view saw all three levels, nested.
    expect(lines).toContain(
      `    [page_search] started: Retrieve information about the query: "${DEMO_SUBTASKS.empirePage}" from the Wikipedia page "Empire State Building".`,
    );
    expect(progress.root?.phase).toBe("done");
    expect(progress.render("*").join("\n")).toContain(
      "✓ wikipedia_search: When did construction of the Empire State Building begin?",
    );
  });

  it("birch plywood vs ethanol: two sub-agent calls in one Promise.all, densities compared in code", async () => {
    const result = await ask(DEMO_QUESTIONS.plywood, {
      threadId: "plywood",
      config: config(),
      persistence,
    });
    expect(result.answer).toBe(DEMO_ANSWERS.plywood);
    expect(result.sources.map((s) => s.title)).toEqual(
      expect.arrayContaining(["Birch plywood", "Ethanol"]),
    );
    // Both sub-agents ran at the same time: each started before the other finished.
    const firstOf = (rule: string) => server.requestsFor(rule)[0].index;
    const lastOf = (rule: string) => server.requestsFor(rule).at(-1)!.index;
    expect(firstOf("wiki:ethanol")).toBeLessThan(lastOf("wiki:plywood"));
    expect(firstOf("wiki:plywood")).toBeLessThan(lastOf("wiki:ethanol"));
    const state = await managerState("plywood");
    expect(state.steps[0].toolCalls).toHaveLength(2);
    expect(state.steps[1].code).toContain("plywoodKgM3 / 1000");
    expect(foldVariables(state.variables)!.values).toMatchObject({
      plywoodGcm3: 0.68,
      ethanolGcm3: 0.789,
      floats: true,
    });
  });

  it("a page agent that runs out of steps returns its last observation to the search agent", async () => {
    const before = count("page:ming");
    const result = await ask(DEMO_QUESTIONS.ming, {
      threadId: "ming",
      config: config(),
      persistence,
    });
    expect(result.answer).toBe(DEMO_ANSWERS.ming);
    // maxSteps 3: three actions, no final answer, no fourth request.
    expect(count("page:ming") - before).toBe(3);
    // The wikipedia_search agent's next prompt carries the page agent's last observation
    // (passages retrieved by its third action).
    const wikiAfter = server
      .requestsFor("wiki:ming")
      .filter((r) => r.step === 1)
      .at(-1)!;
    const observation = wikiAfter.request.messages.findLast((m) =>
      m.content.startsWith("Observation:"),
    )!.content;
    expect(observation).toContain("Jingtai Emperor");
    expect(observation).toContain(
      'Retrieved passages for query "fifteenth century Constantinople fell"',
    );
  });
});
