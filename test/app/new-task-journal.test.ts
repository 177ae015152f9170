import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureDemoCorpus, startDemoModelServer } from "../../src/apps/qa/demo.ts";
import { DEMO_ANSWERS, DEMO_QUESTIONS } from "../../src/apps/qa/demo-trajectories.ts";
import { createManagerGraph, MANAGER_RECURSION_LIMIT } from "../../src/apps/qa/team.ts";
import {
  openPersistence,
  type SqlitePersistence as Persistence,
} from "../../src/persistence/index.ts";
import type { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";

// Two questions on one thread of the three-agent system through the LangGraph API (manager ->
// wikipedia_search -> page_search; ChatOpenAI over HTTP to the scripted server, the demo corpus,
// SqliteSaver + SqliteCallJournal). The second question's calls sit at the first one's positions
// (steps restart at 1); replaying either question must be served that question's recorded calls.
let server: ScriptedOpenAIServer;
let corpus: string;
let persistence: Persistence;

beforeAll(async () => {
  const home = mkdtempSync(join(tmpdir(), "codehop-new-task-app-"));
  corpus = await ensureDemoCorpus(home);
  server = await startDemoModelServer();
  persistence = openPersistence(home);
});
afterAll(async () => {
  persistence?.close();
  await server?.close();
});

const RULES = ["manager:towers", "wiki:eiffel", "wiki:empire", "page:empire"] as const;
const PLYWOOD = ["manager:plywood", "wiki:plywood", "page:plywood", "wiki:ethanol"] as const;
const requests = (rules: readonly string[]) =>
  Object.fromEntries(rules.map((r) => [r, server.requestsFor(r).length]));

function config(extra: Record<string, unknown> = {}) {
  return {
    recursionLimit: MANAGER_RECURSION_LIMIT,
    configurable: {
      thread_id: "two-questions",
      model: "scripted",
      modelSettings: { baseURL: server.baseURL, apiKey: "k" },
      corpus,
      journal: persistence.journal,
      ...extra,
    },
  };
}

describe("two questions on one thread of the manager graph", () => {
  it("runs the second question for real, and replays of either question are served their own calls", async () => {
    const graph = createManagerGraph({ checkpointer: persistence.checkpointer });
    const first = (await graph.invoke({ question: DEMO_QUESTIONS.towers }, config())) as any;
    expect(first.answer).toBe(DEMO_ANSWERS.towers);
    const second = (await graph.invoke({ question: DEMO_QUESTIONS.plywood }, config())) as any;
    expect(second).toMatchObject({ answer: DEMO_ANSWERS.plywood, taskEpoch: 1 });
    expect(Object.values(requests(PLYWOOD)).every((n) => n > 0)).toBe(true);

    // Every level recorded the second question's calls under the root's epoch 1.
    const entries = await persistence.journal.entries("two-questions");
    const epochsOf = (tool: string) =>
      new Set(entries.filter((e) => e.tool === tool).map((e) => e.taskEpochs.join(".")));
    expect(epochsOf("wikipedia_search_agent")).toEqual(new Set(["", "1"]));
    expect(new Set(entries.map((e) => e.taskEpochs.join(".")))).toEqual(new Set(["", "1"]));
    const deepest = Math.max(...entries.map((e) => e.checkpointNs.split("|act:").length));
    expect(deepest).toBe(3); // the page agent's calls, inside a wikipedia_search call

    // The checkpoints where each question is about to run its first action.
    const starts: { id: string; question: string }[] = [];
    for await (const snap of graph.getStateHistory(config())) {
      const v = snap.values as Record<string, any>;
      if (snap.next.includes("act") && v.stepCount === 0)
        starts.push({ id: snap.config.configurable?.checkpoint_id as string, question: v.task });
    }
    expect(starts.map((s) => s.question)).toEqual([DEMO_QUESTIONS.plywood, DEMO_QUESTIONS.towers]);

    for (const [start, answer, rules] of [
      [starts[1], DEMO_ANSWERS.towers, RULES],
      [starts[0], DEMO_ANSWERS.plywood, PLYWOOD],
    ] as const) {
      const before = requests(rules);
      const replayed = (await graph.invoke(
        null,
        config({ checkpoint_id: start.id, journal: persistence.journal.forReplay() }),
      )) as any;
      expect(replayed.answer).toBe(answer);
      // The first action's sub-agent calls came from the journal: only the manager planned again.
      const manager = rules[0];
      const after = requests(rules);
      expect({ ...after, [manager]: 0 }).toEqual({ ...before, [manager]: 0 });
      expect(after[manager]).toBeGreaterThan(before[manager]);
      expect(
        replayed.steps[0].toolCalls.every((c: { fromJournal: boolean }) => c.fromJournal),
      ).toBe(true);
    }
  });
});
