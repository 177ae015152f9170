import { describe, expect, it } from "vitest";
import { clip, RunProgress, type StreamEvent } from "../../src/runs/progress.ts";

// Event shapes as LangGraph 1.7 emits them for `stream(..., { subgraphs: true, streamMode:
// ["updates", "tasks"] })`: the manager is the root graph (namespace []); a sub-agent invoked from
// the manager's act node runs under ["act:<id>"], a second concurrent call under ["act:<id>", "1"].
const ACT = "act:11111111-aaaa";
const events: StreamEvent[] = [
  [
    [],
    "tasks",
    {
      id: "s",
      name: "start",
      input: { question: "Does birch plywood float in ethanol?" },
      triggers: [],
    },
  ],
  [
    [],
    "updates",
    { start: { task: "Does birch plywood float in ethanol?", context: {}, agent: "manager" } },
  ],
  [[], "tasks", { id: "p1", name: "plan", input: {}, triggers: [] }],
  [
    [],
    "updates",
    {
      plan: {
        pending: {
          step: 1,
          thought: "Look up both densities.",
          code: "const [a, b] = await Promise.all([\n  wikipedia_search_agent('q1'),\n  wikipedia_search_agent('q2'),\n]);\nconsole.log(a, b);",
        },
      },
    },
  ],
  [[], "tasks", { id: "a1", name: "act", input: {}, triggers: [] }],
  [
    [ACT],
    "tasks",
    {
      id: "c1",
      name: "plan",
      input: {
        task: "You are wikipedia_search, a member of a team. Your manager gave you this task:\nWhat is the density of birch plywood?\nSolve it.",
        // The parent's call stamps the child's name into its input (no name is guessed from depth).
        agent: "wikipedia_search",
      },
      triggers: [],
    },
  ],
  [
    [ACT, "1"],
    "tasks",
    {
      id: "c2",
      name: "plan",
      input: { task: "What is the density of ethanol?", agent: "wikipedia_search" },
      triggers: [],
    },
  ],
  [
    [ACT],
    "updates",
    {
      plan: {
        pending: {
          step: 1,
          thought: "Search.",
          code: "console.log(await search_wikipedia('birch plywood'))",
        },
      },
    },
  ],
  [
    [ACT],
    "updates",
    {
      observe: {
        steps: [
          {
            step: 1,
            kind: "action",
            thought: "Search.",
            code: "x",
            observation: "Final answer: 680 kg/m³",
            error: null,
            isFinalAnswer: true,
          },
        ],
        status: "final_answer",
        answer: "680 kg/m³",
      },
    },
  ],
  [
    [ACT, "1"],
    "updates",
    {
      observe: {
        steps: {
          step: 1,
          kind: "action",
          thought: "t",
          code: "y",
          observation: "Final answer: 0.789 g/cm³",
          error: null,
          isFinalAnswer: true,
        },
        status: "final_answer",
        answer: "0.789 g/cm³",
      },
    },
  ],
  [[], "updates", { act: { outcome: { step: 1 } } }],
  [
    [],
    "updates",
    {
      observe: {
        steps: [
          {
            step: 1,
            kind: "action",
            thought: "Look up both densities.",
            code: "...",
            observation: "680 kg/m³ 0.789 g/cm³",
            error: null,
            isFinalAnswer: false,
          },
        ],
        status: "running",
      },
    },
  ],
];

describe("run progress tree", () => {
  it("nests concurrent sub-agent calls under the action that made them", () => {
    const lines: string[] = [];
    const p = new RunProgress({ onLine: (l) => lines.push(l) });
    for (const e of events) p.apply(e);
    expect(p.root?.name).toBe("manager");
    expect(p.root?.task).toBe("Does birch plywood float in ethanol?");
    const step = p.root!.steps[0];
    expect(step.children.map((c) => [c.name, c.task, c.answer])).toEqual([
      ["wikipedia_search", "What is the density of birch plywood?", "680 kg/m³"],
      ["wikipedia_search", "What is the density of ethanol?", "0.789 g/cm³"],
    ]);
    expect(step.observation).toBe("680 kg/m³ 0.789 g/cm³");
    // The manager is still working: it shows a spinner line, the finished sub-agents collapse.
    const text = p.render("*", 100).join("\n");
    expect(text).toContain("* manager: Does birch plywood float in ethanol?");
    expect(text).toContain("✓ wikipedia_search: What is the density of ethanol?");
    expect(text).toContain("→ 0.789 g/cm³");
    expect(text).toContain("* thinking…");
    // Plain line output (non-TTY) indents sub-agents.
    expect(lines).toContain("  [wikipedia_search] done (final_answer): 680 kg/m³");
  });

  it("finishes the root with its answer and ignores events it does not understand", () => {
    const p = new RunProgress();
    for (const e of events) p.apply(e);
    p.apply([
      [],
      "updates",
      { observe: { status: "final_answer", answer: "Yes, it floats.", steps: [] } },
    ]);
    p.apply([[], "custom", "not an object"] as StreamEvent);
    p.apply([["weird"], "updates", { node: 42 }] as StreamEvent);
    expect(p.root?.phase).toBe("done");
    expect(p.output?.answer).toBe("Yes, it floats.");
    expect(p.render("*").join("\n")).toContain("answer: Yes, it floats.");
  });

  it("starts a resumed run's tree from the checkpointed steps", () => {
    const lines: string[] = [];
    const p = new RunProgress({ onLine: (l) => lines.push(l) });
    p.seed({
      question: "How many years?",
      agent: "manager",
      steps: [
        {
          step: 1,
          kind: "action",
          thought: "Ask both.",
          code: "x",
          observation: "1889 and 1930",
          error: null,
          isFinalAnswer: false,
        },
      ],
    });
    p.apply([
      [],
      "updates",
      { plan: { pending: { step: 2, thought: "Subtract.", code: "final_answer(1930 - 1889)" } } },
    ]);
    expect(p.root?.task).toBe("How many years?");
    expect(p.root?.steps.map((s) => [s.step, s.observation ?? null])).toEqual([
      [1, "1889 and 1930"],
      [2, null],
    ]);
    expect(lines[1]).toBe("[manager] step 1 (done before): Ask both.");
  });

  it("clips long code and observations with a visible marker", () => {
    expect(clip("a\nb\nc\nd", 2, 80)).toEqual(["a", "b", "… (2 more lines)"]);
    expect(clip("x".repeat(30), 1, 10)).toEqual(["xxxxxxxxx…"]);
  });
});

describe("RunProgress: plain nodes of app graphs", () => {
  it("shows each node's stage line and counts only the model calls a node made itself (nodeUsage)", () => {
    const lines: string[] = [];
    const p = new RunProgress({ onLine: (l) => lines.push(l) });
    const u = (calls: number) => ({
      calls,
      inputTokens: 10 * calls,
      outputTokens: calls,
      cachedInputTokens: 0,
    });
    p.apply([
      [],
      "updates",
      { start: { agent: "research", task: "Towers", stage: "up to 4 sub-question(s)" } },
    ]);
    // The research node rolls up the planner's usage (already counted from its own nodes): no nodeUsage.
    p.apply([[], "updates", { research: { usage: { planner: u(5) }, stage: "3 researched" } }]);
    p.apply([
      [],
      "updates",
      {
        write: {
          usage: { writer: u(4) },
          nodeUsage: { writer: u(4) },
          stage: "drafted 3 section(s)",
        },
      },
    ]);
    expect(p.totals).toEqual({ calls: 4, inputTokens: 40, outputTokens: 4 });
    expect(p.root?.name).toBe("research");
    expect(p.root?.stages).toEqual([
      "up to 4 sub-question(s)",
      "3 researched",
      "drafted 3 section(s)",
    ]);
    expect(p.render("…").join("\n")).toContain("• drafted 3 section(s)");
    expect(lines).toContain("[research] write: drafted 3 section(s)");
  });
});
